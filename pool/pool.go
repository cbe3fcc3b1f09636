// Package pool scores cases in worker processes: each embeds CPython, loads
// the metric (and program) once and calls score on its main thread, in its
// main interpreter, exactly as `python3 script.py` would: signal handlers
// and signal.alarm timeouts, os.fork and multiprocessing, and every C
// extension behave as they do there. A process per core uses every core;
// a metric that segfaults, calls os._exit or wedges costs its case a
// "crash" or "timeout" result and its worker a restart, and the other
// workers keep scoring.
//
//	p, err := pool.Open(pool.Options{Options: engine.Options{Metric: "metric.py"}})
//	if err != nil { ... }            // *engine.CheckError when the metric does not load
//	defer p.Close()
//	r := p.Score(ctx, engine.Case{ID: "1", Input: map[string]any{"q": "2+2"}, Output: "4"})
//
// The workers are this program itself, started again: the package's init
// takes such a process over before main runs, so linking the package is
// all a program needs. Cases and results cross the pipes as JSON (a case
// file's lines and a results file's lines).
//
// Package engine scores in this process instead: microseconds a case and
// no process start, but no isolation (a crash is the host's), one core per
// GIL, and score runs on a thread that is not the main one.
package pool

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/skynetml/skynet/caseio"
	"github.com/skynetml/skynet/cpython"
	"github.com/skynetml/skynet/engine"
	"github.com/skynetml/skynet/llm"
)

// Defaults of Options.
const (
	DefaultMaxCrashes = 20 // Options.MaxCrashes when 0
)

// Options configures a Pool. The zero value of each field means its default.
type Options struct {
	// Options is what every worker process opens: the metric, the program,
	// time limits, Threads (Python threads a process; more only help
	// metrics that wait), and so on. Its LLM (default: engine.EnvLLM) makes
	// the workers' skynet.llm() calls, in this process: one client, its
	// limits, cache and counts, and the API key never in a worker.
	engine.Options
	// Processes is how many worker processes score at once (default: one
	// per CPU). Each costs a Python interpreter and a copy of what the
	// metric imports.
	Processes int
	// LoadTimeout bounds a worker's start: importing the metric and
	// checking it (default engine.DefaultTimeout).
	LoadTimeout time.Duration
	// MaxCrashes is how many cases in a row may crash their worker, each
	// scored alone, before the pool gives up: the rest get crash results
	// unrun (default DefaultMaxCrashes).
	MaxCrashes int
	// Stderr receives what the workers write to stderr (whole lines) and
	// the pool's notices (a worker restarted, a case that crashed). Default os.Stderr.
	Stderr io.Writer
	// Name starts the pool's notices, e.g. "skynet score" (default "skynet").
	Name string
	// OnWarning, when set, is handed each warning about the metric (one
	// that sets signal handlers on several threads, a venv of another
	// Python) instead of Stderr, once each; Stats.Notices lists them either
	// way. It runs on the pool's dispatcher: it must not block.
	OnWarning func(msg string)
	// Executable is the program the workers run (default: this one). It
	// must link this package, whose init serves the worker's side.
	Executable string
	// Batch runs the workers, and this process from Open on, under Linux's
	// SCHED_BATCH policy (their priority unchanged): a thread that wakes
	// waits for the running one's time slice instead of preempting it, so a
	// run that hands cases between threads and processes switches about
	// half as often and spends less CPU (gsm8k regex, 2 processes: 14,800 ->
	// 6,500 context switches, 17% less CPU). For throughput runs (skynet
	// score, eval); leave it off where one case's latency counts (serve).
	// Only threads under the default policy change (a run under chrt --idle
	// stays idle); this process's threads stay so after Close.
	Batch bool
}

// Pool scores cases in worker processes. Its methods are safe for
// concurrent use; Close stops the workers.
type Pool struct {
	opts     Options
	job      job
	exe      string
	dir      string // where the workers start
	argv0    string
	env      []string
	stderr   io.Writer
	llm      *llm.Client
	want     int
	culprit  string // what a crash is put down to
	callName string // what timed out

	events    chan event
	submit    chan []*Task
	checkReqs chan *checkCall
	artReqs   chan artReq
	quit      chan struct{}
	loopDone  chan struct{}
	opened    chan error
	closeOnce sync.Once

	// Owned by the dispatcher (loop).
	procs    []*proc
	order    []*proc // procs, least loaded first: dispatch's
	procSeq  int
	pending  []*Task
	suspects []*Task
	loaded   bool
	openErr  error
	closing  bool
	crashRun int
	deadRun  int
	gaveUp   string
	avgCase  time.Duration
	arts     map[uint32][]byte // artifacts by id, while a stream uses them
	artSeq   uint32
	noticed  map[string]bool
	st       Stats

	statsMu sync.Mutex
	shown   Stats // st as of the last event, for Stats
}

