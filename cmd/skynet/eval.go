package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"iter"
	"os"
	"path/filepath"
	"strings"

	"github.com/skynetml/skynet/caseio"
	"github.com/skynetml/skynet/engine"
	"github.com/skynetml/skynet/pool"
)

func runEval(args []string, stdout, stderr io.Writer) int {
	stderr = syncWriter(stderr)
	fs := flag.NewFlagSet("eval", flag.ContinueOnError)
	program := fs.String("program", "", "path of program.py (defines run(artifact, input))")
	artifactPath := fs.String("artifact", "", "file whose text is the artifact passed to run (e.g. a prompt)")
	metric := fs.String("metric", "", "path of metric.py")
	data := fs.String("data", "", "dataset: a .jsonl or .csv file, or a directory with one file per split")
	split := fs.String("split", "", "split to evaluate (train, val, test): a 'split' column's value or a file in --data")
	inputs := fs.String("inputs", "", "input columns, comma-separated (default: every column but outputs, id and split)")
	outputs := fs.String("outputs", "", "output columns, comma-separated: they make each case's expected dict")
	limit := fs.Int("limit", 0, "evaluate at most this many rows (after --sample)")
	sample := fs.Int("sample", 0, "evaluate a random sample of this many rows")
	seed := fs.Uint64("seed", 0, "seed for --sample")
	of := addOutputFlags(fs, "evaluate")
	out := of.out
	timeout := fs.Duration("timeout", engine.DefaultTimeout, "time limit per score call (at most 600s)")
	runTimeout := fs.Duration("run-timeout", 0, "time limit per run call (default: --timeout, at most 600s)")
	svFlags := addSupervisorFlags(fs)
	sf := addShardFlags(fs)
	models := addModelFlags(fs)
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if !required(stderr, "eval", "program", *program, "artifact", *artifactPath, "metric", *metric, "data", *data) ||
		missingFiles(stderr, "eval", "program", *program, "metric", *metric) || stdinData(stderr, "eval", *data) ||
		missingPath(stderr, "eval", "data", *data) || venvRefused(stderr, "eval") {
		return exitUsage
	}
	sv := svFlags
	renamed(fs, stderr)
	artifact, err := os.ReadFile(*artifactPath)
	if err != nil {
		fmt.Fprintf(stderr, "skynet eval: artifact: %v\n", err)
		return exitUsage
	}
	cases, err := caseio.Dataset{Path: *data, Inputs: columns(*inputs), Outputs: columns(*outputs), Split: *split,
		Sample: *sample, Seed: *seed, Limit: *limit}.Cases()
	var splitErr *caseio.SplitError
	if errors.As(err, &splitErr) {
		fmt.Fprintf(stderr, "skynet eval: --split %s: %v\n", *split, err)
		return exitUsage
	}
	var colErr *caseio.ColumnError
	if errors.As(err, &colErr) {
		flagName, value := "inputs", *inputs
		if colErr.Output {
			flagName, value = "outputs", *outputs
		}
		fmt.Fprintf(stderr, "skynet eval: --%s %s: %v\n", flagName, value, err)
		return exitUsage
	}
	if err != nil {
		fmt.Fprintf(stderr, "skynet eval: %v\n", err)
		return exitUsage
	}
	// Every row is read: a repeated id is refused before a result is written.
	ids := make(map[string]int, len(cases))
	for i, c := range cases {
		if prev, dup := ids[c.ID]; dup {
			fmt.Fprintf(stderr, "skynet eval: %s: %v: nothing was evaluated\n", *data, &duplicateIDError{id: c.ID, line: i + 1, prev: prev, what: "row"})
			return exitUsage
		}
		ids[c.ID] = i + 1
	}
	if *outputs == "" {
		// Not an error (a metric may not read expected), but the usual
		// cause of every case failing with a TypeError about None.
		fmt.Fprintf(stderr, "skynet eval: note: no --outputs, so every case's expected is None; %s\n", outputsHint(cases))
	}
	artifactText := strings.TrimRight(string(artifact), "\n")
	shard, err := sf.spec()
	if err != nil {
		fmt.Fprintf(stderr, "skynet eval: %v\n", err)
		return exitUsage
	}
	*out = shard.outPath(*out)
	made, err := identityOf("eval", "metric", *metric, "program", *program, "artifact", *artifactPath)
	if err != nil {
		fmt.Fprintf(stderr, "skynet eval: %v\n", err)
		return exitUsage
	}
	dest, err := resultsOutput(of, made, []inputFile{
		{"data", *data, "the dataset"}, {"program", *program, "the program"}, {"artifact", *artifactPath, "the artifact"},
		{"metric", *metric, "the metric"}, {"prices", *models.prices, "the price file"}, {"llm-cache", *models.cache, "the model-reply cache"},
	}, stdout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "skynet eval: %v\n", err)
		return exitUsage
	}
	defer dest.close()
	summary, done := dest.summary, dest.done
	if id, ok := foreignID(done, func(id string) bool { return ids[id] > 0 && shard.takes(id) }); ok {
		fmt.Fprintf(stderr, "skynet eval: --resume: %s\n", foreignMessage(*out, shard.of(*data), id))
		return exitUsage
	}
	results, err := dest.open()
	if err != nil {
		fmt.Fprintf(stderr, "skynet eval: %v\n", err)
		return exitUsage
	}
	tasks := datasetTasks(cases, done, shard)
	if dest.order != nil {
		for i, c := range cases {
			if done[c.ID] {
				dest.order.keptAt(c.ID, i+1)
			}
		}
	}
	client, err := models.client()
	if err != nil {
		fmt.Fprintf(stderr, "skynet eval: %v\n", err)
		return exitUsage
	}
	defer client.Close()
	opts := sv.poolOptions("eval", engine.Options{Metric: *metric, Program: *program, Timeout: *timeout,
		RunTimeout: *runTimeout, LLM: client}, len(cases)-len(done), stderr)
	s := sv.supervisor("eval", opts, client, results, stderr)
	s.artifact = artifactText
	s.tasks, s.shard, s.kept, s.order = tasks, shard, dest.kept, dest.order
	s.cluster, s.sumJSON = *of.cluster, *of.summaryJSON
	s.noCases = func() string {
		return fmt.Sprintf("no row of %s could be read as a case (see the input errors in the results)", *data)
	}
	total := len(cases) - len(done)
	if shard.Count > 1 {
		total = 0
	}
	code := runSupervised(s, max(0, total), done, summary, stderr)
	if *outputs == "" && s.st.errors[engine.KindException] > 0 {
		fmt.Fprintf(stderr, "skynet eval: %d case(s) raised, and no --outputs was given (expected is None): %s\n", s.st.errors[engine.KindException], outputsHint(cases))
	}
	return code
}

