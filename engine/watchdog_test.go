package engine

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const sleepMetric = `
import time
def score(input, output, expected=None):
    time.sleep(input["s"])
    return 1.0, {"feedback": "slept"}
`

// countFor counts the calls of a test hook made for engine e.
func countFor(t *testing.T, hook *atomic.Pointer[func(*Engine)], e *Engine) *atomic.Int64 {
	var n atomic.Int64
	f := func(of *Engine) {
		if of == e {
			n.Add(1)
		}
	}
	hook.Store(&f)
	t.Cleanup(func() { hook.Store(nil) })
	return &n
}

// A case that runs long wakes the engine's Go side a few times, not every
// few milliseconds: the watchdog sleeps until a case may be due and a
// waiting stream's harvests back off while none finishes.
func TestWatchdogWakesWhenDue(t *testing.T) {
	e := open(t, Options{Metric: writeMetric(t, sleepMetric)})
	passes := countFor(t, &testHookWatchdog, e)
	harvests := countFor(t, &testHookHarvest, e)
	start := time.Now()
	var got []Result
	for _, r := range e.ScoreAll(ctx, slices.Values([]Case{{ID: "long", Input: map[string]any{"s": 0.6}, Output: "x"}}), 0) {
		got = append(got, r)
	}
	require.Len(t, got, 1)
	require.Nil(t, got[0].Err, "%v", got[0].Err)
	took := time.Since(start)
	require.GreaterOrEqual(t, took, 600*time.Millisecond)
	// At a fixed 5 ms tick the watchdog passed ~120 times, at 10 ms the
	// stream harvested ~60 times.
	assert.LessOrEqual(t, passes.Load(), int64(4), "watchdog passes")
	assert.LessOrEqual(t, harvests.Load(), int64(took/harvestMost)+4, "harvests in %s", took) // 10, 20, 40 ms, then every 80
}

// A case that starts after a watchdog pass chose its sleep still times out
// on time: no pass sleeps past the shortest limit.
func TestWatchdogTimesOutACaseThatStartsLater(t *testing.T) {
	e := open(t, Options{Metric: writeMetric(t, sleepMetric), Timeout: 150 * time.Millisecond})
	time.Sleep(30 * time.Millisecond) // the first pass finds no case running
	var got []Result
	for _, r := range e.ScoreAll(ctx, slices.Values([]Case{
		{ID: "ok", Input: map[string]any{"s": 0.1}, Output: "x"},
		{ID: "late", Input: map[string]any{"s": 1}, Output: "x"},
	}), 0) {
		got = append(got, r)
	}
	require.Len(t, got, 2)
	assert.Nil(t, got[0].Err)
	require.NotNil(t, got[1].Err)
	assert.Equal(t, KindTimeout, got[1].Err.Kind)
	assert.GreaterOrEqual(t, got[1].Duration, 150*time.Millisecond)
	assert.Less(t, got[1].Duration, 400*time.Millisecond, "timed out when due, not at the next long sleep's end")
}

func TestHarvestPace(t *testing.T) {
	p := newHarvestPace()
	defer p.stop()
	<-p.t.C
	var waits []time.Duration
	for _, found := range []int{0, 0, 0, 0, 0, 2, 0} {
		p.next(found)
		waits = append(waits, p.every)
		<-p.t.C
	}
	assert.Equal(t, []time.Duration{20 * time.Millisecond, 40 * time.Millisecond, harvestMost, harvestMost, harvestMost,
		harvestEvery, 2 * harvestEvery}, waits)
}