// Stats counts what a pool has done.
type Stats struct {
	// ScoreCalls is how many score calls returned, with a score or not.
	ScoreCalls int64
	// Restarts counts worker processes started again after one died or was
	// killed; Crashes the cases that crashed one even when scored alone;
	// Wedges the cases that held their worker past their timeout.
	Restarts, Crashes, Wedges int
	// RestartTime is the time restarted workers spent loading the metric.
	RestartTime time.Duration
	// Notices are the warnings the pool gave on Stderr about the metric
	// (one that sets signal handlers while scoring on several threads).
	Notices []string
	// Models counts llm() calls, tokens and cost by role (the client's).
	Models map[llm.Role]llm.Stats
	// GaveUp says why the pool stopped restarting workers (--max-crashes):
	// every case since gets a crash result unrun. Empty while it scores.
	GaveUp string
}

// event is what a process's goroutines report to the dispatcher.
type event struct {
	w       *proc
	typ     byte
	payload []byte
	err     error // the frames stopped: not frames (corrupted)
	ended   bool  // the process exited and its pipes are drained
}

// checkCall is a contract check waiting for a worker.
type checkCall struct {
	cases    [][]byte
	reply    chan []engine.Check
	deadline time.Time
	w        *proc
}

type artReq struct {
	value []byte
	id    chan uint32
	drop  uint32
}

const (
	// maxBatch bounds the tasks Run's feeder takes into its window at a
	// time: what is ready of the input, up to this many.
	maxBatch = 256
	// maxInflight bounds the cases a worker holds unanswered; aimInflight
	// is how much work (in time) the pool keeps with each, so a fast
	// metric gets big batches and a slow one stays balanced to the end.
	maxInflight = 1024
	aimInflight = 40 * time.Millisecond
	// killGrace is how long past its own limits a worker may take before
	// it is killed: the engine's interrupt grace and a poll, with room.
	killGrace = 2 * time.Second
	// silentLimit: a worker that has sent nothing (it pings every
	// pingEvery) for this long while it holds cases is stopped or frozen.
	silentLimit = 10 * time.Second
	// stoppedAfter: a worker silent this long (three pings missed) is
	// looked at, and killed if it is stopped (SIGSTOP): it would never run
	// its cases, and waiting silentLimit would stall every result after
	// them, whatever --timeout is.
	stoppedAfter = 3 * pingEvery
	// soloBudget bounds the suspects scored alone after a crash: the case
	// that crashed is nearly always among the first.
	soloBudget = 256
)

// Open starts the worker processes, all at once, and returns when the
// first has loaded the metric: the others join as they load. A metric that
// does not load is a *engine.CheckError (the checks made, the failed one
// last), said once however many workers tried.
func Open(opts Options) (*Pool, error) { return OpenContext(context.Background(), opts) }

