package main

import (
	"context"
	"flag"
	"fmt"
	"hash/maphash"
	"io"
	"strconv"
	"syscall"
	"time"

	"github.com/skynetml/skynet/engine"
	"github.com/skynetml/skynet/llm"
)

// openEngine builds the model client from the flags and opens the engine.
// A non-zero code means stop with it; otherwise closeFn closes both.
func openEngine(cmd string, stderr io.Writer, models modelFlags, opts engine.Options) (e *engine.Engine, client *llm.Client, closeFn func(), code int) {
	client, err := models.client()
	if err != nil {
		fmt.Fprintf(stderr, "skynet %s: %v\n", cmd, err)
		return nil, nil, nil, exitUsage
	}
	opts.LLM = client
	if e, err = engine.Open(opts); err != nil {
		client.Close()
		return nil, nil, nil, openFailed(stderr, cmd, err)
	}
	return e, client, func() { e.Close(); client.Close() }, exitOK
}

// supervisorFlags are the flags of score and eval that bound the child
// process running Python (supervise.go).
type supervisorFlags struct {
	loadTimeout *time.Duration
	maxCrashes  *int
	maxLine     int
}

func addSupervisorFlags(fs *flag.FlagSet) *supervisorFlags {
	sv := &supervisorFlags{
		loadTimeout: fs.Duration("load-timeout", engine.DefaultTimeout, "time limit for loading the metric (and program): importing it, checking it"),
		maxCrashes:  fs.Int("max-crashes", defaultMaxCrashes, "give up after this many cases in a row crash the Python process (the rest get crash results)"),
		maxLine:     engine.DefaultMaxLineBytes,
	}
	fs.IntVar(&sv.maxLine, "max-line-bytes", engine.DefaultMaxLineBytes, "longest case line read; a longer one is an input error")
	return sv
}

func (sv *supervisorFlags) supervisor(cmd string, args []string, timeout time.Duration, out, stderr io.Writer) *supervisor {
	if timeout <= 0 {
		timeout = engine.DefaultTimeout
	}
	return &supervisor{cmd: cmd, args: append([]string{cmd}, args...), withRun: cmd == "eval", timeout: timeout,
		loadTimeout: *sv.loadTimeout, maxCrashes: *sv.maxCrashes, stderr: stderr, out: out}
}

// runSupervised is what score and eval share once the input and output are
// open: the pass through child processes, a progress bar on a terminal, and
// the summary after the results. Exit codes, first that applies: 2 when
// the input held no case at all (noInput); 2 when the output failed; 130
// and 143 after SIGINT and SIGTERM; 2 when the input failed or no case in
// it could be read; 1 when the metric did not load, a
// case crashed or every case failed (nothing was scored); else 0.
func runSupervised(s *supervisor, total int, done map[string]bool, summary, stderr io.Writer) int {
	if isTerminal(stderr) {
		s.bar = &progress{w: stderr, total: total}
	}
	code := s.run(context.Background())
	if s.bar != nil {
		s.bar.done()
	}
	if code != exitOK {
		return code
	}
	if s.noInput != nil && s.interrupted == nil && s.writeErr == nil && s.inputDone && s.st.count == 0 && s.readErr() == nil {
		if msg := s.noInput(); msg != "" {
			// An empty input is a usage error, as skynet check says; not a
			// run that scored 0 cases.
			fmt.Fprintf(stderr, "skynet %s: %s\n", s.cmd, msg)
			return exitUsage
		}
	}
	if s.shard.Count > 1 {
		fmt.Fprintf(summary, "%s\n", s.shard)
	}
	s.st.print(summary, s.interrupted != nil)
	if line := s.restartLine(); line != "" {
		fmt.Fprintln(summary, line)
	}
	printResumed(summary, done, s.kept, s.st)
	printModelUse(summary, s.models.use)
	switch {
	case s.writeErr != nil:
		fmt.Fprintf(stderr, "skynet %s: writing results: %v\n", s.cmd, s.writeErr)
		return exitUsage
	case s.interrupted == syscall.SIGTERM:
		return 128 + int(syscall.SIGTERM)
	case s.interrupted != nil:
		return 128 + int(syscall.SIGINT)
	}
	if err := s.readErr(); err != nil {
		fmt.Fprintf(stderr, "skynet %s: %v\n", s.cmd, err)
		return exitUsage
	}
	failed := 0
	for _, n := range s.st.errors {
		failed += n
	}
	switch {
	case s.st.count > 0 && s.st.errors[engine.KindInput] == s.st.count:
		// Nothing the metric could be called on: the input is wrong, not the metric.
		msg := "no case could be read"
		if s.noCases != nil {
			msg = s.noCases()
		}
		fmt.Fprintf(stderr, "skynet %s: %s: the metric was not called\n", s.cmd, msg)
		return exitUsage
	case s.st.errors[engine.KindCrash] > 0:
		return exitCheck
	case s.st.count > 0 && failed == s.st.count:
		// A run whose every case failed scored nothing: a script that
		// checks only the exit code must not take it for a result.
		fmt.Fprintf(stderr, "skynet %s: every case failed (%d), none has a score: see \"error\" in the results\n", s.cmd, failed)
		return exitCheck
	}
	return exitOK
}

// idSet finds repeated case ids: it keeps a 64-bit hash of each and the
// line it came from, not the id itself.
type idSet struct {
	seed maphash.Seed
	m    map[uint64]int
}

func newIDSet() *idSet { return &idSet{seed: maphash.MakeSeed(), m: map[uint64]int{}} }

// add records id at line; a repeat returns the line it was first seen on.
func (s *idSet) add(id string, line int) (prev int, dup bool) {
	h := maphash.String(s.seed, id)
	if p, ok := s.m[h]; ok {
		return p, true
	}
	s.m[h] = line
	return 0, false
}

// interpreters is the --interpreters flag: "auto" (0) or a count up to
// maxInterpreters. TODO(pool): no longer passed to the engine, which scores
// in the one interpreter of its process; the CLI's flags are being reworked.
type interpreters int

const maxInterpreters = 64

func (n *interpreters) String() string {
	if *n == 0 {
		return "auto"
	}
	return strconv.Itoa(int(*n))
}

func (n *interpreters) Set(s string) error {
	if s == "auto" {
		*n = 0
		return nil
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 1 || v > maxInterpreters {
		return fmt.Errorf(`want "auto" or a count from 1 to %d`, maxInterpreters)
	}
	*n = interpreters(v)
	return nil
}

func addInterpretersFlag(fs *flag.FlagSet) *interpreters {
	n := new(interpreters)
	fs.Var(n, "interpreters", `Python interpreters scoring in parallel, each with its own GIL (CPython 3.12+): "auto" is one per CPU there and 1 before`)
	return n
}
