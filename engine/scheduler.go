package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/skynetml/skynet/cpython"
	"github.com/skynetml/skynet/llm"
	"github.com/skynetml/skynet/skynetmod"
)

// How the scheduler works. Score and ScoreAll encode cases on the caller's
// goroutine (without the GIL) into a group's parcel: its jobs and all their
// arguments in one buffer. A worker goroutine takes a queued parcel whole
// when it fits the batch size, scores it in one cgo crossing under one GIL
// hold (cpython.ScoreBatch), and hands the batch to the group's waiter, who
// copies the outcomes out (runParcel, finish). Parcels too big for the batch
// size, and cases a batch left unstarted, are taken job by job (take,
// runJobs). The batch size adapts so a batch holds the GIL for about
// batchBudget: fast metrics get whole groups, slow ones (a model call) one
// case at a time, so other workers run meanwhile. Workers are pinned to OS
// threads only while cases are slow (pin). One watchdog goroutine per
// engine times out the case running in each batch.
const (
	maxBatch    = 64
	batchBudget = 200 * time.Microsecond
	// With one worker no other thread waits for the GIL, so a batch may run
	// longer: fewer cgo crossings and OS-thread hops per case for metrics
	// that do real work (difflib: 0.94x the time, faster in 27 of 40
	// alternated pairs).
	soloBudget     = 5 * time.Millisecond
	watchdogTick   = 5 * time.Millisecond
	interruptGrace = 500 * time.Millisecond
	modelCallSlack = 50 * time.Millisecond // > watchdogTick
	// A waiting stream or an idle worker polls this long before parking: a
	// parked thread costs a wake-up, and on a VM an idle vCPU halts, and
	// waking it can take milliseconds.
	spinFor = 2 * time.Millisecond
	// A spinner that has waited this long yields its vCPU (see spinUntil):
	// a batch ends every few µs while both threads run.
	yieldAfter = 10 * time.Microsecond
	// An idle worker parks at once while work has been arriving this far
	// apart on average: a wake-up (a few µs) is cheaper than polling.
	maxPollIdle = 40 * time.Microsecond
)

// Job states: a queued job is taken into a batch or abandoned by its caller.
const (
	jobQueued int32 = iota
	jobBatched
	jobAbandoned
)

// scoreJob is one case in flight. Jobs travel in groups: Score makes a group
// of one, ScoreAll groups of up to maxBatch, so the scheduler's per-case cost
// is a few atomic operations rather than a channel hand-off per case.
type scoreJob struct {
	g         *group
	ctx       context.Context // the caller's, for the case's model calls
	program   bool            // run the program first (Evaluate)
	id        string
	argAt     int32 // index of the first argument in the group's parcel args
	pos       int32 // index in the group's parcel
	obs       Observation
	state     atomic.Int32
	delivered atomic.Bool
	ready     atomic.Bool // out is written: a slow stream may yield it before its group is done (waitJob)
	out       outcome
	run       atomic.Pointer[batchRun] // the batch taking it job by job
	index     int                      // within run
}

// parcel is a run of queued jobs. A group's own parcel also holds every
// job's arguments, encoded one after another by the submitter, so that a
// worker can score it whole without touching each job (runParcel); a
// requeued parcel is taken job by job.
type parcel struct {
	jobs  []*scoreJob
	group *group // nil for a requeued parcel
	args  cpython.BatchArgs
	obs   []*Observation
}

// group is a set of jobs whose caller waits for all of them at once.
type group struct {
	seq       uint64 // submission order, for the order of requeued parcels
	jobs      []scoreJob
	remaining atomic.Int32
	byWorker  atomic.Int32  // outcomes delivered from a batch (see recycle)
	done      chan struct{} // closed once every job has its outcome
	progress  chan struct{} // a job got its outcome (cap 1; see waitJob)
	p         parcel

	// A parcel scored whole is handed to the waiter to finish: ran is
	// closed once batch is set. handoff settles who frees the batch when
	// the waiter has already gone (handedOver / waiterGone).
	whole    atomic.Pointer[batchRun] // the batch scoring the parcel whole
	ran      chan struct{}
	batch    *batchRun
	handoff  atomic.Int32
	finished bool // the waiter finished batch
}

const (
	handedOver int32 = 1
	waiterGone int32 = 2
)

// Spares an engine keeps (see spares): groups are about 30 KB each, plus
// their argument buffers.
const (
	spareGroups  = 64
	spareBatches = 64
	spareMemos   = 4
)