// OpenContext is Open that gives up, stopping the workers, when ctx ends
// before one has loaded the metric: an interrupted start need not wait out
// a slow import.
func OpenContext(ctx context.Context, opts Options) (*Pool, error) {
	if opts.Processes < 0 || opts.MaxCrashes < 0 || opts.LoadTimeout < 0 || opts.Threads < 0 {
		return nil, errors.New("pool: Processes, Threads, MaxCrashes and LoadTimeout must not be negative")
	}
	if opts.Metric == "" {
		return nil, errors.New("pool: Options.Metric is empty: give the path of metric.py")
	}
	for _, f := range []struct{ path, check, what string }{{opts.Metric, engine.CheckLoads, "metric"}, {opts.Program, engine.CheckProgramLoads, "program"}} {
		if f.path == "" {
			continue
		}
		if st, err := os.Stat(f.path); err != nil || st.IsDir() {
			msg := fmt.Sprintf("%s: no such file", f.path)
			if err == nil {
				msg, err = fmt.Sprintf("%s is a directory, not a %s file", f.path, f.what), fs.ErrInvalid
			}
			return nil, &engine.CheckError{Checks: []engine.Check{{Name: f.check, Message: msg}}, Err: err}
		}
	}
	// The workers start where this process is now, so relative paths
	// mean the same to them (and read the same in messages).
	dir, err := os.Getwd()
	if err != nil {
		return nil, fmt.Errorf("pool: %w", err)
	}
	if opts.Timeout == 0 {
		opts.Timeout = engine.DefaultTimeout
	}
	if opts.Timeout > engine.MaxTimeout || opts.RunTimeout > engine.MaxTimeout {
		return nil, fmt.Errorf("pool: a timeout exceeds the maximum of %s", engine.MaxTimeout)
	}
	if opts.RunTimeout == 0 {
		opts.RunTimeout = opts.Timeout
	}
	if opts.LoadTimeout == 0 {
		opts.LoadTimeout = engine.DefaultTimeout
	}
	if opts.MaxCrashes == 0 {
		opts.MaxCrashes = DefaultMaxCrashes
	}
	if opts.Name == "" {
		opts.Name = "skynet"
	}
	stderr := opts.Stderr
	if stderr == nil {
		stderr = os.Stderr
	}
	client := opts.LLM
	if client == nil {
		if client, err = engine.EnvLLM(); err != nil {
			return nil, fmt.Errorf("pool: %w", err)
		}
	}
	exe := opts.Executable
	if exe == "" {
		if exe, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("pool: finding this program to start its workers: %w", err)
		}
	}
	want := opts.Processes
	if want == 0 {
		want = AutoProcesses()
	}
	p := &Pool{
		opts: opts, job: jobOf(opts.Options, client, opts.Batch), exe: exe, dir: dir, argv0: os.Args[0], env: workerEnviron(),
		stderr: SyncWriter(stderr), llm: client, want: want,
		culprit: "the metric", callName: "score",
		events: make(chan event, 256), submit: make(chan []*Task, 64), checkReqs: make(chan *checkCall),
		artReqs: make(chan artReq), quit: make(chan struct{}), loopDone: make(chan struct{}), opened: make(chan error, 1),
		arts: map[uint32][]byte{}, noticed: map[string]bool{},
	}
	if opts.Program != "" {
		p.culprit, p.callName = "the program or the metric", "the call"
	}
	if e := cpython.CheckVenv(opts.PythonExecutable); e != nil {
		if e.Fatal() {
			return nil, e // every worker would fail to import the venv's packages
		}
		p.noticed[e.Error()] = true
		p.warn(e.Error())
		p.shown = p.st
	}
	if opts.Batch {
		batchSchedule()
	}
	for i := 0; i < want; i++ {
		w, err := p.start(false)
		if err != nil {
			for _, w := range p.procs {
				w.kill("the pool did not start")
			}
			return nil, fmt.Errorf("pool: starting a worker process: %w", err)
		}
		p.procs = append(p.procs, w)
	}
	go p.loop()
	select {
	case err = <-p.opened:
	case <-ctx.Done():
		err = ctx.Err() // Close kills the workers still loading
	}
	if err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// AutoProcesses is the default number of worker processes: one per CPU this
// process may use (its affinity and, since Go 1.25, its cgroup CPU quota).
func AutoProcesses() int { return max(1, min(runtime.NumCPU(), runtime.GOMAXPROCS(0))) }

// workerEnviron is this process's environment without API keys: the
// parent makes the model calls, and no metric should read a key.
func workerEnviron() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(llm.KeyVars(), name) {
			env = append(env, kv)
		}
	}
	return env
}

// Processes is how many worker processes the pool keeps.
func (p *Pool) Processes() int { return p.want }

// LLM is the client that makes the workers' skynet.llm() calls.
func (p *Pool) LLM() *llm.Client { return p.llm }

// Stats returns the pool's counts so far.
func (p *Pool) Stats() Stats {
	p.statsMu.Lock()
	s := p.shown
	p.statsMu.Unlock()
	s.Models = map[llm.Role]llm.Stats{}
	for _, r := range []llm.Role{llm.RoleMetric, llm.RoleReflection, llm.RoleTask} {
		s.Models[r] = p.llm.Stats(r)
	}
	return s
}

