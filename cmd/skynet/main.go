// Command skynet runs user-written metric.py scoring functions in an
// embedded CPython.
//
//	skynet check --metric PATH --data CASES.jsonl [--samples 3] [--json]
//	skynet score --metric PATH --data CASES.jsonl [--out RESULTS.jsonl [--resume [--retry-failed]]] [--timeout 60s]
//	skynet eval --program program.py --artifact FILE --metric metric.py --data DATASET [--split val]
//	skynet bench --metric PATH [--data CASES.jsonl] [--cases N] [--file CASES.jsonl] [--runs 3] [--json]
//	skynet serve --metric PATH [--listen 127.0.0.1:8765] [--token T] [--data SAMPLES.jsonl]
//	skynet merge --data CASES.jsonl [--out RESULTS.jsonl] PART...
//	skynet stub DIR
//	skynet version
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/skynetml/skynet/cpython"
	"github.com/skynetml/skynet/internal/suggest"
	"github.com/skynetml/skynet/llm"
	"github.com/skynetml/skynet/skynetmod"
)

// Exit codes, one rule for every command: 2 is a problem with what skynet
// was given (flags, files, an input with no case in it), found before or
// instead of scoring; 1 is a metric that failed (a check, a crash, or every
// case); 130 and 143 an interrupted run (SIGINT, SIGTERM), as shells do.
const (
	exitOK    = 0
	exitCheck = 1 // a contract check failed, a case crashed, or no case was scored
	exitUsage = 2 // bad flags, missing or unreadable files, no readable case
)