// newGroup returns a group of n jobs, a recycled one for a full group.
func (e *Engine) newGroup(n int) *group {
	if n == maxBatch {
		if g := e.groups.take(&e.spareMu); g != nil {
			for i := range g.jobs {
				g.jobs[i] = scoreJob{g: g}
			}
			g.remaining.Store(int32(n))
			g.byWorker.Store(0)
			g.done, g.ran = make(chan struct{}), make(chan struct{})
			select {
			case <-g.progress:
			default:
			}
			a := &g.p.args
			a.Buf, a.Offsets, a.IDs = a.Buf[:0], a.Offsets[:0], a.IDs[:0]
			g.whole.Store(nil)
			g.batch, g.finished = nil, false
			g.handoff.Store(0)
			return g
		}
	}
	g := &group{jobs: make([]scoreJob, n), done: make(chan struct{}), ran: make(chan struct{}), progress: make(chan struct{}, 1)}
	g.remaining.Store(int32(n))
	for i := range g.jobs {
		g.jobs[i].g = g
	}
	return g
}

// shrink cuts a group to its first n jobs (the last group of a stream).
func (g *group) shrink(n int) {
	g.jobs = g.jobs[:n]
	if g.remaining.Add(int32(n-maxBatch)) == 0 {
		close(g.done) // every job already had its outcome
	}
}

// ready reports whether waiting for the group would not block for long:
// every outcome is in, or its batch is ready to finish. Atomic loads only:
// a waiter spinning on channel selects would contend for the channels'
// locks with the worker closing them.
func (g *group) ready() bool {
	return g.remaining.Load() == 0 || g.handoff.Load() == handedOver
}

// spin polls ready for a while before the waiter parks (see poll), unless
// the engine does not spin (Options.NoSpin).
func (e *Engine) spin(done func() bool) bool {
	if e.noSpin {
		return done()
	}
	return spinUntil(done)
}

// spinUntil polls done for up to spinFor, yielding the processor now and
// then; it reports whether done came true.
//
// Past yieldAfter it also yields the CPU to the kernel: a stream's two
// threads that the kernel put on one vCPU then take turns instead of each
// spinning out its time slice while the other waits (1.9 µs per case
// pinned to one CPU without this, 0.7 µs with it).
func spinUntil(done func() bool) bool {
	start := time.Now()
	deadline := start.Add(spinFor)
	for i := 0; !done(); i++ {
		if i%64 == 63 {
			now := time.Now()
			if now.After(deadline) {
				return false
			}
			runtime.Gosched()
			if now.Sub(start) > yieldAfter {
				osYield()
			}
		}
	}
	return true
}

// recycle keeps a group whose results have been read for reuse, if
// nothing else can still touch it: every outcome came from a batch that was
// done with the job, so no watchdog, canceller or batch holds a job of it.
func (e *Engine) recycle(g *group) {
	if cap(g.jobs) != maxBatch || g.byWorker.Load() != int32(len(g.jobs)) {
		return
	}
	g.jobs = g.jobs[:maxBatch]
	e.groups.keep(&e.spareMu, g)
}

// pendingRan is g.ran while the waiter has a handed-over batch still to
// finish, nil once it finished it: a select on it fires once.
func (g *group) pendingRan() <-chan struct{} {
	if g.finished {
		return nil
	}
	return g.ran
}

// finishRan finishes the batch handed over for g once ran closed (finish;
// markReady as there), on the waiter's goroutine.
func (e *Engine) finishRan(g *group, markReady bool) {
	g.finished = true
	e.finish(g.batch, markReady)
}

// leave is the waiter's last step: a batch handed over but not finished
// (every outcome came from elsewhere) is freed here, else the worker
// learns that nobody will take it.
func (g *group) leave() {
	if g.handoff.CompareAndSwap(0, waiterGone) {
		return
	}
	if !g.finished {
		g.finished = true
		g.batch.free()
	}
}

// deliver hands the job its outcome; only the first of the worker, the
// watchdog and a cancelling caller gets through.
func (j *scoreJob) deliver(o outcome) bool {
	if !j.delivered.CompareAndSwap(false, true) {
		return false
	}
	j.out = o
	j.ready.Store(true)
	if j.g.remaining.Add(-1) == 0 {
		close(j.g.done)
	}
	j.g.noteProgress()
	return true
}

// noteProgress wakes a slow stream waiting for its group's next outcome.
func (g *group) noteProgress() {
	select {
	case g.progress <- struct{}{}:
	default:
	}
}

// deliverSlot is deliver for an outcome a batch finished, read out of the
// batch's C memory (fromSlot). The caller settles the group's counts
// (settle) for the jobs it delivered, once per group.
func (j *scoreJob) deliverSlot(v cpython.SlotView, strs func([]byte) string) bool {
	if !j.delivered.CompareAndSwap(false, true) {
		return false
	}
	j.out.fromSlot(v, j.program, strs) // in place: j.out is still zero, only the first deliverer gets here
	return true
}

// settle counts n outcomes delivered from a batch (deliverSlot).
func (g *group) settle(n int) {
	if n == 0 {
		return
	}
	g.byWorker.Add(int32(n))
	if g.remaining.Add(int32(-n)) == 0 {
		close(g.done)
	}
	g.noteProgress()
}