// Close stops the workers: cases not yet scored get canceled results
// (errors.Is(r.Err, engine.ErrClosed)), a call in flight is interrupted,
// and a worker that does not exit within a few seconds is killed. Idempotent.
func (p *Pool) Close() error {
	p.closeOnce.Do(func() {
		close(p.quit)
		<-p.loopDone
	})
	return nil
}

// Task is one case for Run: a case-file line, or a result decided already.
type Task struct {
	// ID is the case's id; a worker's result must carry it.
	ID string
	// Line numbers the case for the worker's messages and the id of a line
	// without one: its line in a case file, its row in a dataset.
	Line int
	// Case is the case as a line of a case file (caseio.ParseCase's).
	Case []byte
	// Observation is what a result made here carries (a crash, a cancel).
	Observation engine.Observation
	// Result, when set, is the case's result already (a line that could
	// not be read): Run passes it through in its place.
	Result *engine.Result
	// Record is the outcome once Run hands the task back.
	Record Record

	seq     int
	art     uint32
	withRun bool
	s       *stream
	state   atomic.Int32 // taskPending, taskSetting, taskDone
}

const (
	taskPending int32 = iota
	taskSetting
	taskDone
)

// finish sets the task's record once; the first to come wins.
func (t *Task) finish(r Record) bool {
	if !t.state.CompareAndSwap(taskPending, taskSetting) {
		return false
	}
	t.Record = r
	t.state.Store(taskDone)
	t.s.signal()
	return true
}

// made finishes the task with a result made in this process.
func (t *Task) made(kind engine.ErrorKind, msg string) bool {
	r := engine.Case{ID: t.ID, Observation: t.Observation}.Failed(kind, msg)
	return t.finish(RecordOf(r, t.withRun))
}

// NewTask is the task for c, numbered line. A case that cannot cross to a
// worker (InvalidCase's, or a value JSON cannot hold) gets its input error
// as its Result, as the engine gives it. With program set, Output is left
// out: run makes it.
func NewTask(c engine.Case, line int, program bool) *Task {
	t := &Task{ID: c.ID, Line: line, Observation: c.Observation}
	if program {
		c.Output = nil
	}
	msg := ""
	if err := c.Invalid(); err != nil {
		msg = err.Error()
	} else if t.Case, err = caseio.CaseLine(c); err != nil {
		msg = fmt.Sprintf("case %s: %v", c.ID, err)
	}
	if msg != "" {
		t.Case = nil
		r := c.Failed(engine.KindInput, msg)
		t.Result = &r
	}
	return t
}

// LineTask is the task for one line of a case file (or of a request's
// cases), numbered line: its id is read quickly and the line parsed in the
// worker; a line that is plainly bad (lineErr, the reader's *caseio.LineError,
// or no readable id) gets its input error here as its Result. With program
// set the case is a program's: its output, if any, is left out (run makes
// it), so a line may come without one.
func LineTask(raw []byte, line int, lineErr error, program bool) *Task {
	if program {
		return programLineTask(raw, line, lineErr)
	}
	t := &Task{Line: line, Case: raw}
	ok := false
	if lineErr == nil {
		t.ID, ok = caseio.QuickID(raw, line)
	}
	if !ok {
		var c engine.Case
		err := lineErr
		if err == nil {
			c, err = caseio.ParseCase(raw, line)
		} else {
			c.ID = caseio.LineID(nil, line, lineErr)
		}
		t.ID, t.Observation = c.ID, c.Observation
		if err != nil {
			t.Case = nil
			r := c.Failed(engine.KindInput, err.Error())
			t.Result = &r
		}
	}
	return t
}

// programLineTask is LineTask for a program's case: parsed here, since a
// line without "output" must be given one before ParseCase accepts it.
func programLineTask(raw []byte, line int, lineErr error) *Task {
	var c engine.Case
	err := lineErr
	if err != nil {
		c.ID = caseio.LineID(nil, line, lineErr)
	} else {
		var fields map[string]json.RawMessage
		if json.Unmarshal(raw, &fields) == nil && fields != nil {
			if _, has := fields["output"]; !has {
				fields["output"] = json.RawMessage("null")
				raw, _ = json.Marshal(fields)
			}
		}
		c, err = caseio.ParseCase(raw, line)
	}
	if err != nil {
		r := c.Failed(engine.KindInput, err.Error())
		return &Task{ID: c.ID, Line: line, Observation: c.Observation, Result: &r}
	}
	return NewTask(c, line, true)
}

