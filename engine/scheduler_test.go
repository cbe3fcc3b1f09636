package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// echoMetric scores each case by its own input, so a result that reached
// the wrong case (a recycled group, a requeued job) shows.
const echoMetric = `
import time
def score(input, output, expected=None):
    if input.get("slow"):
        time.sleep(0.001)
    return input["n"] / 1e6, {"feedback": f"{input['n']}:{output}"}
`

func numbered(from, to int, slowFrom int) func(func(Case) bool) {
	return func(yield func(Case) bool) {
		for i := from; i < to; i++ {
			in := map[string]any{"n": i}
			if slowFrom >= 0 && i >= slowFrom {
				in["slow"] = true
			}
			if !yield(Case{ID: strconv.Itoa(i), Input: in, Output: fmt.Sprint("o", i)}) {
				return
			}
		}
	}
}

// checkStream holds ScoreAll to its promise: one result per case, in input
// order, each the case's own.
func checkStream(t *testing.T, e *Engine, from, to, slowFrom int) {
	t.Helper()
	n := from
	for i, r := range e.ScoreAll(ctx, numbered(from, to, slowFrom), 0) {
		require.Equal(t, n-from, i)
		require.Nil(t, r.Err, "case %d: %+v", n, r.Err)
		require.Equal(t, strconv.Itoa(n), r.ID)
		require.Equal(t, fmt.Sprintf("%d:o%d", n, n), r.Feedback)
		require.Equal(t, float64(n)/1e6, r.Score)
		n++
	}
	require.Equal(t, to, n, "every case gets exactly one result")
}

// TestStreamResultsAreTheirCases runs enough cases through one engine that
// groups are recycled many times, with a partial last group.
func TestStreamResultsAreTheirCases(t *testing.T) {
	e := open(t, Options{Metric: writeMetric(t, echoMetric)})
	checkStream(t, e, 0, 20_000+37, -1)
	checkStream(t, e, 50_000, 50_001, -1)
}

// TestWholeParcelLeftovers: a fast start sizes batches to whole groups, then
// slow cases overrun the batch budget, so a parcel scored whole leaves
// unstarted cases that go back in the queue and are scored job by job.
func TestWholeParcelLeftovers(t *testing.T) {
	e := open(t, Options{Metric: writeMetric(t, echoMetric)})
	checkStream(t, e, 0, 2_000+300, 2_000)
}

// TestHarvestedGroupsAreTheirCases: with slow cases a waiter takes each
// outcome from the running batch as it is done (harvest). When it has them
// all before the worker hands the batch over (a thread descheduled there,
// which the hook makes certain), it leaves, and the worker then finishes
// the batch itself, touching the group's jobs: the group must not have
// been reused meanwhile by another stream, whose cases would get the old
// outcomes. Streams of one or two cases, several at once, as a worker
// process scores the chunks it is sent.
func TestHarvestedGroupsAreTheirCases(t *testing.T) {
	const slow = `
import time
def score(input, output, expected=None):
    time.sleep(0.002)
    return input["n"] / 1e6, {"feedback": f"{input['n']}:{output}"}
`
	e := open(t, Options{Metric: writeMetric(t, slow)})
	checkStream(t, e, 0, 200, -1) // the pace: slow cases, batches of one or two
	hook := func() { time.Sleep(3 * harvestEvery) }
	testHookParcelRan.Store(&hook)
	t.Cleanup(func() { testHookParcelRan.Store(nil) })
	var wg sync.WaitGroup
	for s := 0; s < 4; s++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < 25; k++ {
				from := (s*100 + k) * 10
				checkStream(t, e, from, from+1+k%2, -1)
			}
		}()
	}
	wg.Wait()
}

// TestConcurrentStreamsAndScores mixes streams and single calls on a pool of
// workers (run under -race by make test).
func TestConcurrentStreamsAndScores(t *testing.T) {
	e := open(t, Options{Metric: writeMetric(t, echoMetric), Threads: 3})
	var wg sync.WaitGroup
	for s := 0; s < 3; s++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			checkStream(t, e, s*100_000, s*100_000+3_000, -1)
		}()
	}
	for c := 0; c < 4; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				n := 900_000 + c*1000 + i
				r := e.Score(ctx, Case{ID: "s", Input: map[string]any{"n": n}, Output: "x"})
				assert.Equal(t, fmt.Sprintf("%d:x", n), r.Feedback)
			}
		}()
	}
	wg.Wait()
}