const usage = `skynet runs metric.py scoring functions in an embedded CPython.

Usage:
  skynet check --metric PATH --data CASES.jsonl [--samples 3] [--json]
  skynet score --metric PATH --data CASES.jsonl [--out RESULTS.jsonl [--resume [--retry-failed]]] [--timeout 60s]
              [--processes N] [--threads K] [--shard I/N]
  skynet eval --program program.py --artifact FILE --metric metric.py --data DATASET [--split val]
              [--inputs a,b] [--outputs label] [--limit N] [--sample N --seed S] [--out RESULTS.jsonl]
  skynet bench --metric PATH [--data CASES.jsonl] [--cases N] [--file CASES.jsonl] [--runs 3] [--json]
  skynet serve --metric PATH [--listen 127.0.0.1:8765] [--processes N] [--threads K] [--token T]
              [--data SAMPLES.jsonl] [--program program.py --artifact FILE]
              score over HTTP: POST /v1/score, POST /v1/rewards, GET /healthz, GET /metrics
  skynet merge --data CASES.jsonl [--eval [--split S]] [--out RESULTS.jsonl] PART...
              merge the results of score/eval --shard I/N runs, checking each case has one
  skynet compare BASE.jsonl NEW.jsonl [--json] [--fail-if-worse]
              two runs of one dataset, case by case: the difference with its interval, what changed
  skynet report RESULTS.jsonl [--base BASE.jsonl] -o report.html
              one HTML file to look at a run (and its comparison with BASE) in a browser
  skynet stub DIR    write skynet.pyi (type stub of the skynet module) into DIR
  skynet version     print skynet's version and the CPython it embeds (also --version)

Run "skynet COMMAND -h" (or "skynet help COMMAND") for a command's flags.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// envModels is the model configuration read from the environment before
// the API keys are removed from it, so Python code never sees them.
var envModels = func() llm.Config {
	c := llm.ConfigFromEnv()
	llm.ScrubEnv()
	return c
}()

// modelFlags are the flags that configure skynet.llm().
type modelFlags struct {
	metric, reflection, task, baseURL, prices, cache *string
	cacheMetric                                      *bool
	maxInFlight                                      *int
}

func addModelFlags(fs *flag.FlagSet) modelFlags {
	return modelFlags{
		metric:      fs.String("metric-model", envModels.MetricModel, "model for llm() calls from score, as provider/model (default: the reflection model; env SKYNET_METRIC_MODEL)"),
		reflection:  fs.String("reflection-model", envModels.ReflectionModel, "reflection model, provider/model (env SKYNET_REFLECTION_MODEL)"),
		task:        fs.String("task-model", envModels.TaskModel, "model for llm() calls from run code (env SKYNET_TASK_MODEL)"),
		baseURL:     fs.String("llm-base-url", envModels.BaseURL, "OpenAI-compatible API base URL (env SKYNET_LLM_BASE_URL or OPENAI_BASE_URL; default "+llm.DefaultBaseURL+")"),
		prices:      fs.String("prices", "", "price file: JSON keyed by model, {input_per_mtok, output_per_mtok} or LiteLLM's per-token file"),
		cache:       fs.String("llm-cache", "", "on-disk cache of temperature-0 model replies (a bbolt file); hits cost 0"),
		cacheMetric: fs.Bool("cache-metric-model", false, "let the metric model's temperature-0 calls use --llm-cache too"),
		maxInFlight: fs.Int("llm-max-inflight", 64, "most model requests at once, per model (an async judge with more cases in flight waits for a slot)"),
	}
}

// client builds the model client; the API key comes from the environment only.
func (m modelFlags) client() (*llm.Client, error) {
	cfg := envModels
	cfg.MetricModel, cfg.ReflectionModel, cfg.TaskModel, cfg.BaseURL = *m.metric, *m.reflection, *m.task, *m.baseURL
	cfg.MaxInFlight = *m.maxInFlight
	if *m.prices != "" {
		p, err := llm.LoadPrices(*m.prices)
		if err != nil {
			return nil, err
		}
		cfg.Prices = p
	}
	if *m.cache != "" {
		c, err := llm.OpenCache(*m.cache)
		if err != nil {
			return nil, err
		}
		cfg.Cache, cfg.CacheMetric = c, *m.cacheMetric
	}
	return llm.New(cfg)
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "check":
		return jsonErrors("check", args[1:], stdout, stderr, runCheck)
	case "score":
		return runScore(args[1:], stdout, stderr)
	case "eval":
		return runEval(args[1:], stdout, stderr)
	case "bench":
		return jsonErrors("bench", args[1:], stdout, stderr, runBench)
	case "serve":
		return runServe(args[1:], stdout, stderr)
	case "merge":
		return runMerge(args[1:], stdout, stderr)
	case "compare":
		return runCompare(args[1:], stdout, stderr)
	case "report":
		return runReport(args[1:], stdout, stderr)
	case "stub":
		return runStub(args[1:], stdout, stderr)
	case "version", "--version":
		return runVersion(args[1:], stdout, stderr)
	case "-h", "--help", "-help":
		fmt.Fprint(stdout, usage)
		return exitOK
	case "help":
		// skynet help CMD is skynet CMD -h.
		if len(args) == 1 {
			fmt.Fprint(stdout, usage)
			return exitOK
		}
		if !slices.Contains(commandNames, args[1]) {
			return unknownCommand(args[1], stderr)
		}
		return run([]string{args[1], "-h"}, stdout, stderr)
	}
	return unknownCommand(args[0], stderr)
}

// commandNames are skynet's subcommands.
var commandNames = []string{"check", "score", "eval", "bench", "serve", "merge", "compare", "report", "stub", "version"}

func unknownCommand(name string, stderr io.Writer) int {
	msg := fmt.Sprintf("skynet: unknown command %q", name)
	best, bestD := "", 3
	for _, c := range commandNames {
		if d := suggest.Distance(name, c); d < bestD {
			best, bestD = c, d
		}
	}
	if best != "" {
		msg += fmt.Sprintf(" (did you mean %s?)", best)
	}
	fmt.Fprintf(stderr, "%s\n\n%s", msg, usage)
	return exitUsage
}

// required reports the first flag left empty, in the order given as
// name, value pairs.
func required(stderr io.Writer, cmd string, pairs ...string) bool {
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] == "" {
			fmt.Fprintf(stderr, "skynet %s: --%s is required\n", cmd, pairs[i])
			return false
		}
	}
	return true
}

// missingFiles reports the first of the named file flags (name, path
// pairs) whose file cannot be opened: a usage error found at once, before a
// Python process starts, so a wrong --metric path is exit 2 like a wrong
// --data path, not a failed "metric loads" check.
func missingFiles(stderr io.Writer, cmd string, pairs ...string) bool {
	for i := 0; i+1 < len(pairs); i += 2 {
		name, path := pairs[i], pairs[i+1]
		st, err := os.Stat(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			fmt.Fprintf(stderr, "skynet %s: --%s %s: no such file\n", cmd, name, path)
		case err != nil:
			fmt.Fprintf(stderr, "skynet %s: --%s: %v\n", cmd, name, err)
		case st.IsDir():
			fmt.Fprintf(stderr, "skynet %s: --%s %s is a directory, not a file\n", cmd, name, path)
		default:
			continue
		}
		return true
	}
	return false
}

// missingPath is missingFiles for a flag that takes a file or a directory
// (eval's dataset).
func missingPath(stderr io.Writer, cmd, name, path string) bool {
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			fmt.Fprintf(stderr, "skynet %s: --%s %s: no such file or directory\n", cmd, name, path)
		} else {
			fmt.Fprintf(stderr, "skynet %s: --%s: %v\n", cmd, name, err)
		}
		return true
	}
	return false
}

// venvRefused refuses a virtualenv of another Python major.minor before
// anything is read or written (cpython.CheckVenv): no import of its packages
// would work. One of another patch release or installation is warned of
// by the pool, which every command's workers start from.
func venvRefused(stderr io.Writer, cmd string) bool {
	if e := cpython.CheckVenv(""); e != nil && e.Fatal() {
		fmt.Fprintf(stderr, "skynet %s: %v\n", cmd, e)
		return true
	}
	return false
}

// stdinData refuses --data - for a command other than score: check and eval
// read the data again in their child process, which has no such stdin, and
// bench cycles the cases of a file.
func stdinData(stderr io.Writer, cmd, data string) bool {
	if data != "-" {
		return false
	}
	fmt.Fprintf(stderr, "skynet %s: --data -: standard input is read by skynet score only; give a file\n", cmd)
	return true
}

// caseFile refuses a --data that is a directory, at once: a case file is
// one file (skynet eval reads a directory of splits).
func caseFile(stderr io.Writer, cmd, data string) bool {
	if st, err := os.Stat(data); err != nil || !st.IsDir() {
		return false
	}
	fmt.Fprintf(stderr, "skynet %s: --data %s is a directory, not a case file (a directory of split files is a dataset: skynet eval reads it)\n", cmd, data)
	return true
}

// runStub writes the skynet module's type stub where an editor can find it.
func runStub(args []string, stdout, stderr io.Writer) int {
	const stubUsage = "usage: skynet stub DIR   (writes DIR/skynet.pyi)"
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
		fmt.Fprintln(stdout, stubUsage)
		return exitOK
	}
	if len(args) != 1 || strings.HasPrefix(args[0], "-") {
		fmt.Fprintln(stderr, stubUsage)
		return exitUsage
	}
	path := filepath.Join(args[0], "skynet.pyi")
	if err := os.MkdirAll(args[0], 0o755); err != nil {
		fmt.Fprintf(stderr, "skynet stub: %v\n", err)
		return exitUsage
	}
	if err := os.WriteFile(path, []byte(skynetmod.Stub), 0o644); err != nil {
		fmt.Fprintf(stderr, "skynet stub: %v\n", err)
		return exitUsage
	}
	fmt.Fprintf(stdout, "wrote %s\n", path)
	return exitOK
}