// outcome is what a job ends with: a value or error from Python, or a
// timeout, cancellation or input error decided on the Go side.
type outcome struct {
	runErr  bool   // run failed: raw is its error
	output  []byte // encoded output of run (program cases)
	runTime time.Duration
	ok      bool   // raw is an encoded value, else an encoded Python error
	raw     []byte // undecoded: the waiting caller decodes it
	scored  bool   // the common score record, decoded into pair (raw is nil)
	pair    cpython.ScorePair
	err     error
	logs    string
	cut     bool
	elapsed time.Duration
	kind    ErrorKind // set when decided in Go
	why     string
	final   *Result // a result decided before the case was queued
}

// batchRun is a batch being scored by a worker.
type batchRun struct {
	e           *Engine
	mu          sync.Mutex // guards b against a cancelling caller once freed
	freed       bool
	b           *cpython.Batch
	jobs        []*scoreJob
	tokenBase   uint64
	interrupted []time.Time     // watchdog only
	intDone     []chan struct{} // closed when the interrupt got the GIL
	stuck       int             // 1 + the case the watchdog gave up on, on the main thread (watchdog only)
}

// worker scores batches with its own Caller, on a goroutine of its own or,
// for a MainThread engine's first, on the main thread.
type worker struct {
	py      *pyMetric
	caller  *cpython.Caller
	slot    *skynetmod.Slot // the batch's observations, for the skynet module
	retired atomic.Bool     // replaced after a stuck call; exits when it returns
	main    bool            // runs on the main thread (Options.MainThread): never replaced
	pinned  bool            // locked to its OS thread (pin); the main thread's always is
	mu      sync.Mutex      // guards run against the batch being freed
	run     *batchRun

	// Reused from batch to batch.
	args cpython.BatchArgs
	obs  []*Observation
}

// startWorker starts a scoring worker: on the main thread (through
// cpython.OnMainThread) for the first of a MainThread engine, else on a
// goroutine of its own.
func (e *Engine) startWorker(main bool) error {
	c, err := cpython.NewCaller(e.logsLimit)
	if err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	w := &worker{py: e.py, caller: c, slot: skynetmod.NewSlot(), main: main, pinned: main}
	w.slot.SetModel(func(i int, inRun bool, req llm.Request) (string, error) { return e.callModel(w, i, inRun, req) })
	e.poolMu.Lock()
	e.pool = append(e.pool, w)
	e.poolMu.Unlock()
	e.workers.Add(1)
	if !main {
		go e.workerLoop(w)
		return nil
	}
	if !cpython.OnMainThread(func() { e.workerLoop(w) }) {
		e.removeWorker(w)
		e.workers.Done()
		w.slot.Close()
		c.Close()
		return errors.New("engine: MainThread: the main thread already scores for another engine (one per process at a time)")
	}
	return nil
}

// pin keeps the worker's goroutine on one OS thread while cases are slow:
// Python's thread state, its caches and the CPU's then stay put from batch
// to batch (difflib: with soloBudget, 0.98x the plain script against
// 1.10-1.20x unpinned). Fast metrics run unpinned: a pinned goroutine's
// hand-offs cost a thread switch each.
func (w *worker) pin(on bool) {
	if w.main || on == w.pinned {
		return
	}
	if on {
		runtime.LockOSThread()
	} else {
		runtime.UnlockOSThread()
	}
	w.pinned = on
}

func (e *Engine) removeWorker(w *worker) {
	e.poolMu.Lock()
	defer e.poolMu.Unlock()
	for i, x := range e.pool {
		if x == w {
			e.pool = append(e.pool[:i], e.pool[i+1:]...)
			return
		}
	}
}

func (e *Engine) workerLoop(w *worker) {
	defer e.workers.Done()
	defer e.removeWorker(w)
	defer w.caller.Close()
	defer w.slot.Close()
	defer w.pin(false)
	jobs := make([]*scoreJob, 0, maxBatch)
	for {
		first := e.popFront()
		if first == nil {
			idle := time.Now()
			first = e.poll()
			for first == nil {
				select {
				case first = <-e.jobs:
				case <-e.frontReady:
					first = e.popFront()
				case <-e.quit:
					return
				}
			}
			e.noteIdle(time.Since(idle))
		}
		w.pin(e.slowCases())
		if first.group != nil && len(first.jobs) <= e.batchSize() {
			e.runParcel(w, first)
		} else if jobs = e.take(first, jobs[:0]); len(jobs) > 0 {
			e.runJobs(w, jobs)
		}
		if w.retired.Load() {
			return
		}
		if w.pinned {
			// The batch readied the stream's goroutine onto this P. Let it
			// run elsewhere before the next long cgo call: with work left in
			// the P's queue, sysmon takes the P from the call and then polls
			// every 20 us for the next millisecond.
			runtime.Gosched()
		}
	}
}

