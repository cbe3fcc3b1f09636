package engine

// The waiter's side: a caller waiting for its group's outcomes, finishing a
// batch handed over to it, and cancellation.

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// closedOutcome is a case's outcome when the engine closes before its score
// call ends.
var closedOutcome = outcome{kind: KindCanceled, why: ErrClosed.Error(), err: ErrClosed}

// canceledOutcome is a case's outcome when ctx ends first; its cause is
// ctx.Err() and, when the context was cancelled with one, context.Cause.
func canceledOutcome(ctx context.Context, when string) outcome {
	err := ctx.Err()
	why := "score cancelled: " + err.Error()
	if when != "" {
		why = err.Error() + " " + when
	}
	if cause := context.Cause(ctx); cause != nil && cause != err {
		why += " (" + cause.Error() + ")"
		err = errors.Join(err, cause)
	}
	return outcome{kind: KindCanceled, why: why, err: err}
}

// wait returns once every job of the group has its outcome; a cancelled ctx
// or a closing engine ends the wait at once with canceled outcomes. When a
// worker scored the group's parcel whole, wait hands out the outcomes
// itself (finish), on the caller's goroutine rather than the worker's.
func (e *Engine) wait(ctx context.Context, g *group) {
	if !e.slowCases() {
		e.spin(g.ready)
	}
	for {
		var o outcome
		select {
		case <-g.done:
			g.leave()
			return
		case <-g.pendingRan():
			e.finishRan(g, false)
			continue
		case <-ctx.Done():
			o = canceledOutcome(ctx, "")
		case <-e.quit:
			o = closedOutcome
		}
		for i := range g.jobs {
			e.cancel(&g.jobs[i], o)
		}
		<-g.done
		g.leave()
		return
	}
}

// waitJob waits for job k's outcome while the rest of its group runs, so
// that a stream of slow cases yields each result when it is in rather than
// when its group of 64 is; a batch handed to the waiter is finished here,
// as wait does. False means wait for the group whole instead (the caller or
// the engine is stopping).
//
// While it waits, at pace's times (harvestEvery) it collects the outcomes
// the group's running batch has finished (harvest): a case done is not held
// behind a slow case later in the same batch.
func (e *Engine) waitJob(ctx context.Context, g *group, k int, pace *harvestPace) bool {
	j := &g.jobs[k]
	for !j.ready.Load() {
		select {
		case <-g.done:
			return true
		case <-g.progress:
		case <-g.pendingRan():
			e.finishRan(g, true)
		case <-pace.t.C:
			pace.next(e.harvest(g))
			if hook := testHookHarvest.Load(); hook != nil {
				(*hook)(e)
			}
		case <-ctx.Done():
			return false
		case <-e.quit:
			return false
		}
	}
	return true
}

// harvestEvery is how often a stream waiting on a group collects what its
// running batch has finished, while cases finish: with a caller's own
// flushes, a result is on its way out within tens of milliseconds of its
// case ending. After each harvest that finds nothing the wait doubles, up to
// harvestMost: a case that runs long (a judge waiting on a model, a grader
// that forks) then wakes the process's Go threads a dozen times a second,
// not a hundred, and each wake-up beside a fork costs TLB shoot-downs.
const (
	harvestEvery = 10 * time.Millisecond
	harvestMost  = 80 * time.Millisecond
)

// harvestPace times a waiting stream's harvests (harvestEvery).
type harvestPace struct {
	t     *time.Timer
	every time.Duration
}

func newHarvestPace() *harvestPace {
	return &harvestPace{t: time.NewTimer(harvestEvery), every: harvestEvery}
}

// next sets the next harvest after one that found n outcomes. The timer
// has fired and been read.
func (p *harvestPace) next(n int) {
	if n > 0 {
		p.every = harvestEvery
	} else {
		p.every = min(2*p.every, harvestMost)
	}
	p.t.Reset(p.every)
}

func (p *harvestPace) stop() { p.t.Stop() }

// testHookHarvest, when set by a test, runs after each harvest a waiting
// stream of an engine makes.
var testHookHarvest atomic.Pointer[func(*Engine)]

// harvest delivers the outcomes of g's jobs that their running batches
// (the parcel's whole, or one taking jobs one by one) have finished so far,
// while those batches go on (batchRun.harvest), and says how many. Whoever
// delivers second (the batch's own finish, runJobs) skips them:
// deliverSlot's first wins.
func (s *scheduler) harvest(g *group) int {
	n := 0
	for i := range g.jobs {
		j := &g.jobs[i]
		if j.delivered.Load() {
			continue
		}
		if br := j.run.Load(); br != nil {
			if br.harvest(j.index, j) {
				n++
			}
		} else if br := g.whole.Load(); br != nil && !g.finished && br.harvest(int(j.pos), j) {
			n++
		}
	}
	g.settle(n, false) // the batches run on: see recycle
	return n
}

// waitWhole waits up to d for every case of g to be done; false when d
// passed first, or the caller or the engine is stopping. A batch that
// hands over part of g meanwhile (its budget spent: the rest went back to
// the queue, perhaps a slow case among it) is finished here, its outcomes
// ready for waitJob, and the wait goes on: the caller must not then wait
// for g whole, holding what is done behind the slow case.
func (e *Engine) waitWhole(ctx context.Context, g *group, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for g.remaining.Load() != 0 {
		select {
		case <-g.done:
		case <-g.pendingRan():
			e.finishRan(g, true)
		case <-t.C:
			return false
		case <-ctx.Done():
			return false
		case <-e.quit:
			return false
		}
	}
	return true
}

// finishHandedOver delivers what a batch handed over of g, if one did and
// nobody finished it yet (its outcomes ready for waitJob); it reports
// whether g is done whole. A handover alone makes g.ready, though jobs the
// batch's budget left unstarted were requeued and may still run long.
func (e *Engine) finishHandedOver(g *group) bool {
	if g.remaining.Load() != 0 {
		select {
		case <-g.pendingRan(): // the handover is complete once ran is closed, not at handoff
			e.finishRan(g, true)
		default:
		}
	}
	return g.remaining.Load() == 0
}
