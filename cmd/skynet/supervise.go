package main

// skynet score and skynet eval score through package pool: worker
// processes (this binary, started again) that each load the metric and
// call score on their main thread. This process reads the cases, owns the
// results, the progress bar, the summary and the signals, and runs no
// Python; the pool isolates crashes and wedges (a case that kills its
// worker gets a "crash" result, the worker a restart).

import (
	"context"
	"fmt"
	"io"
	"iter"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/skynetml/skynet/engine"
	"github.com/skynetml/skynet/llm"
	"github.com/skynetml/skynet/pool"
)

// supervisor runs one score or eval pass through a pool.
type supervisor struct {
	cmd      string // "score" or "eval", for messages
	shard    shardSpec
	withRun  bool // eval: results carry output and observation
	opts     pool.Options
	artifact any // eval: what run is given
	client   *llm.Client
	stderr   io.Writer
	bar      *progress

	tasks   iter.Seq[*pool.Task] // the case reader, drawn once
	readErr func() error         // why the case reader stopped early, once tasks are drawn
	noCases func() string        // what to say when every case was an input error
	noInput func() string        // at the end of the input: why it held no case at all, or ""

	out      io.Writer
	wbuf     []byte
	lastOut  time.Time
	writeErr error
	st       *summary
	cluster  string // --cluster: the input field whose value clusters the summary's standard error
	sumJSON  string // --summary-json: where the summary goes as JSON too

	inputDone   bool
	interrupted os.Signal
	kept        mean         // --resume: the scores of the results kept, for the summary
	order       *resumeOrder // --resume: where each result goes in input order
	loadFailed  int          // exit code when the metric never loaded
	pool        pool.Stats
}

func (s *supervisor) run(ctx context.Context) int {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var sigMu sync.Mutex
	var sig os.Signal
	go func() {
		for {
			select {
			case g := <-sigs:
				sigMu.Lock()
				if sig == nil {
					sig = g
				}
				sigMu.Unlock()
				cancel()
			case <-ctx.Done():
				return // signal.Stop does not close sigs
			}
		}
	}()
	s.st = newSummary()
	s.st.cluster = s.cluster
	s.lastOut = time.Now()

	p, err := pool.OpenContext(ctx, s.opts)
	if err != nil {
		if ctx.Err() != nil {
			sigMu.Lock()
			s.interrupted = sig
			sigMu.Unlock()
			s.st.elapsed = time.Since(s.st.start)
			return 0
		}
		s.loadFailed = openFailed(s.stderr, s.cmd, err)
		return s.loadFailed
	}

	inputDone := make(chan struct{}) // closed once the input is read whole
	tasks := func(yield func(*pool.Task) bool) {
		for t := range s.tasks {
			if !yield(t) {
				return
			}
		}
		close(inputDone)
	}
	var out <-chan []*pool.Task
	if s.withRun {
		if out, err = p.RunProgram(ctx, s.artifact, tasks); err != nil {
			p.Close()
			fmt.Fprintf(s.stderr, "skynet %s: %v\n", s.cmd, err)
			return exitUsage
		}
	} else {
		out = p.Run(ctx, tasks)
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for out != nil {
		select {
		case batch, ok := <-out:
			if !ok {
				out = nil
				break
			}
			sigMu.Lock()
			why := sig
			sigMu.Unlock()
			for _, t := range batch {
				s.write(t, why)
			}
			s.flush(false)
		case <-tick.C:
			s.flush(true)
		}
	}
	p.Close()
	s.pool = p.Stats()
	select {
	case <-inputDone:
		s.inputDone = ctx.Err() == nil
	default:
	}
	if ctx.Err() != nil {
		sigMu.Lock()
		s.interrupted = sig
		sigMu.Unlock()
	}
	s.flush(true)
	s.st.elapsed = time.Since(s.st.start)
	return 0
}

// write writes a task's result; a case cancelled by a signal says so.
func (s *supervisor) write(t *pool.Task, sig os.Signal) {
	r := &t.Record
	if r.Kind == engine.KindCanceled && sig != nil {
		msg := fmt.Sprintf("%s cancelled: interrupted (%v)", s.cmd, sig)
		res := engine.Case{ID: t.ID, Observation: t.Observation}.Failed(engine.KindCanceled, msg)
		rec := pool.RecordOf(res, s.withRun)
		r = &rec
	}
	tl := tally{id: t.ID, score: r.Score, kind: r.Kind, ms: float64(r.Duration) / float64(time.Millisecond),
		runMS: r.RunMS, cost: r.CostUSD, hasRunMS: r.HasRunMS, hasCost: r.HasCost, warned: r.Warned}
	if s.cluster != "" {
		tl.cluster = inputField(t.Case, s.cluster)
	}
	s.st.add(tl)
	if r.Kind != engine.KindCanceled {
		r.EachScore(s.st.addScore)
	}
	s.wbuf = append(s.wbuf, r.Line...)
	s.wbuf = append(s.wbuf, '\n')
	if s.order != nil {
		s.order.wrote(t.Line)
	}
	if s.bar != nil {
		s.bar.step(s.st.count + s.st.canceled)
	}
	if len(s.wbuf) >= 1<<16 {
		s.flush(true)
	}
}

// flush writes the results gathered, whole lines: at once when now is set
// (nothing else is waiting), else when the last write is 50 ms old.
func (s *supervisor) flush(now bool) {
	if len(s.wbuf) == 0 || (!now && time.Since(s.lastOut) < 50*time.Millisecond) {
		return
	}
	if s.writeErr == nil {
		_, s.writeErr = s.out.Write(s.wbuf)
	}
	s.wbuf = s.wbuf[:0]
	s.lastOut = time.Now()
}

// restartLine is the summary's line on restarts, if there were any.
func (s *supervisor) restartLine() string {
	st := s.pool
	if st.Restarts == 0 {
		return ""
	}
	return fmt.Sprintf("restarts: %d of a Python process (%d crashed case(s), %d wedged); %.2fs spent loading the metric again",
		st.Restarts, st.Crashes, st.Wedges, st.RestartTime.Seconds())
}

// modelUse is a run's model calls, by role.
type modelUse map[llm.Role]roleUse

type roleUse struct {
	Model string    `json:"model"`
	Stats llm.Stats `json:"stats"`
}

// modelUseOf reads a client's use, nil when it made no calls.
func modelUseOf(c *llm.Client) modelUse {
	if c == nil {
		return nil
	}
	u := modelUse{}
	for _, role := range []llm.Role{llm.RoleTask, llm.RoleMetric} {
		if s := c.Stats(role); s.Calls > 0 {
			u[role] = roleUse{Model: c.Model(role), Stats: s}
		}
	}
	if len(u) == 0 {
		return nil
	}
	return u
}

// syncWriter wraps w so that the workers' stderr, the pool's notices and
// this process's messages come out whole.
func syncWriter(w io.Writer) io.Writer { return pool.SyncWriter(w) }