// Run scores the tasks the iterator gives and returns them, with their
// Record set, in that order, in batches as they finish. The iterator runs
// on a goroutine of Run's; the pool takes what it has given so far in one
// batch, so a fast iterator crosses in batches and a slow one task by task.
// The output closes after the iterator ends and every task has its
// record; when ctx ends first, the tasks read and not finished are
// returned canceled at once, and no more of the input is read.
func (p *Pool) Run(ctx context.Context, tasks iter.Seq[*Task]) <-chan []*Task {
	return p.run(ctx, 0, pull(ctx, tasks))
}

// run is Run's goroutine: deliver, its batches sent on a channel.
func (p *Pool) run(ctx context.Context, art uint32, in <-chan *Task) <-chan []*Task {
	out := make(chan []*Task, 16)
	go func() {
		defer close(out)
		p.deliver(ctx, art, in, nil, func(b []*Task) bool { out <- b; return true })
	}()
	return out
}

// pull runs the iterator into a channel the feeder drains: one buffered
// send a task, no hand-off between goroutines while both keep up.
func pull(ctx context.Context, tasks iter.Seq[*Task]) <-chan *Task {
	in := make(chan *Task, maxBatch)
	go func() {
		defer close(in)
		for t := range tasks {
			if ctx.Err() != nil {
				return
			}
			select {
			case in <- t:
			case <-ctx.Done():
				return
			}
		}
	}()
	return in
}

// RunProgram is Run for a program's cases: each task's case line holds the
// input (and expected); the worker runs run(artifact, input) and scores
// what it returns. artifact crosses as JSON.
func (p *Pool) RunProgram(ctx context.Context, artifact any, tasks iter.Seq[*Task]) (<-chan []*Task, error) {
	id, err := p.addArtifact(artifact)
	if err != nil {
		return nil, err
	}
	out := p.run(ctx, id, pull(ctx, tasks))
	done := make(chan []*Task, cap(out))
	go func() { // the artifact is dropped once its stream is done
		for b := range out {
			done <- b
		}
		close(done)
		p.dropArtifact(id)
	}()
	return done, nil
}

// RunTasks is Run for tasks in memory (a request's), on the calling
// goroutine: no goroutine or channel of its own, so a request of one case
// costs little more than the case. It yields every task, in order, in
// batches as they finish; once ctx ends, the rest come canceled at once.
func (p *Pool) RunTasks(ctx context.Context, tasks []*Task) iter.Seq[[]*Task] {
	return func(yield func([]*Task) bool) { p.deliver(ctx, 0, nil, tasks, yield) }
}

// RunProgramTasks is RunTasks for a program's cases (see RunProgram).
func (p *Pool) RunProgramTasks(ctx context.Context, artifact any, tasks []*Task) (iter.Seq[[]*Task], error) {
	id, err := p.addArtifact(artifact)
	if err != nil {
		return nil, err
	}
	return func(yield func([]*Task) bool) {
		defer p.dropArtifact(id)
		p.deliver(ctx, id, nil, tasks, yield)
	}, nil
}

// addArtifact gives the workers an artifact (as JSON) and returns its id.
func (p *Pool) addArtifact(artifact any) (uint32, error) {
	if p.opts.Program == "" {
		return 0, errors.New("pool: no program: open the pool with Options.Program")
	}
	b, err := json.Marshal(artifact)
	if err != nil {
		return 0, fmt.Errorf("pool: the artifact: %w", err)
	}
	req := artReq{value: b, id: make(chan uint32, 1)}
	select {
	case p.artReqs <- req:
	case <-p.loopDone:
		return 0, engine.ErrClosed
	}
	return <-req.id, nil
}

// dropArtifact forgets an artifact whose cases are all answered.
func (p *Pool) dropArtifact(id uint32) {
	select {
	case p.artReqs <- artReq{drop: id}:
	case <-p.loopDone:
	}
}

