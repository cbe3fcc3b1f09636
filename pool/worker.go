package pool

// The worker's side: a process the pool started (the same executable, with
// workerEnv set) opens the engine on its main thread and scores the cases
// its parent sends, until the end frame. This package's init takes such a
// process over before main runs, so a program that links the pool needs no
// hook of its own, and its main (an optimizer, say) never runs twice.

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/skynetml/skynet/caseio"
	"github.com/skynetml/skynet/cpython"
	"github.com/skynetml/skynet/engine"
	"github.com/skynetml/skynet/llm"
)

func init() {
	version, ok := os.LookupEnv(workerEnv)
	if !ok {
		return
	}
	// init runs on the process's main thread; Python must start and score
	// there (signal handlers, signal.alarm), so the goroutine keeps it.
	runtime.LockOSThread()
	os.Exit(workerMain(version))
}

// job is what a worker loads: the pool's engine options, as JSON.
type job struct {
	// Options is what the worker opens, as the pool was given it, every
	// field (LLM is json:"-": the parent makes the model calls); the
	// worker adds MainThread, NoSpin and AdaptProcs (options).
	engine.Options
	// The models each role's calls go to: the worker names them in
	// errors and observation; the parent makes the calls.
	MetricModel     string `json:"metric_model,omitempty"`
	ReflectionModel string `json:"reflection_model,omitempty"`
	TaskModel       string `json:"task_model,omitempty"`
	// Solo: one thread, and the parent sends one case at a time.
	Solo bool `json:"solo,omitempty"`
	// Batch: the worker runs under SCHED_BATCH (Options.Batch).
	Batch bool `json:"batch,omitempty"`
}

func jobOf(o engine.Options, models *llm.Client, batch bool) job {
	j := job{Options: o, Batch: batch}
	j.LLM, j.Threads = nil, max(o.Threads, 1)
	if models != nil {
		j.MetricModel, j.ReflectionModel, j.TaskModel = models.Model(llm.RoleMetric), models.Model(llm.RoleReflection), models.Model(llm.RoleTask)
	}
	return j
}

// options is what the worker opens: the pool's options, scored on the
// process's main thread (signal handlers work as under python3), with
// waits that block rather than poll (the process is one of many), and its
// P count the engine's to set (the process runs nothing else in Go).
func (j job) options() engine.Options {
	o := j.Options
	o.MainThread, o.NoSpin, o.AdaptProcs = true, true, true
	return o
}

// hello is the worker's first frame once the metric loaded.
type hello struct {
	Protocol string `json:"protocol"`
	PID      int    `json:"pid"`
}

// failure is why a worker could not load the metric: the checks made,
// the failed one last, or an error that is not the metric's (Usage).
type failure struct {
	Checks []engine.Check `json:"checks,omitempty"`
	Error  string         `json:"error,omitempty"`
}

// modelCall is a skynet.llm() call a worker hands its parent.
type modelCall struct {
	Role    llm.Role      `json:"role"`
	Request llm.Request   `json:"request"`
	Timeout time.Duration `json:"timeout"` // what is left of the case's time
}

// modelReply is the parent's answer: the reply, or the error's fields.
type modelReply struct {
	Reply llm.Reply  `json:"reply"`
	Err   *llm.Error `json:"error,omitempty"`
}

// wtask is a case the worker was sent.
type wtask struct {
	line  int
	art   uint32
	raw   []byte
	check []engine.Case // a check request instead of a case
}

// worker is the worker process's state.
type worker struct {
	fw     *frameWriter
	tasks  chan wtask
	cancel context.CancelFunc
	ctx    context.Context

	mu     sync.Mutex
	calls  map[uint64]chan modelReply
	callID uint64
	arts   artifacts[json.RawMessage]

	saidSignals, saidFork atomic.Bool
}

