package engine

// The unit of work: a case in flight (scoreJob), the group its caller waits
// on, the parcel a worker takes, and how an outcome reaches the waiter.

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/skynetml/skynet/cpython"
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
	byWorker  atomic.Int32  // outcomes delivered by a batch done with their jobs (see recycle)
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
func (s *scheduler) newGroup(n int) *group {
	if n == maxBatch {
		if g := s.groups.take(&s.spareMu); g != nil {
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
			g.p.args.Reset()
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

// recycle keeps a group whose results have been read for reuse, if
// nothing else can still touch it: every outcome came from a batch that was
// done with the job, so no watchdog, canceller or batch holds a job of it,
// and a parcel scored whole was handed to the waiter. A worker that finds
// the waiter gone (every outcome harvested while the batch ran) still
// touches the group after (runParcel's finish): a reused group would get
// the old cases' outcomes there.
func (s *scheduler) recycle(g *group) {
	if cap(g.jobs) != maxBatch || g.byWorker.Load() != int32(len(g.jobs)) {
		return
	}
	if g.whole.Load() != nil && g.handoff.Load() != handedOver {
		return
	}
	g.jobs = g.jobs[:maxBatch]
	s.groups.keep(&s.spareMu, g)
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

// settle counts n outcomes delivered from a batch (deliverSlot). done
// says the batch was done with their jobs; a harvested outcome's batch is
// still running, and will look at the job again when it ends, so its group
// must not be recycled (see recycle).
func (g *group) settle(n int, done bool) {
	if n == 0 {
		return
	}
	if done {
		g.byWorker.Add(int32(n))
	}
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
