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
	"syscall"
	"time"

	"github.com/skynetml/skynet/engine"
)

func runCheck(args []string, stdout, stderr io.Writer) int {
	stderr = syncWriter(stderr)
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	metric := fs.String("metric", "", "path of metric.py")
	data := fs.String("data", "", "case file (JSONL)")
	samples := fs.Int("samples", engine.DefaultSamples, "number of sample cases to call score on")
	asJSON := fs.Bool("json", false, `print {"ok": bool, "checks": [...]} as JSON`)
	timeout := fs.Duration("timeout", engine.DefaultTimeout, "time limit per score call (at most 600s)")
	addInterpretersFlag(fs) // TODO(pool): --interpreters is parsed but no longer used: sub-interpreters are gone.
	loadTimeout := fs.Duration("load-timeout", engine.DefaultTimeout, "time limit for loading the metric: importing it, checking it")
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
	opts := engine.Options{Metric: *metric, Samples: *samples, Timeout: *timeout}
	var checks []engine.Check
	if child, _ := isChild(); child {
		return serveCheck(opts, models, cases)
	}
	checks, code := superviseCheck(args, stderr, *loadTimeout, time.Duration(len(cases))*(max(*timeout, time.Second)+killGrace))
	if code != exitOK {
		return code
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

// serveCheck is skynet check's child process: it runs the checks and sends
// them to the parent (a "hello" once the metric loaded, so the parent can
// tell a slow load from a slow sample case).
func serveCheck(opts engine.Options, models modelFlags, cases []engine.Case) int {
	os.Unsetenv(childEnv)
	syscall.CloseOnExec(3)
	syscall.CloseOnExec(4)
	fw := newFrameWriter(os.NewFile(4, "results"), nil)
	client, err := models.client()
	if err != nil {
		fmt.Fprintf(os.Stderr, "skynet check: %v\n", err)
		fw.close(frameFailed, []byte{exitUsage})
		return exitUsage
	}
	defer client.Close()
	opts.LLM = client
	var checks []engine.Check
	e, err := engine.Open(opts)
	var ce *engine.CheckError
	switch {
	case errors.As(err, &ce):
		checks = ce.Checks
	case err != nil:
		fmt.Fprintf(os.Stderr, "skynet check: %v\n", err)
		fw.close(frameFailed, []byte{exitUsage})
		return exitUsage
	default:
		fw.send(frameHello, nil)
		checks = e.Check(context.Background(), cases)
	}
	b, err := json.Marshal(checks)
	if err != nil {
		return exitUsage
	}
	fw.close(frameChecks, b)
	return exitOK
}

// superviseCheck runs the checks in a child process, so that a metric that
// crashes or hangs while loading, or while scoring a sample case, fails a
// check instead of taking skynet check with it. perCases bounds the sample
// cases once the metric loaded.
func superviseCheck(args []string, stderr io.Writer, loadTimeout, perCases time.Duration) ([]engine.Check, int) {
	s := &supervisor{cmd: "check", args: append([]string{"check"}, args...), stderr: stderr}
	c, err := s.start(false)
	if err != nil {
		fmt.Fprintf(stderr, "skynet check: starting the Python process: %v\n", err)
		return nil, exitUsage
	}
	close(c.send) // check takes no cases from this side
	var checks []engine.Check
	var loadedAt time.Time
	deadline := time.NewTimer(loadTimeout) // nothing in the child bounds a load
	defer deadline.Stop()
	var why string
	frames := c.frames
	for frames != nil {
		select {
		case m, ok := <-frames:
			if !ok {
				frames = nil
				break
			}
			switch m.typ {
			case frameHello:
				loadedAt = time.Now()
				deadline.Reset(perCases + killGrace)
			case frameChecks:
				if err := json.Unmarshal(m.payload, &checks); err != nil {
					c.kill(fmt.Sprintf("%v: %v", errBadFrame, err))
				}
			case frameFailed:
				if len(m.payload) > 0 {
					c.failed = int(m.payload[0])
				}
			}
		case <-deadline.C:
			if loadedAt.IsZero() {
				why = fmt.Sprintf("loading the metric did not finish within %s (--load-timeout)", loadTimeout)
			} else {
				why = fmt.Sprintf("the sample cases did not finish within %s", perCases)
			}
			c.kill(why)
		}
	}
	<-c.exited
	select {
	case <-c.stderrIn:
	case <-time.After(drainLimit):
	}
	switch {
	case checks != nil && c.killed == "":
		return checks, exitOK
	case c.failed >= 0:
		return nil, c.failed // the child said why on stderr
	}
	if why == "" {
		why = c.deathReason("the metric")
		if out := c.tail.lastOutput(); out != "" {
			why += "; last output: " + out
		}
	}
	if loadedAt.IsZero() {
		if !strings.Contains(why, "did not finish") {
			why += " while loading the metric"
		}
		return []engine.Check{{Name: engine.CheckLoads, Message: why}}, exitOK
	}
	return []engine.Check{{Name: engine.CheckLoads, OK: true, Message: "loaded"},
		{Name: engine.CheckReturnValue, Message: why + " while scoring a sample case"}}, exitOK
}
