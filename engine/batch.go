package engine

// Batches: how many cases a worker takes, how it scores them in one cgo
// crossing, and how their outcomes are copied out.

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/skynetml/skynet/cpython"
)

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

// batchSize is how many cases fill about the batch budget at the recent pace.
func (s *scheduler) batchSize() int {
	avg := time.Duration(s.avgCase.Load())
	if avg <= 0 {
		return 1 // nothing measured yet: a slow metric must not be hoarded by one worker
	}
	return max(1, min(maxBatch, int(s.budget/avg)))
}

// take collects jobs from p and the requeued parcels, up to the batch size,
// skipping abandoned ones; what does not fit goes back in the queue.
// A batch either scores or evaluates a program, so jobs of the other kind
// go back too.
func (s *scheduler) take(p *parcel, jobs []*scoreJob) []*scoreJob {
	size := s.batchSize()
	var other []*scoreJob
	defer func() {
		if len(other) > 0 {
			s.requeue(other)
		}
	}()
	for {
		for i, j := range p.jobs {
			if len(jobs) == size {
				s.requeue(p.jobs[i:])
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
		if p = s.popFront(); p == nil {
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
	if hook := testHookParcelRan.Load(); hook != nil {
		(*hook)()
	}
	g.batch = br
	if g.handoff.CompareAndSwap(0, handedOver) {
		close(g.ran)
		return
	}
	e.finish(br, false) // the waiter has gone: every outcome came from elsewhere
}

// testHookParcelRan, when set by a test, runs between a parcel's batch and
// its handover: a thread descheduled there under load.
var testHookParcelRan atomic.Pointer[func()]

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
		br.jobs[0].g.settle(n, true) // a parcel's jobs are all of one group
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
	args.Reset()
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
			j.g.settle(1, true)
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
func (s *scheduler) getBatch(n int) (*cpython.Batch, error) {
	if b := s.batches.take(&s.spareMu); b != nil {
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
func (s *scheduler) putBatch(b *cpython.Batch) {
	if !s.batches.keep(&s.spareMu, b) {
		b.Free()
	}
}

// freeSpare frees the kept batches once the engine is closed; from then on
// putBatch frees them at once.
func (s *scheduler) freeSpare() {
	s.spareMu.Lock()
	defer s.spareMu.Unlock()
	for _, b := range s.batches.items {
		b.Free()
	}
	s.batches = spares[cpython.Batch]{}
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

// stop takes case i back if it has not started, else interrupts it.
func (br *batchRun) stop(i int) {
	br.mu.Lock()
	defer br.mu.Unlock()
	if !br.freed && !br.b.Claim(i) {
		go cpython.Interrupt(br.tokenBase + uint64(i))
	}
}
