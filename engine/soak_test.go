package engine

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rssKB reads this process's resident set size, after returning the Go
// heap's free memory to the system so garbage is not counted as growth.
func rssKB(t testing.TB) int {
	debug.FreeOSMemory()
	f, err := os.Open("/proc/self/status")
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")))
			require.NoError(t, err)
			return kb
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// soakCases is how many cases a soak scores: the number in the environment
// variable name, or def for the short run make test does.
func soakCases(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	require.NoError(t, err, "%s", name)
	return n
}

// TestSoak scores many cases and holds RSS flat: after warming up on 10,000
// cases it may grow by at most 5 MB however many more follow. The default is
// a short run for make test; SKYNET_SOAK=1000000 is the full soak (make soak).
func TestSoak(t *testing.T) {
	total := soakCases(t, "SKYNET_SOAK", 200_000)
	e := open(t, Options{Metric: writeMetric(t, `
def score(input, output, expected=None):
    ok = output == expected["label"]
    note = f"case {input['n']}: got {output!r}"
    return (1.0 if ok else 0.0), {"feedback": note, "scores": {"match": 1.0 if ok else 0.0}}
`)})
	// A dataset of 100 inputs that repeat, as an optimizer scoring candidates
	// would have, mixed with inputs seen once; a new output every time.
	cases := func(from, to int) func(func(Case) bool) {
		return func(yield func(Case) bool) {
			for i := from; i < to; i++ {
				n := i % 100
				if i%2 == 1 {
					n = i // half the inputs never repeat: they must not fill the cache
				}
				in, _ := json.Marshal(map[string]any{"n": n, "text": fmt.Sprintf("question %d", n)})
				c := Case{ID: strconv.Itoa(i), Input: json.RawMessage(in), Output: fmt.Sprintf("answer %d", i),
					Expected: json.RawMessage(fmt.Sprintf(`{"label": "answer %d"}`, i%7))}
				if !yield(c) {
					return
				}
			}
		}
	}
	run := func(from, to int) {
		n := from
		for i, r := range e.ScoreAll(ctx, cases(from, to), 0) {
			require.Nil(t, r.Err, "case %d: %+v", from+i, r.Err)
			require.Equal(t, strconv.Itoa(from+i), r.ID)
			n++
		}
		require.Equal(t, to, n, "every case gets exactly one result")
	}
	const warm = 10_000
	run(0, warm)
	before := rssKB(t)
	for from := warm; from < total; from += 50_000 {
		run(from, min(total, from+50_000))
	}
	after := rssKB(t)
	t.Logf("RSS after %d cases: %d kB; after %d: %d kB (%+d kB)", warm, before, total, after, after-before)
	if raceEnabled {
		t.Skip("RSS is not a leak measure under the race detector")
	}
	assert.LessOrEqual(t, after-before, 5*1024, "RSS grew by more than 5 MB")
}