// TestStreamStopsEarly: breaking out of the loop cancels what is in flight,
// and the engine goes on serving.
func TestStreamStopsEarly(t *testing.T) {
	e := open(t, Options{Metric: writeMetric(t, echoMetric)})
	seen := 0
	for range e.ScoreAll(ctx, numbered(0, 100_000, -1), 0) {
		if seen++; seen == 150 {
			break
		}
	}
	assert.Equal(t, 150, seen)
	checkStream(t, e, 0, 500, -1)
}

// TestStreamCancelled: cancelling the context stops reading cases; every
// case read gets one result, scored or canceled, in order.
func TestStreamCancelled(t *testing.T) {
	e := open(t, Options{Metric: writeMetric(t, echoMetric)})
	c, cancel := context.WithCancel(ctx)
	defer cancel()
	read := 0
	cases := func(yield func(Case) bool) {
		for i := 0; ; i++ {
			if i == 1_000 {
				cancel()
			}
			read++
			if !yield(Case{ID: strconv.Itoa(i), Input: map[string]any{"n": i, "slow": i >= 900}, Output: "x"}) {
				return
			}
		}
	}
	done := make(chan struct{})
	results, canceled := 0, 0
	go func() {
		defer close(done)
		for i, r := range e.ScoreAll(c, cases, 0) {
			require.Equal(t, results, i)
			require.Equal(t, strconv.Itoa(i), r.ID)
			if r.Err != nil {
				require.Equal(t, KindCanceled, r.Err.Kind, "%+v", r.Err)
				canceled++
			}
			results++
		}
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("a cancelled stream did not end")
	}
	assert.Equal(t, read, results, "every case read gets its result")
	assert.Greater(t, canceled, 0)
	checkStream(t, e, 0, 300, -1)
}

// TestDurations: per-case times come from a fast clock calibrated over
// earlier batches (batch.c); they must still read true, for cases shorter
// and longer than its re-anchoring interval.
func TestDurations(t *testing.T) {
	e := open(t, Options{Metric: writeMetric(t, `
import time
def score(input, output, expected=None):
    time.sleep(input.get("sleep", 0))
    return 1.0, {"feedback": "ok"}
`)})
	for range e.ScoreAll(ctx, numbered(0, 5_000, -1), 0) { // calibrates the clock
	}
	for _, d := range []time.Duration{3 * time.Millisecond, 20 * time.Millisecond} {
		var got []time.Duration
		cases := []Case{{ID: "a", Input: map[string]any{"sleep": d.Seconds()}}, {ID: "b", Input: map[string]any{"sleep": d.Seconds()}}}
		for _, r := range e.ScoreAll(ctx, sliceSeq(cases), 0) {
			require.Nil(t, r.Err)
			got = append(got, r.Duration)
		}
		for _, g := range got {
			assert.GreaterOrEqual(t, g, d, "slept %v", d)
			assert.Less(t, g, d+100*time.Millisecond, "slept %v", d)
		}
	}
}

// Every result carries its case's observation back, whichever path made it:
// a score pair, another return value, an exception, an input error.
func TestResultsCarryTheirObservation(t *testing.T) {
	e := open(t, Options{Metric: writeMetric(t, `
def score(input, output, expected=None):
    if output == "raise":
        raise ValueError("no")
    if output == "extra":
        return 0.5, {"feedback": "ok", "note": 1}
    return 1.0, {"feedback": "ok"}
`)})
	var cases []Case
	for i, out := range []string{"pair", "extra", "raise", "pair"} {
		cost, calls := float64(i)+0.5, int64(i)
		cases = append(cases, Case{ID: fmt.Sprint(i), Input: map[string]any{}, Output: out,
			Observation: Observation{CostUSD: &cost, ModelCalls: &calls}})
	}
	cost := 9.0
	cases = append(cases, Case{ID: "bad", Output: "pair", Observation: Observation{CostUSD: &cost}}) // no input
	check := func(c Case, r Result) {
		require.Equal(t, c.ID, r.ID)
		require.NotNil(t, r.Observation.CostUSD, "case %s", c.ID)
		require.Equal(t, *c.Observation.CostUSD, *r.Observation.CostUSD, "case %s", c.ID)
	}
	for i, r := range e.ScoreAll(ctx, sliceSeq(cases), 0) {
		check(cases[i], r)
	}
	for _, c := range cases {
		check(c, e.Score(ctx, c))
	}
}

