package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"syscall"
	"time"

	"github.com/skynetml/skynet/caseio"
	"github.com/skynetml/skynet/engine"
	"github.com/skynetml/skynet/llm"
	"github.com/skynetml/skynet/pool"
)

// supervisorFlags are the flags of score, eval and check that size and
// bound the worker processes running Python (package pool).
type supervisorFlags struct {
	loadTimeout *time.Duration
	maxCrashes  *int
	maxLine     int
	processes   processCount
	threads     int
}

func addSupervisorFlags(fs *flag.FlagSet) *supervisorFlags {
	sv := &supervisorFlags{
		loadTimeout: fs.Duration("load-timeout", engine.DefaultTimeout, "time limit for loading the metric (and program) in a worker process: importing it, checking it"),
		maxCrashes:  fs.Int("max-crashes", pool.DefaultMaxCrashes, "give up after this many cases in a row crash their worker process (the rest get crash results)"),
		maxLine:     caseio.DefaultMaxLineBytes,
	}
	fs.IntVar(&sv.maxLine, "max-line-bytes", caseio.DefaultMaxLineBytes, "longest case line read; a longer one is an input error")
	sv.addPoolFlags(fs)
	return sv
}

// addPoolFlags adds --processes and --threads, and their old names.
func (sv *supervisorFlags) addPoolFlags(fs *flag.FlagSet) {
	fs.Var(&sv.processes, "processes", `worker processes scoring at once, each a Python of its own: "auto" is one per CPU (at most one per case)`)
	fs.Var(&sv.processes, "interpreters", "the old name of --processes")
	fs.IntVar(&sv.threads, "threads", 1, "Python threads in each worker process (more help only when score waits on llm(); see README)")
	fs.IntVar(&sv.threads, "workers", 1, "the old name of --threads")
}

// renamed says once on stderr that an old flag name was used, and what it is now.
func renamed(fs *flag.FlagSet, stderr io.Writer) {
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "workers":
			fmt.Fprintf(stderr, "skynet %s: note: --workers is now --threads (Python threads in each worker process; a worker is now a process, --processes)\n", fs.Name())
		case "interpreters":
			fmt.Fprintf(stderr, "skynet %s: note: --interpreters is now --processes (sub-interpreters are gone: each worker is a process with its own Python)\n", fs.Name())
		}
	})
}

// poolOptions is what the run's pool opens: opts in each of its processes,
// how many (no more than cases, when that is known: total > 0).
func (sv *supervisorFlags) poolOptions(cmd string, opts engine.Options, total int, stderr io.Writer) pool.Options {
	n := int(sv.processes)
	if n == 0 {
		n = min(pool.AutoProcesses(), maxProcesses)
	}
	if total > 0 {
		n = min(n, total)
	}
	opts.Threads = sv.threads
	// A run for throughput but serve's, where a request's latency counts.
	po := pool.Options{Options: opts, Processes: n, Stderr: stderr, Name: "skynet " + cmd, Batch: cmd != "serve"}
	if sv.loadTimeout != nil {
		po.LoadTimeout = *sv.loadTimeout
	}
	if sv.maxCrashes != nil {
		po.MaxCrashes = *sv.maxCrashes
	}
	return po
}

func (sv *supervisorFlags) supervisor(cmd string, opts pool.Options, client *llm.Client, out, stderr io.Writer) *supervisor {
	return &supervisor{cmd: cmd, withRun: cmd == "eval", opts: opts, client: client, stderr: stderr, out: out,
		readErr: func() error { return nil }}
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
	if s.order != nil && s.writeErr == nil {
		// Kept results and new ones, in input order, as if the run had
		// never stopped; the file is whole either way.
		if err := s.order.finish(); err != nil {
			fmt.Fprintf(stderr, "skynet %s: warning: --resume: every result is in %s, but not in input order (%v); --resume again puts them in order\n", s.cmd, s.order.path, err)
		}
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
	if s.sumJSON != "" {
		if err := replaceFile(s.sumJSON, func(w io.Writer) error { return s.st.writeJSON(w, s.interrupted != nil) }); err != nil {
			fmt.Fprintf(stderr, "skynet %s: --summary-json: %v\n", s.cmd, err)
			return exitUsage
		}
	}
	if line := s.restartLine(); line != "" {
		fmt.Fprintln(summary, line)
	}
	if summary != stderr {
		// Said on stderr as it happened; the summary, elsewhere, says it again.
		for _, n := range s.pool.Notices {
			fmt.Fprintf(summary, "warning: %s\n", n)
		}
	}
	printResumed(summary, done, s.kept, s.st, s.order)
	printModelUse(summary, modelUseOf(s.client))
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
	// A resumed file is judged whole: its kept results were cases, and
	// those with a score were scored.
	keptCases, keptScored := 0, 0
	if s.order != nil {
		keptCases, keptScored = len(s.order.keptIDs), s.order.scored
	}
	switch {
	case keptCases == 0 && s.st.count > 0 && s.st.errors[engine.KindInput] == s.st.count:
		// Nothing the metric could be called on: the input is wrong, not the metric.
		msg := "no case could be read"
		if s.noCases != nil {
			msg = s.noCases()
		}
		fmt.Fprintf(stderr, "skynet %s: %s: the metric was not called\n", s.cmd, msg)
		return exitUsage
	case s.st.errors[engine.KindCrash] > 0:
		return exitCheck
	case s.st.canceled > 0:
		// Nothing interrupted the run, yet cases were not scored: they
		// must not pass as done.
		fmt.Fprintf(stderr, "skynet %s: %d case(s) were not scored (cancelled) though the run was not interrupted: --resume scores them\n", s.cmd, s.st.canceled)
		return exitCheck
	case keptScored == 0 && s.st.count > 0 && failed == s.st.count:
		// A run whose every case failed scored nothing: a script that
		// checks only the exit code must not take it for a result.
		fmt.Fprintf(stderr, "skynet %s: every case failed (%d), none has a score: see \"error\" in the results\n", s.cmd, failed)
		return exitCheck
	}
	return exitOK
}

// processCount is the --processes flag: "auto" (0) or a count up to
// maxProcesses.
type processCount int

const maxProcesses = 256

func (n *processCount) String() string {
	if *n == 0 {
		return "auto"
	}
	return strconv.Itoa(int(*n))
}

func (n *processCount) Set(s string) error {
	if s == "auto" {
		*n = 0
		return nil
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 1 || v > maxProcesses {
		return fmt.Errorf(`want "auto" or a count from 1 to %d`, maxProcesses)
	}
	*n = processCount(v)
	return nil
}