// deliver is the one loop behind Run and RunTasks: it feeds tasks into
// the workers, at most the window unreturned, from in (what is ready of it)
// or from list, and yields each finished run of them in order. Once ctx
// ends, what was fed and not finished comes back canceled at once (all of
// list too); no more of in is read.
func (p *Pool) deliver(ctx context.Context, art uint32, in <-chan *Task, list []*Task, yield func([]*Task) bool) {
	s := &stream{id: streamSeq.Add(1), ctx: ctx, wake: make(chan struct{}, 1)}
	for i, t := range list { // each may be canceled before it is fed
		t.seq, t.s, t.art, t.withRun = i, s, art, art != 0
	}
	n := p.window()
	seq := 0
	var q []*Task       // fed, not yet yielded; q[0] is the next out
	fromIn := in != nil // in becomes nil once it is closed
	feed := func(batch []*Task) {
		if fromIn {
			for _, t := range batch {
				t.seq, t.s, t.art, t.withRun = seq, s, art, art != 0
				seq++
			}
		}
		q = append(q, batch...)
		p.submitTasks(batch)
	}
	var buf []*Task
	for {
		if ctx.Err() != nil { // seen before anything else is yielded or read
			rest := append(q, list...)
			cancelRest(rest, ctx)
			if len(rest) > 0 {
				yield(rest)
			}
			return
		}
		if room := n - len(q); room > 0 && len(list) > 0 {
			k := min(len(list), room)
			feed(list[:k])
			list = list[k:]
		}
		k := 0
		for k < len(q) && q[k].state.Load() == taskDone {
			k++
		}
		if k > 0 {
			done := q[:k:k]
			q = q[k:]
			if !yield(done) {
				return
			}
			continue
		}
		if in == nil && len(list) == 0 && len(q) == 0 {
			return
		}
		var next <-chan *Task // read only while the window has room
		if in != nil && len(q) < n {
			next = in
		}
		select {
		case <-s.wake:
		case t, ok := <-next:
			if !ok {
				in = nil
				continue
			}
			buf = append(buf[:0], t)
		ready:
			for len(buf) < min(maxBatch, n-len(q)) {
				select {
				case t, ok := <-in:
					if !ok {
						in = nil
						break ready
					}
					buf = append(buf, t)
				default:
					break ready
				}
			}
			feed(buf) // copied into q, and into the dispatcher's own slice
		case <-ctx.Done(): // the loop's first step cancels the rest
		}
	}
}

// submitTasks hands tasks to the dispatcher; those with a Result already
// finish here.
func (p *Pool) submitTasks(tasks []*Task) {
	send := make([]*Task, 0, len(tasks))
	for _, t := range tasks {
		if t.Result != nil {
			t.finish(RecordOf(*t.Result, t.withRun))
			continue
		}
		send = append(send, t)
	}
	if len(send) == 0 {
		return
	}
	select {
	case p.submit <- send:
	case <-p.loopDone:
		for _, t := range send {
			t.made(engine.KindCanceled, "not scored: "+engine.ErrClosed.Error())
		}
	}
}

// stream is one Run or RunTasks: its tasks' wake-ups, its place in the
// dispatcher's order and its caller's ctx.
type stream struct {
	id   int64 // in the order Run was called
	ctx  context.Context
	wake chan struct{} // a task finished
}

func (s *stream) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

var streamSeq atomic.Int64

// window is how many tasks a Run holds at most: enough to keep every
// worker's batches full while results wait for a slow case before them.
func (p *Pool) window() int { return (p.want + 2) * maxInflight }

// cancelRest gives a stream's unfinished tasks canceled results.
func cancelRest(rest []*Task, ctx context.Context) {
	why := ctx.Err()
	for _, t := range rest {
		if !t.made(engine.KindCanceled, fmt.Sprintf("not scored: %v", why)) {
			for t.state.Load() != taskDone {
				runtime.Gosched() // a result being set
			}
		}
	}
}

// ScoreAll scores a stream of cases in the workers; results come in input
// order with their index. window is ignored (the pool keeps its own);
// it is there so that ScoreAll has engine's signature.
func (p *Pool) ScoreAll(ctx context.Context, cases iter.Seq[engine.Case], window int) iter.Seq2[int, engine.Result] {
	return p.scoreSeq(ctx, cases, nil, false)
}

// Evaluate runs the program on each case with the artifact, in the
// workers, and scores what it returns (engine.Evaluate's contract; the
// artifact crosses as JSON, and Result.Output comes back as JSON values).
func (p *Pool) Evaluate(ctx context.Context, artifact any, cases iter.Seq[engine.Case]) iter.Seq2[int, engine.Result] {
	return p.scoreSeq(ctx, cases, artifact, true)
}