func workerMain(version string) int {
	os.Unsetenv(workerEnv) // processes the metric starts are not workers
	if ppid := os.Getppid(); ppid > 1 {
		// A metric's SIGTERM to os.getppid() would stop the run as a user's
		// Ctrl-C does, with the fault pointing nowhere: it fails its case.
		pgid, _ := syscall.Getpgid(ppid)
		cpython.Protect(ppid, pgid)
	}
	if version != protocol {
		fmt.Fprintf(os.Stderr, "skynet worker: this executable speaks %s and its parent %s: it was rebuilt or replaced while the run used it; start the run again\n", protocol, version)
		return exitProtocol
	}
	syscall.CloseOnExec(3)
	syscall.CloseOnExec(4)
	// Non-blocking, the pipes are read and written through Go's poller: a
	// goroutine waiting on one parks, where a blocking read held its P in
	// the syscall until the runtime took the P back, and kept the runtime's
	// sysmon thread waking every 20 us while it did (most of a worker's
	// context switches on a cheap grader).
	syscall.SetNonblock(3, true)
	syscall.SetNonblock(4, true)
	in, out := os.NewFile(3, "cases"), os.NewFile(4, "results")
	fr := newFrameReader(blockingReader{in})
	typ, payload, err := fr.next()
	var j job
	if err == nil && (typ != frameJob || json.Unmarshal(payload, &j) != nil) {
		err = errBadFrame
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "skynet worker: reading its job: %v\n", err)
		return exitLostChannel
	}
	if j.Batch {
		batchSchedule() // before Python starts: its threads inherit it
	}
	w := &worker{fw: newFrameWriter(out), tasks: make(chan wtask, 4096), calls: map[uint64]chan modelReply{},
		arts: newArtifacts[json.RawMessage]()}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	client, err := llm.New(llm.Config{MetricModel: j.MetricModel, ReflectionModel: j.ReflectionModel,
		TaskModel: j.TaskModel, Forward: w.forward})
	if err != nil {
		w.fw.close(frameFailed, mustJSON(failure{Error: err.Error()}))
		return exitOK
	}
	opts := j.options()
	opts.LLM = client
	// Model replies come on the case pipe, which an import-time model call
	// (or a check) waits for: read it from now on.
	go w.read(fr)
	e, err := engine.Open(opts)
	if err != nil {
		var f failure
		if ce, ok := errors.AsType[*engine.CheckError](err); ok {
			f.Checks = ce.Checks
		} else {
			f.Error = err.Error()
		}
		w.fw.close(frameFailed, mustJSON(f))
		return exitOK
	}
	w.fw.send(frameHello, mustJSON(hello{Protocol: protocol, PID: os.Getpid()}))

	stop := make(chan struct{})
	threads := j.Threads // Python threads scoring: an async score's cases share one
	if e.Async() {
		threads = 1
	}
	go w.watch(e, threads, stop)
	go func() {
		defer close(stop)
		w.serve(e)
		w.noteSignals(e, j.Threads) // a run shorter than watch's tick
		e.Close()                   // its main-thread worker ends while ServeMainThread still serves
	}()
	if err := cpython.ServeMainThread(stop); err != nil { // the engine's first thread scores here
		fmt.Fprintf(os.Stderr, "skynet worker: %v\n", err)
		return exitLostChannel
	}
	if err := w.fw.close(frameDone); err != nil {
		return exitLostChannel
	}
	return exitOK
}

const exitOK = 0

// blockingReader reads the parent's pipe where Go's poller could not take
// the non-blocking descriptor (os.NewFile keeps it out of the poller when
// registering fails): a read that fails with EAGAIN makes it blocking and
// goes on. In the poller a read never fails so, whatever a metric does to
// the descriptor (os.set_blocking on every fd). Bytes a metric took show as
// a bad frame; whole frames it took, in the parent's ping check (Pool.ping).
type blockingReader struct{ f *os.File }

func (r blockingReader) Read(b []byte) (int, error) {
	for tries := 0; ; tries++ {
		n, err := r.f.Read(b)
		if n == 0 && tries < 3 && errors.Is(err, syscall.EAGAIN) {
			syscall.SetNonblock(int(r.f.Fd()), false)
			continue
		}
		return n, err
	}
}