// poll looks for queued work for a while before the worker parks: a
// stream queues its next group within microseconds, and a parked worker
// costs a wake-up (a system call, slow on VMs) and, worse, lets the
// scheduler put the two threads of a stream on one core, where each waits
// for the other.
func (e *Engine) poll() *parcel {
	if e.noSpin || e.slowCases() {
		return nil // many idle workers spinning would only burn the CPU
	}
	if time.Duration(e.avgIdle.Load()) > maxPollIdle {
		// Work comes slower than a wake-up costs (a case file's parser
		// feeding the stream): spinning would take the CPU the feeder needs.
		return nil
	}
	var p *parcel
	spinUntil(func() bool {
		select {
		case p = <-e.jobs:
		default:
			p = e.popFront()
		}
		return p != nil
	})
	return p
}

// slowCases reports that cases take long enough (model calls, a metric doing
// real work) that nothing waiting for them should spin: a spinning waiter
// takes CPU from the threads scoring them, and a wake-up is cheap
// beside a case.
//
// A group whose cases take longer than spinFor in all counts: waiting on it
// by spinning would burn most of a core for nothing (a wake-up costs µs), and
// in a pool of worker processes that core is another worker's.
func (e *Engine) slowCases() bool { return time.Duration(e.avgCase.Load())*maxBatch > spinFor }

// verySlowCases reports cases slow enough (a model call, a few ms of real
// work) that their results are worth handing on one by one.
func (e *Engine) verySlowCases() bool { return time.Duration(e.avgCase.Load()) > spinFor }

// noteIdle adds how long a worker waited for work to the moving average
// poll consults. A wait longer than spinFor is a pause between streams, not
// the pace of one, and is left out.
func (e *Engine) noteIdle(d time.Duration) {
	if d > spinFor {
		return
	}
	if old := time.Duration(e.avgIdle.Load()); old > 0 {
		d = (old*7 + d) / 8
	}
	e.avgIdle.Store(int64(d)) // racing workers may drop an update; it is only a hint
}

// callModel makes an llm() call for case i of w's running batch, on the
// worker's thread with the GIL released. It is cut short by the caller's
// context and by the case's remaining time.
func (e *Engine) callModel(w *worker, i int, inRun bool, req llm.Request) (string, error) {
	ctx, remaining, role := context.Background(), e.timeout, llm.RoleMetric
	if inRun {
		remaining, role = e.runTimeout, llm.RoleTask
	}
	var job *scoreJob
	w.mu.Lock()
	if br := w.run; br != nil && i < len(br.jobs) {
		job = br.jobs[i]
		if job.ctx != nil {
			ctx = job.ctx
		}
		if cur, running := br.b.Current(); cur == i {
			remaining -= running
		}
	}
	w.mu.Unlock()
	// The call may outlive the case by a little, so that the watchdog (not
	// the model call's own deadline) decides that the case timed out.
	ctx, cancel := context.WithTimeout(ctx, remaining+modelCallSlack)
	defer cancel()
	reply, err := e.llm.Call(ctx, role, req)
	if inRun && job != nil {
		job.account(reply, err)
	}
	return reply.Text, err
}

// account adds a task-model call made by run to the case's observation:
// this worker's thread is the only one touching it while the case runs.
// A call without a price leaves the case's cost not measured.
func (j *scoreJob) account(r llm.Reply, err error) {
	o := &j.obs
	if o.ModelCalls != nil {
		*o.ModelCalls++
	}
	if err != nil {
		return
	}
	if o.InputTokens != nil {
		*o.InputTokens += r.InputTokens
		*o.OutputTokens += r.OutputTokens
	}
	if r.CostUSD == nil {
		o.CostUSD = nil
	} else if o.CostUSD != nil {
		*o.CostUSD += *r.CostUSD
	}
}

// batchSize is how many cases fill about the batch budget at the recent pace.
func (e *Engine) batchSize() int {
	avg := time.Duration(e.avgCase.Load())
	if avg <= 0 {
		return 1 // nothing measured yet: a slow metric must not be hoarded by one worker
	}
	return max(1, min(maxBatch, int(e.budget/avg)))
}

// take collects jobs from p and the requeued parcels, up to the batch size,
// skipping abandoned ones; what does not fit goes back in the queue.
// A batch either scores or evaluates a program, so jobs of the other kind
// go back too.
func (e *Engine) take(p *parcel, jobs []*scoreJob) []*scoreJob {
	size := e.batchSize()
	var other []*scoreJob
	defer func() {
		if len(other) > 0 {
			e.requeue(other)
		}
	}()
	for {
		for i, j := range p.jobs {
			if len(jobs) == size {
				e.requeue(p.jobs[i:])
				return jobs
			}
			if len(jobs) > 0 && j.program != jobs[0].program {
				other = append(other, j)
				continue
			}
			if j.state.CompareAndSwap(jobQueued, jobBatched) {
				jobs = append(jobs, j)
			}
		}
		if len(jobs) == size {
			return jobs
		}
		// Only requeued jobs are added: a group's parcel left in the queue
		// is scored whole by the next batch instead of being broken up.
		if p = e.popFront(); p == nil {
			return jobs
		}
	}
}

