package engine

// The queue: parcels submitted by callers, requeued jobs ahead of them, and
// how a worker polls for the next one.

import (
	"context"
	"slices"
	"time"
)

// submit queues a group's undelivered jobs as its parcel; without ok, each
// already has its outcome (an input error, or canceled).
func (e *Engine) submit(ctx context.Context, g *group) bool {
	p := &g.p
	p.group = g
	e.cache.Resolve(&p.args) // the ids of values transcoded where they were read
	g.seq = e.groupSeq.Add(1)
	p.jobs, p.obs = p.jobs[:0], p.obs[:0]
	for i := range g.jobs {
		j := &g.jobs[i]
		if j.delivered.Load() {
			continue
		}
		j.pos = int32(len(p.jobs))
		p.jobs = append(p.jobs, j)
		p.obs = append(p.obs, &j.obs)
	}
	if len(p.jobs) == 0 {
		return false
	}
	stop := func(o outcome) bool {
		for _, j := range p.jobs {
			j.deliver(o)
		}
		return false
	}
	if e.closed.Load() {
		return stop(closedOutcome)
	}
	select {
	case e.jobs <- p:
		if e.aio != nil {
			e.aio.wake()
		}
		return true
	case <-ctx.Done():
		return stop(canceledOutcome(ctx, "before score was called"))
	case <-e.quit:
		return stop(closedOutcome)
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

// requeue puts jobs back in the queue for any worker, without blocking the
// caller (a worker must never block on the queue it drains).
//
// They go to the front of the queue, ahead of parcels not yet taken: the
// rest of a group is scored before later groups, so results stream in
// order instead of arriving all at the end.
func (s *scheduler) requeue(jobs []*scoreJob) {
	if len(jobs) == 0 {
		return
	}
	jobs = append([]*scoreJob(nil), jobs...)
	for _, j := range jobs {
		j.run.Store(nil)
		j.state.CompareAndSwap(jobBatched, jobQueued) // an abandoned job stays abandoned
	}
	s.frontMu.Lock()
	// In case order, not requeue order: a batch whose budget ran out
	// before its first cases requeues them after the rest of their group,
	// which take requeued while forming it; taken in that order, a slow
	// case could start (and hold the worker) before the cases ahead of it.
	k := len(s.front)
	for k > 0 && jobBefore(jobs[0], s.front[k-1].jobs[0]) {
		k--
	}
	s.front = slices.Insert(s.front, k, &parcel{jobs: jobs})
	s.frontLen.Store(int32(len(s.front)))
	s.frontMu.Unlock()
	select {
	case s.frontReady <- struct{}{}:
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
func (s *scheduler) popFront() *parcel {
	if s.frontLen.Load() == 0 {
		return nil // the common case, without the lock
	}
	s.frontMu.Lock()
	defer s.frontMu.Unlock()
	if len(s.front) == 0 {
		return nil
	}
	p := s.front[0]
	s.front = s.front[1:]
	s.frontLen.Store(int32(len(s.front)))
	if len(s.front) > 0 {
		select { // more is waiting: make sure another worker looks
		case s.frontReady <- struct{}{}:
		default:
		}
	}
	return p
}

// cancel gives up on a job for its caller: the outcome is delivered now and
// the work is stopped if it can be (not started: taken back; running: interrupted).
func (s *scheduler) cancel(j *scoreJob, o outcome) {
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
