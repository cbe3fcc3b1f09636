package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/skynetml/skynet/caseio"
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
		stdinData(stderr, "check", *data) || caseFile(stderr, "check", *data) || missingFiles(stderr, "check", "data", *data) ||
		venvRefused(stderr, "check") {
		return exitUsage
	}
	cases, badLines, err := readSamples(*data, *samples)
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
	// The pool's warnings come after the checks, leaving out what a check
	// already says (the threads notice): once each, in one wording.
	var warnMu sync.Mutex
	var warnings []string
	opts.OnWarning = func(msg string) {
		warnMu.Lock()
		warnings = append(warnings, msg)
		warnMu.Unlock()
	}
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
	if len(badLines) > 0 {
		checks = append(checks, caseFileNotice(badLines))
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
			} else if c.Name == checkCaseFile {
				status = "note  "
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
	warnMu.Lock()
	for _, w := range warnings {
		if !slices.ContainsFunc(checks, func(c engine.Check) bool { return c.Message == w }) {
			fmt.Fprintf(stderr, "skynet check: warning: %s\n", w)
		}
	}
	warnMu.Unlock()
	if !ok {
		return exitCheck
	}
	return exitOK
}

// checkCaseFile names check's notice of lines of the case file that are
// not cases: skynet score's rule, one for both commands, is that such a
// line is an input error of its case, never the end of the command.
const checkCaseFile = "case file"

// maxBadLinesNamed is how many bad lines the notice quotes.
const maxBadLinesNamed = 3

// readSamples reads the first n cases. A line that is not a case is passed
// over, as skynet score passes over it (an input error result), and
// returned in bad; a file in which no line is a case is an error.
func readSamples(path string, n int) (cases []engine.Case, bad []*caseio.LineError, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	cr := caseio.NewReader(f)
	for len(cases) < n {
		c, err := cr.Next()
		if err == io.EOF {
			break
		}
		if le, ok := errors.AsType[*caseio.LineError](err); ok {
			bad = append(bad, le)
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", path, err)
		}
		cases = append(cases, c)
	}
	switch {
	case len(cases) == 0 && len(bad) > 0:
		return nil, nil, fmt.Errorf("%s: no line is a case (%v)", path, bad[0])
	case len(cases) == 0:
		return nil, nil, fmt.Errorf("%s: no cases", path)
	}
	return cases, bad, nil
}

// caseFileNotice says which lines read for the samples were not cases.
func caseFileNotice(bad []*caseio.LineError) engine.Check {
	named := make([]string, 0, maxBadLinesNamed)
	for _, le := range bad[:min(len(bad), maxBadLinesNamed)] {
		named = append(named, le.Error())
	}
	more := ""
	if len(bad) > maxBadLinesNamed {
		more = fmt.Sprintf("; and %d more", len(bad)-maxBadLinesNamed)
	}
	return engine.Check{Name: checkCaseFile, OK: true, Message: fmt.Sprintf(
		"%d line(s) read for the samples are not cases, so the samples are the next ones (skynet score gives each an \"input\" error result and goes on): %s%s",
		len(bad), strings.Join(named, "; "), more)}
}