// runParcel scores a group's parcel whole, with the arguments its submitter
// encoded, and hands the batch to the group's waiter, who copies the
// outcomes out (finish): the worker touches no job, so its thread goes
// straight back to Python. Cases the budget left unstarted are requeued.
func (e *Engine) runParcel(w *worker, p *parcel) {
	g := p.group
	br, ok := e.newRun(p.jobs, false)
	if !ok {
		return
	}
	g.whole.Store(br)
	// Only the parcel's jobs are undelivered at submit, so a count says
	// whether any was since, without touching every job.
	if int(g.remaining.Load()) != len(p.jobs) {
		br.takeBackDelivered()
	}
	if finished := e.runBatch(w, br, &p.args, p.obs); finished < len(p.jobs) {
		e.requeue(br.takeBackUnstarted())
	}
	g.batch = br
	if g.handoff.CompareAndSwap(0, handedOver) {
		close(g.ran)
		return
	}
	e.finish(br, false) // the waiter has gone: every outcome came from elsewhere
}

// finish copies a handed-over batch's outcomes to their jobs and frees it.
func (e *Engine) finish(br *batchRun, markReady bool) {
	n := 0
	for i, j := range br.jobs {
		if v := br.b.Slot(i); v.State == cpython.SlotDone && j.deliverSlot(v, e.str) {
			if markReady { // only waitJob reads ready before the group is done
				j.ready.Store(true)
			}
			n++
		}
	}
	br.free()
	if len(br.jobs) > 0 {
		br.jobs[0].g.settle(n) // a parcel's jobs are all of one group
	}
}

// runJobs scores jobs taken one by one (requeued, or a parcel larger than
// the batch size), delivering each outcome from the worker.
func (e *Engine) runJobs(w *worker, jobs []*scoreJob) {
	br, ok := e.newRun(jobs, true)
	if !ok {
		return
	}
	jobs = br.jobs
	nargs := e.nargs
	args := &w.args
	args.Buf, args.Offsets, args.IDs = args.Buf[:0], args.Offsets[:0], args.IDs[:0]
	obs := w.obs[:0]
	for i, j := range jobs {
		from := &j.g.p.args // the job's arguments, as its submitter encoded them
		for k := 0; k < nargs; k++ {
			at := int(j.argAt) + k
			end := len(from.Buf)
			if at+1 < len(from.Offsets) {
				end = int(from.Offsets[at+1])
			}
			args.Offsets = append(args.Offsets, uint64(len(args.Buf)))
			args.IDs = append(args.IDs, from.IDs[at])
			args.Buf = append(args.Buf, from.Buf[from.Offsets[at]:end]...)
		}
		obs = append(obs, &j.obs)
		j.index = i
		j.run.Store(br)
	}
	w.obs = obs
	br.takeBackDelivered()
	e.runBatch(w, br, args, obs)
	for i, j := range jobs {
		if v := br.b.Slot(i); v.State == cpython.SlotDone && j.deliverSlot(v, e.str) {
			j.ready.Store(true)
			j.g.settle(1)
		}
	}
	leftover := br.takeBackUnstarted()
	br.free()
	e.requeue(leftover)
}

// newRun allocates the batch for jobs (copied when the caller reuses the
// slice); when it cannot, they fail.
func (e *Engine) newRun(jobs []*scoreJob, copyJobs bool) (*batchRun, bool) {
	b, err := e.getBatch(len(jobs))
	if err != nil {
		for _, j := range jobs {
			j.deliver(outcome{err: err})
		}
		return nil, false
	}
	if copyJobs {
		jobs = append([]*scoreJob(nil), jobs...)
	}
	return &batchRun{e: e, b: b, jobs: jobs, tokenBase: cpython.NewTokens(len(jobs))}, true
}

// getBatch returns a batch for n cases, reusing a finished one when it can:
// a stream then allocates no C memory per batch.
func (e *Engine) getBatch(n int) (*cpython.Batch, error) {
	if b := e.batches.take(&e.spareMu); b != nil {
		if b.Reset(n) {
			return b, nil
		}
		b.Free()
	}
	b, err := cpython.NewBatch(max(n, maxBatch))
	if err == nil && !b.Reset(n) {
		panic("engine: a new batch cannot hold its cases")
	}
	return b, err
}