// outputsHint says how to name the dataset's label columns, listing the
// columns its first row has (every one an input without --outputs).
func outputsHint(cases []engine.Case) string {
	for _, c := range cases {
		raw, ok := c.Input.(json.RawMessage)
		if !ok || c.Invalid() != nil {
			continue
		}
		var cols []string
		dec := json.NewDecoder(bytes.NewReader(raw))
		if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
			continue
		}
		for dec.More() {
			tok, err := dec.Token()
			var skip json.RawMessage
			if err != nil || dec.Decode(&skip) != nil {
				break
			}
			cols = append(cols, tok.(string))
		}
		if len(cols) > 0 {
			return fmt.Sprintf("name the columns that hold the answers with --outputs, e.g. --outputs %s (the dataset's columns: %s)", cols[len(cols)-1], strings.Join(cols, ", "))
		}
	}
	return "name the columns that hold the answers with --outputs"
}

// inputFile is a file (or directory) a command reads: its flag, and what
// the file is ("the case file").
type inputFile struct{ flag, path, what string }

// refuseOverwrite errors when out is one of the inputs, through any path or
// link, or a file directly inside an input directory (a split of eval's
// dataset): opening it for results would destroy it before it is read.
func refuseOverwrite(out string, inputs []inputFile) error {
	oi, err := os.Stat(out)
	if err != nil {
		return nil // a file that does not exist yet is no input
	}
	for _, in := range inputs {
		if in.path == "" || in.path == "-" {
			continue
		}
		ii, err := os.Stat(in.path)
		if err != nil {
			continue
		}
		named := in.what + " " + in.path
		if in.flag != "" {
			named = in.what + " --" + in.flag + " " + in.path
		}
		if os.SameFile(ii, oi) {
			return fmt.Errorf("--out %s is %s: writing results there would destroy it; name another results file", out, named)
		}
		if di, err := os.Stat(filepath.Dir(out)); err == nil && ii.IsDir() && os.SameFile(ii, di) {
			return fmt.Errorf("--out %s is inside %s: writing results there would destroy a split or add one; name a results file elsewhere", out, named)
		}
	}
	return nil
}

// datasetTasks hands the dataset's cases to the supervisor; a repeated
// id stops the input.
func datasetTasks(cases []engine.Case, done map[string]bool, shard shardSpec) iter.Seq[*pool.Task] {
	return func(yield func(*pool.Task) bool) {
		for i, c := range cases {
			if shard.takes(c.ID) && !done[c.ID] && !yield(pool.NewTask(c, i+1, true)) {
				return
			}
		}
	}
}

