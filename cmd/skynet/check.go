package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/skynetml/skynet/engine"
	"github.com/skynetml/skynet/pool"
)

func runCheck(args []string, stdout, stderr io.Writer) int {
	stderr = syncWriter(stderr)
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	metric := fs.String("metric", "", "path of metric.py")
	data := fs.String("data", "", "case file (JSONL)")
	samples := fs.Int("samples", engine.DefaultSamples, "number of sample cases to call score on")
	asJSON := fs.Bool("json", false, `print {"ok": bool, "checks": [...]} as JSON`)
	timeout := fs.Duration("timeout", engine.DefaultTimeout, "time limit per score call (at most 600s)")
	sv := &supervisorFlags{loadTimeout: fs.Duration("load-timeout", engine.DefaultTimeout, "time limit for loading the metric: importing it, checking it")}
	sv.addPoolFlags(fs)
	models := addModelFlags(fs)
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if !required(stderr, "check", "metric", *metric, "data", *data) || missingFiles(stderr, "check", "metric", *metric) ||
		stdinData(stderr, "check", *data) || caseFile(stderr, "check", *data) {
		return exitUsage
	}
	cases, err := readSamples(*data, *samples)
	if err != nil {
		fmt.Fprintf(stderr, "skynet check: %v\n", err)
		return exitUsage
	}
	renamed(fs, stderr)
	client, err := models.client()
	if err != nil {
		fmt.Fprintf(stderr, "skynet check: %v\n", err)
		return exitUsage
	}
	defer client.Close()
	// A worker process runs the check: a metric that crashes or hangs while
	// loading, or on a sample case, fails a check instead of taking skynet
	// check with it. One, unless --processes asks that more load it.
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "processes" || f.Name == "interpreters" })
	if !given {
		sv.processes = 1
	}
	opts := sv.poolOptions("check", engine.Options{Metric: *metric, Samples: *samples, Timeout: *timeout, LLM: client}, 0, stderr)
	var checks []engine.Check
	p, err := pool.Open(opts)
	if ce, isCheck := errors.AsType[*engine.CheckError](err); isCheck {
		checks = ce.Checks
	} else if err != nil {
		fmt.Fprintf(stderr, "skynet check: %v\n", err)
		return exitUsage
	} else {
		checks = p.Check(context.Background(), cases)
		p.Close()
	}
	ok := true
	for _, c := range checks {
		ok = ok && c.OK
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(struct {
			OK     bool           `json:"ok"`
			Checks []engine.Check `json:"checks"`
		}{ok, checks})
	} else {
		for _, c := range checks {
			status := "ok    "
			if !c.OK {
				status = "FAILED"
			}
			where := ""
			if c.Case != "" {
				where = " [case " + c.Case + "]"
			}
			fmt.Fprintf(stdout, "%s  %s%s: %s\n", status, c.Name, where, c.Message)
			if !c.OK && c.Fix != "" {
				fmt.Fprintf(stdout, "        fix: %s\n", c.Fix)
			}
			if !c.OK && c.Detail != "" {
				fmt.Fprintf(stdout, "\n%s\n", c.Detail)
			}
		}
	}
	if !ok {
		return exitCheck
	}
	return exitOK
}

// readSamples reads the first n cases; a bad line among them is a file error.
func readSamples(path string, n int) ([]engine.Case, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cr := engine.NewCaseReader(f)
	var cases []engine.Case
	for len(cases) < n {
		c, err := cr.Next()
		if err == io.EOF {
			break
		}
		var le *engine.LineError
		if errors.As(err, &le) {
			return nil, fmt.Errorf("%s: %v", path, err)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		cases = append(cases, c)
	}
	if len(cases) == 0 {
		return nil, fmt.Errorf("%s: no cases", path)
	}
	return cases, nil
}