// putBatch keeps a finished batch for reuse, or frees it.
func (e *Engine) putBatch(b *cpython.Batch) {
	if !e.batches.keep(&e.spareMu, b) {
		b.Free()
	}
}

// freeSpare frees the kept batches once the engine is closed; from then on
// putBatch frees them at once.
func (e *Engine) freeSpare() {
	e.spareMu.Lock()
	defer e.spareMu.Unlock()
	for _, b := range e.batches.items {
		b.Free()
	}
	e.batches = spares[cpython.Batch]{}
}

// runBatch scores br on w's thread and returns how many cases finished.
func (e *Engine) runBatch(w *worker, br *batchRun, args *cpython.BatchArgs, obs []*Observation) int {
	w.slot.Set(obs)
	w.mu.Lock()
	w.run = br
	w.mu.Unlock()
	var run *cpython.Object
	if br.jobs[0].program {
		run = w.py.run
	}
	finished := w.caller.ScoreBatch(br.b, w.py.score, run, e.nargs, args, e.cache, br.tokenBase, e.mode, w.slot.Handle(), e.budget)
	calls := finished
	if run != nil { // a case whose run failed never called score
		for i := range br.jobs {
			if br.b.State(i) == cpython.SlotDone && br.b.Slot(i).RunFailed {
				calls--
			}
		}
	}
	e.scoreCalls.Add(int64(max(calls, 0)))
	restoreCwd()
	w.mu.Lock()
	w.run = nil
	w.mu.Unlock()
	w.slot.Set(nil)
	if finished > 0 {
		// The cases' own times, not the call's: waiting for the GIL while
		// another worker holds it must not shrink the batches.
		per := br.b.Took() / time.Duration(finished)
		if old := time.Duration(e.avgCase.Load()); old > 0 {
			per = (old*3 + per) / 4
		}
		e.avgCase.Store(int64(per)) // racing workers may drop an update; it is only a size hint
	}
	return finished
}

// takeBackDelivered claims the cases whose caller gave up while the batch
// formed: they will not run.
func (br *batchRun) takeBackDelivered() {
	for i, j := range br.jobs {
		if j.delivered.Load() {
			br.b.Claim(i)
		}
	}
}

// takeBackUnstarted claims the cases the batch did not start (its budget
// ran out, or its worker is stuck before them) and returns their jobs.
func (br *batchRun) takeBackUnstarted() []*scoreJob {
	var jobs []*scoreJob
	for i, j := range br.jobs {
		if br.b.Slot(i).State == cpython.SlotPending && br.b.Claim(i) {
			jobs = append(jobs, j)
		}
	}
	return jobs
}

// free gives the batch back for reuse, once; a canceller holding br then
// leaves it alone.
func (br *batchRun) free() {
	br.mu.Lock()
	defer br.mu.Unlock()
	if !br.freed {
		br.freed = true
		br.e.putBatch(br.b)
	}
}

// harvest delivers job j, case i of the batch, if the batch has finished
// it while it goes on with later cases: a finished slot is published with a
// release store and its data never moves, and mu keeps the batch from being
// freed meanwhile.
func (br *batchRun) harvest(i int, j *scoreJob) bool {
	br.mu.Lock()
	defer br.mu.Unlock()
	if br.freed || i >= len(br.jobs) || br.jobs[i] != j || br.b.State(i) != cpython.SlotDone {
		return false
	}
	if !j.deliverSlot(br.b.Slot(i), br.e.str) {
		return false
	}
	j.ready.Store(true)
	return true
}

// slotOutcome reads a finished slot out of C memory.
func slotOutcome(b *cpython.Batch, i int, program bool, strs func([]byte) string) outcome {
	var o outcome
	o.fromSlot(b.Slot(i), program, strs)
	return o
}

// fromSlot fills a zero outcome from a finished slot, the one place that
// reads a slot's data: the common score record is decoded on the spot
// (strs makes its strings), anything else is copied for the waiting caller
// to decode. A program case carries run's output before score's value or
// error.
func (o *outcome) fromSlot(v cpython.SlotView, program bool, strs func([]byte) string) {
	o.ok, o.cut, o.elapsed, o.runTime = v.OK, v.Cut, v.Elapsed, v.RunTime
	if len(v.Logs) > 0 {
		o.logs = string(v.Logs)
	}
	data, copied := v.Data, false
	switch {
	case v.RunFailed:
		o.runErr = true
	case program:
		data, copied = append([]byte(nil), data...), true // the output is kept
		out, rest, err := cpython.SplitValue(data)
		if err != nil {
			o.raw, o.err = data, fmt.Errorf("internal error: undecodable output: %v", err)
			return
		}
		o.output, data = out, rest
	}
	if o.ok && !o.runErr {
		p, ok, err := cpython.DecodeScorePair(data, strs)
		if ok {
			o.scored, o.pair = true, p
			return
		}
		if err != nil {
			o.err = fmt.Errorf("internal error: undecodable outcome: %v", err)
		}
	}
	if !copied {
		data = append([]byte(nil), data...)
	}
	o.raw = data
}