// printResumed says what --resume kept and, since the run's own mean
// covers only what it scored, the mean of the whole results file.
func printResumed(w io.Writer, done map[string]bool, kept mean, scored *summary, order *resumeOrder) {
	if len(done) > 0 {
		fmt.Fprintf(w, "resumed: %d case(s) were already done and kept\n", len(done))
	}
	if line := order.droppedLine(); line != "" {
		fmt.Fprintln(w, line)
	}
	if len(done) == 0 {
		return
	}
	if n := kept.n + scored.count; n > 0 {
		fmt.Fprintf(w, "all %d result(s), kept and new: mean score %s (failed cases count as 0)\n", n, summaryNumber((kept.sum+scored.scoreSum())/float64(n)))
	}
}

func columns(s string) []string {
	var out []string
	for _, c := range strings.Split(s, ",") {
		if c = strings.TrimSpace(c); c != "" {
			out = append(out, c)
		}
	}
	return out
}

// openFailed reports why the engine did not open: a failed check (exit 1)
// or anything else (exit 2).
func openFailed(stderr io.Writer, cmd string, err error) int {
	var ce *engine.CheckError
	if errors.As(err, &ce) {
		f := ce.Failed()
		fmt.Fprintf(stderr, "skynet %s: check %q failed: %s\n", cmd, f.Name, f.Message)
		if f.Detail != "" {
			fmt.Fprintf(stderr, "\n%s", f.Detail)
		}
		return exitCheck
	}
	fmt.Fprintf(stderr, "skynet %s: %v\n", cmd, err)
	return exitUsage
}

// resultsDest is where a run's results and summary go. open opens the
// results (with --resume, after rewriting the file with the results it
// keeps), once the checks that may refuse the run have passed.
type resultsDest struct {
	open    func() (io.Writer, error)
	summary io.Writer
	done    map[string]bool // with --resume: the ids already finished
	kept    mean            // with --resume: their scores
	order   *resumeOrder    // with --resume: puts the file in input order at the end
	close   func()
}

// resultsOutput opens where results go: --out, or stdout. The summary goes
// to stdout when results go to a file, else to stderr. With --resume, the
// file keeps its finished results (see resumeResults) and done holds their
// ids; --retry-failed drops its failed results too, to score them again;
// results made by another metric (made, against OUT.meta.json) are refused
// unless --allow-mixed. A results file that is one of the command's inputs is
// refused. Opening the file records made beside it.
func resultsOutput(o outputFlags, made runIdentity, inputs []inputFile, stdout, stderr io.Writer) (resultsDest, error) {
	out, resume, retryFailed := *o.out, *o.resume, *o.retry
	if retryFailed && !resume {
		return resultsDest{}, errors.New("--retry-failed needs --resume (and --out): it scores again the failed cases of a results file")
	}
	if *o.mix && !resume {
		return resultsDest{}, errors.New("--allow-mixed needs --resume: it keeps the results another metric made")
	}
	if out == "" {
		if resume {
			return resultsDest{}, errors.New("--resume needs --out: the results file to continue")
		}
		return resultsDest{summary: stderr, close: func() {}, open: func() (io.Writer, error) { return stdout, nil }}, nil
	}
	if err := refuseOverwrite(out, inputs); err != nil {
		return resultsDest{}, err
	}
	d := resultsDest{summary: stdout}
	flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	var rewrite func() error
	if resume {
		var err error
		if d.done, d.kept, d.order, rewrite, err = resumeResults(out, retryFailed); err != nil {
			return resultsDest{}, err
		}
		flags = os.O_WRONLY | os.O_CREATE | os.O_APPEND
		if len(d.done) > 0 {
			was, ok, err := readIdentity(out)
			switch {
			case err != nil:
				return resultsDest{}, err
			case !ok:
				fmt.Fprintf(stderr, "warning: --resume: nothing records what made the results in %s (no %s%s: an older skynet's, or another program's); they are kept as made by this run's %s\n", out, out, metaSuffix, made)
			case was.same(made):
				made.Started, made.Mixed = was.Started, was.Mixed
			case !*o.mix:
				return resultsDest{}, errors.New(changedMessage(out, was, made))
			default:
				fmt.Fprintf(stderr, "warning: --allow-mixed: %s keeps %d result(s) made by %s; this run's are made by %s, and the mean mixes both\n", out, len(d.done), was, made)
				made.Mixed = append(was.Mixed, runIdentity{Skynet: was.Skynet, Command: was.Command, Started: was.Started, Files: was.Files})
			}
		}
	}
	var f *os.File
	d.close = func() {
		if f != nil {
			f.Close()
		}
	}
	d.open = func() (io.Writer, error) {
		if rewrite != nil {
			if err := rewrite(); err != nil {
				return nil, err
			}
		}
		if err := writeIdentity(out, made); err != nil {
			return nil, err
		}
		var err error
		if f, err = os.OpenFile(out, flags, 0o644); err != nil {
			return nil, err
		}
		return f, nil
	}
	return d, nil
}