// A stream of slow cases yields each result when it is in, not when its
// group of 64 is: when the first result comes, far fewer than 64 cases
// have started (each case notes its start in a file).
func TestSlowStreamYieldsEachResult(t *testing.T) {
	started := filepath.Join(t.TempDir(), "started")
	e := open(t, Options{Metric: writeMetric(t, fmt.Sprintf(`
import time
def score(input, output, expected=None):
    with open(%q, "a") as f:
        f.write("x")
    time.sleep(0.02)
    return 1.0, {"feedback": "ok"}
`, started))})
	cases := make([]Case, 64)
	for i := range cases {
		cases[i] = Case{ID: fmt.Sprint(i), Input: map[string]any{}, Output: i}
	}
	n := 0
	for i, r := range e.ScoreAll(ctx, slices.Values(cases), 0) {
		require.Nil(t, r.Err, "%+v", r.Err)
		require.Equal(t, n, i)
		if n == 0 {
			b, err := os.ReadFile(started)
			require.NoError(t, err)
			assert.Less(t, len(b), 32, "cases started when the first result came")
		}
		n++
	}
	assert.Equal(t, 64, n)
}

// TestStreamYieldsFinishedCasesBeforeASlowOne: a stream yields the results
// of cases done while a slow case of the same group (and batch) still
// runs, whatever the pace of the cases before it (a few µs, a few hundred
// µs), rather than holding them until the slow one ends.
//
// Without spinning (NoSpin, as in the pool's workers) the stream waits for
// a group whole for a while first; a batch that hands over part of the
// group meanwhile (its budget spent before the slow case) must not make
// it wait for the rest.
func TestStreamYieldsFinishedCasesBeforeASlowOne(t *testing.T) {
	for _, pace := range []struct {
		name   string
		loop   int // iterations of work in each fast case (not a clock: a test before may have patched time's)
		noSpin bool
	}{{"fast", 0, false}, {"some work", 5000, false}, {"fast, no spin", 0, true}, {"some work, no spin", 5000, true}} {
		t.Run(pace.name, func(t *testing.T) {
			e := open(t, Options{Metric: writeMetric(t, fmt.Sprintf(`
import time
def score(input, output, expected=None):
    if input.get("slow"):
        time.sleep(3)
    x = 0
    for i in range(%d):
        x += i * i
    return 1.0, {"feedback": "ok"}
`, pace.loop)), Threads: 1, NoSpin: pace.noSpin})
			var cases []Case
			for i := range 100 {
				cases = append(cases, Case{ID: fmt.Sprint(i), Input: map[string]any{"n": i}, Output: "x"})
			}
			cases = append(cases, Case{ID: "slow", Input: map[string]any{"slow": true}, Output: "x"})
			start := time.Now()
			var at []time.Duration
			for _, r := range e.ScoreAll(ctx, slices.Values(cases), 0) {
				require.Nil(t, r.Err, "%s: %v", r.ID, r.Err)
				at = append(at, time.Since(start))
			}
			require.Len(t, at, 101)
			if at[99] > 2*time.Second {
				for i := range at {
					if at[i] > 2*time.Second {
						t.Logf("first late: case %d at %s (case %d at %s)", i, at[i], max(i-1, 0), at[max(i-1, 0)])
						break
					}
				}
			}
			assert.Less(t, at[99], 2*time.Second, "case 99 was yielded %s after the start, while the slow case (3 s) still ran", at[99])
			assert.GreaterOrEqual(t, at[100], 3*time.Second)
		})
	}
}