// requeue puts jobs back in the queue for any worker, without blocking the
// caller (a worker must never block on the queue it drains).
//
// They go to the front of the queue, ahead of parcels not yet taken: the
// rest of a group is scored before later groups, so results stream in
// order instead of arriving all at the end.
func (e *Engine) requeue(jobs []*scoreJob) {
	if len(jobs) == 0 {
		return
	}
	jobs = append([]*scoreJob(nil), jobs...)
	for _, j := range jobs {
		j.run.Store(nil)
		j.state.CompareAndSwap(jobBatched, jobQueued) // an abandoned job stays abandoned
	}
	e.frontMu.Lock()
	// In case order, not requeue order: a batch whose budget ran out
	// before its first cases requeues them after the rest of their group,
	// which take requeued while forming it; taken in that order, a slow
	// case could start (and hold the worker) before the cases ahead of it.
	k := len(e.front)
	for k > 0 && jobBefore(jobs[0], e.front[k-1].jobs[0]) {
		k--
	}
	e.front = slices.Insert(e.front, k, &parcel{jobs: jobs})
	e.frontLen.Store(int32(len(e.front)))
	e.frontMu.Unlock()
	select {
	case e.frontReady <- struct{}{}:
	default: // a wake-up is already pending
	}
}

// jobBefore reports whether a comes before b in the order cases were
// submitted.
func jobBefore(a, b *scoreJob) bool {
	if a.g != b.g {
		return a.g.seq < b.g.seq
	}
	return a.pos < b.pos
}

// popFront takes the oldest requeued parcel, if any.
func (e *Engine) popFront() *parcel {
	if e.frontLen.Load() == 0 {
		return nil // the common case, without the lock
	}
	e.frontMu.Lock()
	defer e.frontMu.Unlock()
	if len(e.front) == 0 {
		return nil
	}
	p := e.front[0]
	e.front = e.front[1:]
	e.frontLen.Store(int32(len(e.front)))
	if len(e.front) > 0 {
		select { // more is waiting: make sure another worker looks
		case e.frontReady <- struct{}{}:
		default:
		}
	}
	return p
}

// cancel gives up on a job for its caller: the outcome is delivered now and
// the work is stopped if it can be (not started: taken back; running: interrupted).
func (e *Engine) cancel(j *scoreJob, o outcome) {
	if !j.deliver(o) {
		return
	}
	if j.state.CompareAndSwap(jobQueued, jobAbandoned) {
		// Not taken job by job; its parcel may be running whole.
		if br := j.g.whole.Load(); br != nil {
			br.stop(int(j.pos))
		}
		return
	}
	if br := j.run.Load(); br != nil {
		br.stop(j.index)
	}
}

// stop takes case i back if it has not started, else interrupts it.
func (br *batchRun) stop(i int) {
	br.mu.Lock()
	defer br.mu.Unlock()
	if !br.freed && !br.b.Claim(i) {
		go cpython.Interrupt(br.tokenBase + uint64(i))
	}
}

// watchdog times out the running case of each worker's batch: it delivers the
// timeout at once, interrupts the call, and if the call does not unwind within
// interruptGrace (blocked in sleep, I/O or C code) it hands the batch's
// unstarted cases to other workers and retires the worker for a replacement;
// the main thread's worker, which nothing in the process can replace, is
// reported stuck instead (Wedged).
func (e *Engine) watchdog() {
	tick := time.NewTicker(watchdogTick)
	defer tick.Stop()
	for {
		select {
		case <-e.quit:
			return
		case <-tick.C:
		}
		e.poolMu.Lock()
		pool := append([]*worker(nil), e.pool...)
		e.poolMu.Unlock()
		for _, w := range pool {
			e.watch(w)
		}
		if e.aio != nil {
			e.aio.watch()
		}
		e.reviewWedge()
	}
}