// read takes the parent's frames: cases (in order) to serve, model replies
// to their callers, cancel and end.
func (w *worker) read(fr *frameReader) {
	var lines caseio.Arena // the cases' own memory, past the next frame
	ended := false
	end := func() { // no more cases; cancel frames may still come
		if !ended {
			ended = true
			close(w.tasks)
		}
	}
	defer end()
	for {
		typ, p, err := fr.next()
		if err == io.EOF {
			w.cancel() // the parent is gone (or it closed the pipe)
			return
		}
		if err != nil {
			// Something in this process read the parent's pipe or changed
			// its descriptor (a metric draining, or making non-blocking,
			// every fd): what comes next cannot be trusted, and a case lost
			// on the way must not pass as cancelled. The parent scores what
			// this process held again, as after a crash.
			fmt.Fprintf(os.Stderr, "skynet worker: reading its cases: %v\n", err)
			w.fw.flush()
			os.Exit(exitLostChannel)
		}
		switch typ {
		case frameCancel:
			w.cancel()
		case frameEnd:
			end()
		case frameCase:
			if ended || len(p) < 8 {
				continue
			}
			w.fw.casesRead.Add(1)
			w.tasks <- wtask{line: int(binary.LittleEndian.Uint32(p)), art: binary.LittleEndian.Uint32(p[4:]), raw: lines.Copy(p[8:])}
		case frameArtifact:
			if len(p) >= 4 {
				w.mu.Lock()
				w.arts.add(binary.LittleEndian.Uint32(p), append(json.RawMessage(nil), p[4:]...))
				w.mu.Unlock()
			}
		case frameCheck:
			var lines []string
			if ended || json.Unmarshal(p, &lines) != nil {
				continue
			}
			cases := make([]engine.Case, 0, len(lines))
			for i, l := range lines {
				c, err := caseio.ParseCase([]byte(l), i+1)
				if err != nil {
					c = engine.InvalidCase(c.ID, err)
				}
				cases = append(cases, c)
			}
			w.tasks <- wtask{check: cases}
		case frameReply:
			if len(p) < 8 {
				continue
			}
			var r modelReply
			if json.Unmarshal(p[8:], &r) != nil {
				r.Err = &llm.Error{Msg: "the parent's reply could not be read"}
			}
			w.mu.Lock()
			ch := w.calls[binary.LittleEndian.Uint64(p)]
			delete(w.calls, binary.LittleEndian.Uint64(p))
			w.mu.Unlock()
			if ch != nil {
				ch <- r
			}
		}
	}
}

// forward makes a model call through the parent, which owns the client.
func (w *worker) forward(ctx context.Context, role llm.Role, req llm.Request) (llm.Reply, error) {
	ch := make(chan modelReply, 1)
	w.mu.Lock()
	w.callID++
	id := w.callID
	w.calls[id] = ch
	w.mu.Unlock()
	call := modelCall{Role: role, Request: req}
	if d, ok := ctx.Deadline(); ok {
		call.Timeout = time.Until(d)
	}
	var num [8]byte
	binary.LittleEndian.PutUint64(num[:], id)
	w.fw.send(frameCall, num[:], mustJSON(call))
	select {
	case r := <-ch:
		if r.Err != nil {
			return llm.Reply{}, r.Err
		}
		return r.Reply, nil
	case <-ctx.Done():
		w.mu.Lock()
		delete(w.calls, id)
		w.mu.Unlock()
		return llm.Reply{}, &llm.Error{Msg: ctx.Err().Error()}
	}
}

// serve scores the cases as they come. The engine's streams read whole
// groups before they score, so each run of cases already here with one
// artifact (none: score only) is a stream of its own; the streams run at
// once, and each writes its results after the one before it, in order.
func (w *worker) serve(e *engine.Engine) {
	var wg sync.WaitGroup
	checks := make(chan []engine.Case, 16)
	wg.Add(1)
	go func() { // contract checks, one at a time: the parent matches replies in order
		defer wg.Done()
		for cases := range checks {
			w.fw.send(frameChecks, mustJSON(e.Check(w.ctx, cases)))
		}
	}()
	prev := make(chan struct{})
	close(prev)
	var held *wtask
	for {
		var first wtask
		if held != nil {
			first, held = *held, nil
		} else {
			t, ok := <-w.tasks
			if !ok {
				break
			}
			first = t
		}
		if first.check != nil {
			checks <- first.check
			continue
		}
		chunk := []wtask{first}
	more:
		for len(chunk) < maxInflight {
			select {
			case t, ok := <-w.tasks:
				if !ok {
					break more
				}
				if t.check != nil || t.art != first.art {
					held = &t
					break more
				}
				chunk = append(chunk, t)
			default:
				break more
			}
		}
		done := make(chan struct{})
		wg.Add(1)
		go func(prev <-chan struct{}) {
			defer wg.Done()
			defer close(done)
			w.scoreChunk(e, chunk, prev)
		}(prev)
		prev = done
	}
	<-prev
	close(checks)
	wg.Wait()
}

