package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/skynetml/skynet/engine"
)

func runCheck(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	metric := fs.String("metric", "", "path of metric.py")
	data := fs.String("data", "", "case file (JSONL)")
	samples := fs.Int("samples", engine.DefaultSamples, "number of sample cases to call score on")
	asJSON := fs.Bool("json", false, `print {"ok": bool, "checks": [...]} as JSON`)
	timeout := fs.Duration("timeout", engine.DefaultTimeout, "time limit per score call (at most 600s)")
	interps := addInterpretersFlag(fs)
	models := addModelFlags(fs)
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	if !required(stderr, "check", "metric", *metric, "data", *data) {
		return exitUsage
	}
	if *samples < 1 {
		fmt.Fprintln(stderr, "skynet check: --samples must be at least 1")
		return exitUsage
	}
	cases, err := readSamples(*data, *samples)
	if err != nil {
		fmt.Fprintf(stderr, "skynet check: %v\n", err)
		return exitUsage
	}
	client, err := models.client()
	if err != nil {
		fmt.Fprintf(stderr, "skynet check: %v\n", err)
		return exitUsage
	}
	defer client.Close()
	var checks []engine.Check
	e, err := engine.Open(engine.Options{Metric: *metric, Samples: *samples, Timeout: *timeout, LLM: client, Interpreters: int(*interps)})
	var ce *engine.CheckError
	switch {
	case errors.As(err, &ce):
		checks = ce.Checks
	case err != nil:
		fmt.Fprintf(stderr, "skynet check: %v\n", err)
		return exitUsage
	default:
		checks = e.Check(context.Background(), cases)
		e.Close()
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
			msg := strings.TrimPrefix(c.Message, c.Name+": ") // REWARD_SPEC errors name themselves
			fmt.Fprintf(stdout, "%s  %s%s: %s\n", status, c.Name, where, msg)
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