func (e *Engine) watch(w *worker) {
	w.mu.Lock()
	defer w.mu.Unlock()
	br := w.run
	if br == nil || w.retired.Load() {
		return
	}
	cur, running := br.b.Current()
	limit, kind, what := e.timeout, KindTimeout, "score"
	if cur >= 0 && br.jobs[cur].program && br.b.Running() {
		limit, kind, what = e.runTimeout, KindRun, "run"
	}
	if cur < 0 || running < limit || br.stuck == cur+1 {
		return
	}
	now := time.Now()
	if br.interrupted == nil {
		br.interrupted = make([]time.Time, len(br.jobs))
		br.intDone = make([]chan struct{}, len(br.jobs))
	}
	if br.interrupted[cur].IsZero() {
		br.interrupted[cur] = now
		br.jobs[cur].deliver(outcome{kind: kind, why: fmt.Sprintf("%s timed out after %s", what, limit), elapsed: running})
		done := make(chan struct{})
		br.intDone[cur] = done
		go func() {
			cpython.Interrupt(br.tokenBase + uint64(cur))
			close(done)
		}()
		return
	}
	if now.Sub(br.interrupted[cur]) < interruptGrace {
		return
	}
	holdsGIL := false
	select {
	case <-br.intDone[cur]:
	default:
		holdsGIL = true // the interrupt is still waiting for the GIL: C code holds it
	}
	// Stuck outside Python bytecode: its other cases go to other workers.
	for i, j := range br.jobs[:cur] {
		if br.b.State(i) == cpython.SlotDone {
			j.deliver(slotOutcome(br.b, i, j.program, e.str))
		}
	}
	e.requeue(br.takeBackUnstarted())
	if w.main {
		br.stuck = cur + 1
		e.noteWedge(&wedge{Wedge: Wedge{CaseID: br.jobs[cur].id, Since: br.interrupted[cur], HoldsGIL: holdsGIL},
			w: w, br: br, cur: cur, released: br.intDone[cur]})
		return
	}
	if holdsGIL {
		e.noteWedge(&wedge{Wedge: Wedge{CaseID: br.jobs[cur].id, Since: br.interrupted[cur], HoldsGIL: true},
			released: br.intDone[cur]})
	}
	w.retired.Store(true)
	if !e.closed.Load() {
		e.startWorker(false)
	}
}

// Wedge says which case's call is stuck past its timeout in a way only
// ending the process can undo. Either C code holds the GIL (a catastrophic
// regex, a C extension's loop), so no Python runs anywhere until it returns,
// and it cannot be interrupted; or, with Options.MainThread, the call holds
// the main thread, blocked outside Python bytecode (a sleep, a socket read,
// C code that released the GIL), and the main thread's worker cannot be
// replaced within the process: other threads (Threads > 1) go on scoring,
// but nothing can use the main thread until it returns.
type Wedge struct {
	CaseID string    // the case whose score (or run) call is stuck
	Since  time.Time // when the case timed out
	// HoldsGIL says C code holds the GIL; false: the call is blocked
	// outside Python bytecode on the main thread.
	HoldsGIL bool
}

// Why says what holds what, for a message about the case.
func (w Wedge) Why() string {
	if w.HoldsGIL {
		return "its call is stuck in C code that holds the GIL (no Python runs until it returns)"
	}
	return "its call is blocked outside Python bytecode (a sleep, I/O or C code) on the main thread, whose worker cannot be replaced in this process"
}

// wedge is a reported Wedge and what clears it: released closing (the
// interrupt got the GIL) for another thread's worker, whose replacement
// already scores; the case ending for the main thread's worker w.
type wedge struct {
	Wedge
	w        *worker // the main thread's worker, or nil
	br       *batchRun
	cur      int
	released <-chan struct{}
}

func (e *Engine) noteWedge(w *wedge) {
	e.wedge.CompareAndSwap(nil, w)
}

// reviewWedge clears the reported wedge once it is over, or notes that the
// main thread's stuck call let go of the GIL. Watchdog only.
func (e *Engine) reviewWedge() {
	wg := e.wedge.Load()
	if wg == nil {
		return
	}
	released := false
	select {
	case <-wg.released:
		released = true
	default:
	}
	if wg.w == nil {
		if released {
			e.wedge.CompareAndSwap(wg, nil)
		}
		return
	}
	wg.w.mu.Lock()
	over := wg.w.run != wg.br // the batch ended (and may be freed): so did the case
	if !over {
		cur, _ := wg.br.b.Current()
		over = cur != wg.cur
	}
	wg.w.mu.Unlock()
	switch {
	case over:
		e.wedge.CompareAndSwap(wg, nil)
	case released && wg.HoldsGIL:
		next := *wg
		next.HoldsGIL = false
		e.wedge.CompareAndSwap(wg, &next)
	}
}

// Wedged reports the case whose stuck call only ending the process can
// undo, if there is one (see Wedge): a caller may give up on the process
// (the skynet command restarts its Python child).
func (e *Engine) Wedged() (Wedge, bool) {
	if w := e.wedge.Load(); w != nil {
		return w.Wedge, true
	}
	return Wedge{}, false
}

// startCwd is the working directory when the engine package started. The
// working directory belongs to the whole process, Go host included; a
// metric's os.chdir is undone after its batch so the host's relative paths
// keep their meaning. Python's chdir calls are seen by the audit hook, so
// the common batch costs no system call here.
var startCwd, _ = syscall.Getwd()

func restoreCwd() {
	if startCwd == "" || !cpython.CwdMoved() {
		return
	}
	if cwd, err := syscall.Getwd(); err == nil && cwd != startCwd {
		syscall.Chdir(startCwd)
	}
}