// transcoders read the chunks' case lines, one a chunk at a time: a line's
// values are transcoded as it is parsed, once.
var transcoders = sync.Pool{New: func() any { return new(caseio.Transcoder) }}

// scoreChunk scores cases that share an artifact as one engine stream. Its
// results go out as they come once the chunk before it is written (prev
// closed), and are held until then.
func (w *worker) scoreChunk(e *engine.Engine, chunk []wtask, prev <-chan struct{}) {
	tc := transcoders.Get().(*caseio.Transcoder)
	defer transcoders.Put(tc)
	cases := func(yield func(engine.Case) bool) {
		for _, t := range chunk {
			c, err := tc.ParseCase(t.raw, t.line)
			if err != nil {
				c = engine.InvalidCase(c.ID, err)
			}
			if !yield(c) {
				return
			}
		}
	}
	art := chunk[0].art
	var results iter.Seq2[int, engine.Result]
	if art == 0 {
		results = e.ScoreAll(w.ctx, cases, 0)
	} else {
		w.mu.Lock()
		a, ok := w.arts.m[art]
		w.mu.Unlock()
		if !ok {
			a = json.RawMessage(`null`)
		}
		results = e.Evaluate(w.ctx, a, cases)
	}
	var held []engine.Result
	turn := false
	for _, r := range results {
		if !turn {
			select {
			case <-prev:
				turn = true
				for _, h := range held {
					w.fw.addResult(h, art != 0)
				}
				held = nil
			default:
				held = append(held, r)
				continue
			}
		}
		w.fw.addResult(r, art != 0)
	}
	if !turn {
		<-prev
		for _, h := range held {
			w.fw.addResult(h, art != 0)
		}
	}
}

// watch tells the parent what only it can act on: a case that holds its
// thread past its timeout (the parent kills and replaces this process)
// and, with several threads, a metric that sets signal handlers.
func (w *worker) watch(e *engine.Engine, threads int, stop <-chan struct{}) {
	var last string
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		if wd, ok := e.Wedged(); ok && wd.CaseID != last {
			last = wd.CaseID
			w.fw.send(frameWedged, []byte(wd.CaseID+"\x00"+wd.Why()))
		}
		w.noteSignals(e, threads)
	}
}

// noteSignals tells the parent, once each, of a metric that sets signal
// handlers or forks while cases run on several threads.
func (w *worker) noteSignals(e *engine.Engine, threads int) {
	if threads < 2 || (w.saidSignals.Load() && w.saidFork.Load()) {
		return
	}
	if !w.saidSignals.Load() {
		if u, ok := e.SignalUse(); ok && w.saidSignals.CompareAndSwap(false, true) {
			w.fw.send(frameNotice, []byte(u.SignalWarning(threads)))
		}
	}
	if w.saidFork.Load() {
		return
	}
	if u, ok := e.ForkUse(); ok && w.saidFork.CompareAndSwap(false, true) {
		w.fw.send(frameNotice, []byte(u.ForkWarning(threads)))
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("pool: " + err.Error())
	}
	return b
}

// keptArtifacts is how many artifacts a worker keeps. Both sides drop the
// oldest first, in the order they were sent, so the parent knows what a
// worker still has without asking.
const keptArtifacts = 64

// artifacts are the last keptArtifacts artifacts sent, by id.
type artifacts[T any] struct {
	m     map[uint32]T
	order []uint32
}

func newArtifacts[T any]() artifacts[T] { return artifacts[T]{m: map[uint32]T{}} }

func (a *artifacts[T]) add(id uint32, v T) {
	if _, ok := a.m[id]; !ok {
		a.order = append(a.order, id)
	}
	a.m[id] = v
	for len(a.order) > keptArtifacts {
		delete(a.m, a.order[0])
		a.order = a.order[1:]
	}
}