// Score scores one case in a worker.
func (p *Pool) Score(ctx context.Context, c engine.Case) engine.Result {
	for _, r := range p.scoreSeq(ctx, func(yield func(engine.Case) bool) { yield(c) }, nil, false) {
		return r
	}
	return c.Failed(engine.KindCanceled, "not scored")
}

func (p *Pool) scoreSeq(ctx context.Context, cases iter.Seq[engine.Case], artifact any, program bool) iter.Seq2[int, engine.Result] {
	return func(yield func(int, engine.Result) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		tasks := func(yield func(*Task) bool) {
			line := 0
			for c := range cases {
				line++
				if !yield(NewTask(c, line, program)) {
					return
				}
			}
		}
		var out <-chan []*Task
		if program {
			var err error
			if out, err = p.RunProgram(ctx, artifact, tasks); err != nil {
				i := 0
				for range cases {
					if !yield(i, engine.Result{Err: &engine.CaseError{Kind: engine.KindRun, Message: err.Error()}}) {
						return
					}
					i++
				}
				return
			}
		} else {
			out = p.Run(ctx, tasks)
		}
		i := 0
		for batch := range out {
			for _, t := range batch {
				r, err := caseio.ParseResult(t.Record.Line)
				if err != nil {
					r = engine.Case{ID: t.ID}.Failed(engine.KindCrash, err.Error())
				}
				if r.Err != nil && r.Err.Kind == engine.KindCanceled && ctx.Err() != nil {
					r.Err = canceledError(r.Err.Message, ctx)
				}
				if !yield(i, r) {
					return
				}
				i++
			}
		}
	}
}

// Check runs the contract check in one worker: the load-time checks, then
// score on the first Samples cases (engine.Check's), each return value
// validated. A worker that dies or hangs on a sample case fails the check.
func (p *Pool) Check(ctx context.Context, cases []engine.Case) []engine.Check {
	n := p.opts.Samples
	if n <= 0 {
		n = engine.DefaultSamples
	}
	var lines [][]byte
	for _, c := range cases[:min(n, len(cases))] {
		b, err := caseio.CaseLine(c)
		if err != nil {
			return []engine.Check{{Name: engine.CheckReturnValue, Case: c.ID, Message: err.Error()}}
		}
		lines = append(lines, b)
	}
	call := &checkCall{cases: lines, reply: make(chan []engine.Check, 1),
		deadline: time.Now().Add(time.Duration(max(len(lines), 1))*(p.opts.Timeout+killGrace) + killGrace)}
	select {
	case p.checkReqs <- call:
	case <-p.loopDone:
		return []engine.Check{{Name: engine.CheckReturnValue, Message: "not run: " + engine.ErrClosed.Error()}}
	case <-ctx.Done():
		return []engine.Check{{Name: engine.CheckReturnValue, Message: "not run: " + ctx.Err().Error()}}
	}
	select {
	case checks := <-call.reply:
		return checks
	case <-ctx.Done():
		return []engine.Check{{Name: engine.CheckReturnValue, Message: "not finished: " + ctx.Err().Error()}}
	}
}

// canceledError is a canceled case's error when the caller's ctx ended:
// errors.Is tells ctx's reason, as it does for the engine's own.
func canceledError(msg string, ctx context.Context) *engine.CaseError {
	cause := ctx.Err()
	if c := context.Cause(ctx); c != nil && c != cause {
		cause = errors.Join(cause, c)
	}
	return &engine.CaseError{Kind: engine.KindCanceled, Message: msg, Cause: cause}
}

// lockedWriter serialises writes: workers' stderr is passed on from
// goroutines of their own while the pool (and its caller) write notices.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// Unwrap is the writer underneath, for a caller that asks whether it is a terminal.
func (l *lockedWriter) Unwrap() io.Writer { return l.w }

// SyncWriter wraps w once so that writes from several goroutines (the
// workers' stderr, the pool's notices, a caller's own) come out whole.
func SyncWriter(w io.Writer) io.Writer {
	if _, ok := w.(*lockedWriter); ok {
		return w
	}
	return &lockedWriter{w: w}
}

func uint64Bytes(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
