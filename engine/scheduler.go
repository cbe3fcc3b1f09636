package engine

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/skynetml/skynet/cpython"
)

// How the scheduler works, and where: jobs.go (a case in flight, its group
// and parcel), queue.go, batch.go, threads.go, wait.go (the caller's side),
// watchdog.go and modelcost.go. Score and ScoreAll encode cases on the caller's
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
	watchdogTick   = 5 * time.Millisecond // the watchdog's shortest sleep
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
	// The main thread's worker yields after a batch (workerLoop) only when
	// batches take longer than this. Its goroutine is locked to the thread,
	// so a yield costs two context switches; below this, sysmon's retake of
	// the P costs less: gsm8k regex 6-8% less wall time, trivial 10%
	// (alternated pairs, 1 and 2 processes). At 2 ms, token F1 (batches
	// under 1 ms) lost 8-13% at 2 processes; at 500 us it did not. On one
	// P (oneP) it does not yield: there is no other P to run the goroutine.
	mainYieldOver = 500 * time.Microsecond
	// With Options.AdaptProcs the main thread's worker runs the process on
	// one P while a group takes under oneP, and on all again over manyP.
	// Short batches end every 10-200 us, and each readies a goroutine that
	// a second P's threads spin up, steal and park for: the gsm8k regex 20%
	// less wall time at 2 processes, the trivial match 14% (40% at 1;
	// alternated pairs). Long ones lose on one P: with no idle P, sysmon
	// takes the P from every cgo call and ticks every 20 us after (the
	// normalised match, 750 us groups, 9% more CPU at 1 process; a metric
	// that forks, 11%).
	oneP  = 300 * time.Microsecond
	manyP = 600 * time.Microsecond
)

// scheduler is the engine's scheduling state, apart from the metric it
// runs: the queue, the worker threads, the batch size's measures, the
// watchdog's view and the spares reused between calls. Engine embeds it.
type scheduler struct {
	jobs       chan *parcel
	frontMu    sync.Mutex // requeued jobs go ahead of jobs: see requeue
	front      []*parcel
	frontLen   atomic.Int32  // len(front), read without the lock
	groupSeq   atomic.Uint64 // groups submitted: their order (group.seq)
	frontReady chan struct{}
	quit       chan struct{}
	workers    sync.WaitGroup
	poolMu     sync.Mutex
	pool       []*worker     // live workers, for the watchdog
	avgCase    atomic.Int64  // moving average of a case's time in ns, sizes batches
	budget     time.Duration // how long a batch may hold the GIL
	avgIdle    atomic.Int64  // moving average of how long an idle worker waited for work, in ns
	wedge      atomic.Pointer[wedge]
	spareMu    sync.Mutex
	batches    spares[cpython.Batch] // finished batches kept for reuse (getBatch)
	groups     spares[group]         // read groups kept for reuse (newGroup)
	memos      spares[jsonMemo]      // streams' memos kept for reuse (getMemo)
}

func newScheduler() scheduler {
	return scheduler{
		jobs:       make(chan *parcel, 256),
		batches:    spares[cpython.Batch]{max: spareBatches},
		groups:     spares[group]{max: spareGroups},
		memos:      spares[jsonMemo]{max: spareMemos},
		frontReady: make(chan struct{}, 1),
		quit:       make(chan struct{}),
	}
}
