package main

import (
	"io"
	"strconv"
	"testing"

	"github.com/skynetml/skynet/engine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The id set finds every repeat, with the line first seen, through the
// table's growth from the smallest size, and takes every new id.
func TestIDSet(t *testing.T) {
	for _, hint := range []int{0, 100_000} {
		s := newIDSet(hint)
		for i := range 100_000 {
			_, dup := s.add("c"+strconv.Itoa(i), i+1)
			require.False(t, dup, "c%d", i)
		}
		for i := 0; i < 100_000; i += 997 {
			prev, dup := s.add("c"+strconv.Itoa(i), 200_000+i)
			require.True(t, dup, "c%d", i)
			assert.Equal(t, i+1, prev)
		}
		prev, dup := s.add("", 7)
		assert.False(t, dup)
		assert.Zero(t, prev)
		prev, dup = s.add("", 8)
		assert.True(t, dup)
		assert.Equal(t, 7, prev)
		assert.Equal(t, 100_001, s.n)
		assert.LessOrEqual(t, 2*s.n, len(s.slots), "at most half full")
	}
}

// Runs for throughput schedule their processes as a batch job; serve,
// whose requests wait on each case, does not.
func TestPoolOptionsBatch(t *testing.T) {
	sv := &supervisorFlags{processes: 1}
	for cmd, batch := range map[string]bool{"score": true, "eval": true, "check": true, "serve": false} {
		assert.Equal(t, batch, sv.poolOptions(cmd, engine.Options{Metric: "m.py"}, 0, io.Discard).Batch, cmd)
	}
}

// BenchmarkIDSet adds 100,000 ids as skynet score does for a case file of
// that many lines.
func BenchmarkIDSet(b *testing.B) {
	ids := make([]string, 100_000)
	for i := range ids {
		ids[i] = "c" + strconv.Itoa(i)
	}
	for b.Loop() {
		s := newIDSet(len(ids))
		for i, id := range ids {
			s.add(id, i+1)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(ids)), "ns/id")
}
