package cpython

import (
	"encoding/binary"
	"hash/maphash"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestScoreBatchArguments checks that each case gets exactly its own
// arguments, whether the cache builds them from their bytes (first run) or
// hands back the objects it kept (second run), with uncached values mixed in.
func TestScoreBatchArguments(t *testing.T) {
	fn := function(t, "score", `
def score(input, output, expected=None):
    return float(len(input["q"])), {"feedback": repr((input, output, expected))}
`)
	defer release(fn)
	cache, err := NewArgCache(1 << 20)
	require.NoError(t, err)
	defer cache.Close()
	c, err := NewCaller(1 << 10)
	require.NoError(t, err)
	defer c.Close()

	type call struct {
		input    map[string]any
		output   any
		expected any
	}
	calls := []call{
		{map[string]any{"q": "a"}, "x", map[string]any{"label": "one"}},
		{map[string]any{"q": "bb"}, int64(7), nil},
		{map[string]any{"q": "ccc"}, []any{"y", true}, map[string]any{"label": "three"}},
	}
	want := []string{
		`({'q': 'a'}, 'x', {'label': 'one'})`,
		`({'q': 'bb'}, 7, None)`,
		`({'q': 'ccc'}, ['y', True], {'label': 'three'})`,
	}
	var args BatchArgs
	for i, cl := range calls {
		for k, v := range []any{cl.input, cl.output, cl.expected} {
			start := len(args.Buf)
			args.Buf, err = AppendValue(args.Buf, v)
			require.NoError(t, err)
			id := int32(-1)
			if k != 1 || i == 0 { // outputs but the first are sent uncached
				cache.ID(args.Buf[start:]) // admitted the second time it is seen
				id = cache.ID(args.Buf[start:])
				require.GreaterOrEqual(t, id, int32(0))
			}
			args.Offsets = append(args.Offsets, uint64(start))
			args.IDs = append(args.IDs, id)
		}
	}
	for run := 0; run < 2; run++ {
		b, err := NewBatch(len(calls))
		require.NoError(t, err)
		require.Equal(t, len(calls), c.ScoreBatch(b, fn, nil, 3, &args, cache, NewTokens(len(calls)), 0, 0, 0))
		var took time.Duration
		for i := range calls {
			took += b.Slot(i).Elapsed
		}
		require.Positive(t, took)
		require.Equal(t, took, b.Took(), "Took sums the cases' times")
		for i := range calls {
			v := b.Slot(i)
			require.True(t, v.OK, "run %d case %d: %s", run, i, v.Data)
			p, ok, err := DecodeScorePair(v.Data, nil)
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, want[i], p.Feedback, "run %d case %d", run, i)
			require.Equal(t, float64(i+1), p.Score)
		}
		require.True(t, b.Reset(len(calls)))
		require.Zero(t, b.Took(), "a reset batch has taken no time")
		b.Free()
	}
}

// scorePairSlow is DecodeScorePair through the general decoder only.
func scorePairSlow(b []byte) (ScorePair, bool, error) {
	if len(b) == 0 || b[0] != 'R' {
		return ScorePair{}, false, nil
	}
	d := decoder{b: b, i: 1}
	p, err := d.scorePair()
	if err == nil && d.i != len(b) {
		err = errTruncated
	}
	return p, err == nil, err
}

// TestDecodeScorePair covers the usual record (read by a shortcut) and the
// ones the shortcut leaves to the general decoder.
func TestDecodeScorePair(t *testing.T) {
	record := func(score float64, feedback string, scores ...any) []byte {
		b := binary.LittleEndian.AppendUint64([]byte{'R'}, math.Float64bits(score))
		b = binary.AppendUvarint(b, uint64(len(feedback)))
		b = append(b, feedback...)
		b = binary.AppendUvarint(b, uint64(len(scores)/2))
		for i := 0; i < len(scores); i += 2 {
			name := scores[i].(string)
			b = binary.AppendUvarint(b, uint64(len(name)))
			b = append(b, name...)
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(scores[i+1].(float64)))
		}
		return b
	}
	long := strings.Repeat("x", 200) // a two-byte length
	for _, c := range []struct {
		b        []byte
		score    float64
		feedback string
		scores   map[string]float64
		names    []string // in the record's order, which is the metric's
	}{
		{record(1, "Correct."), 1, "Correct.", nil, nil},
		{record(0.5, ""), 0.5, "", nil, nil},
		{record(-2, "é and \x00"), -2, "é and \x00", nil, nil},
		{record(1, long), 1, long, nil, nil},
		{record(0.25, "ok", "b", 0.5, "a", 1.0), 0.25, "ok", map[string]float64{"a": 1, "b": 0.5}, []string{"b", "a"}},
	} {
		p, ok, err := DecodeScorePair(c.b, func(b []byte) string { return string(b) })
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, ScorePair{Score: c.score, Feedback: c.feedback, Scores: c.scores, Names: c.names}, p)
	}
	for _, bad := range [][]byte{
		append(record(1, "ok"), 0),          // trailing byte
		record(1, "ok")[:12],                // cut in the feedback
		record(1, "ok", "a", 1.0)[:14],      // cut in the scores
		append(record(1, "ok")[:12], 1),     // one score named, none there
		{'R', 0, 0, 0, 0, 0, 0, 0xf0, 0x3f}, // no feedback
	} {
		_, ok, err := DecodeScorePair(bad, nil)
		require.False(t, ok, "%q", bad)
		require.Error(t, err, "%q", bad)
	}
	_, ok, err := DecodeScorePair([]byte("s\x02ok"), nil)
	require.False(t, ok)
	require.NoError(t, err, "another value is not an error")
}

// TestUseAfterFree checks that a Batch, Caller, ArgCache or Object used
// after it was freed panics with a message naming it, rather than handing C
// a NULL pointer to crash the process on.
func TestUseAfterFree(t *testing.T) {
	b, err := NewBatch(2)
	require.NoError(t, err)
	b.Free()
	b.Free() // idempotent
	require.PanicsWithValue(t, "cpython: Batch used after Free", func() { b.Claim(0) })
	require.PanicsWithValue(t, "cpython: Batch used after Free", func() { b.State(0) })
	require.PanicsWithValue(t, "cpython: Batch used after Free", func() { b.Slot(0) })
	require.PanicsWithValue(t, "cpython: Batch used after Free", func() { b.Current() })
	require.False(t, b.Reset(1))

	c, err := NewCaller(1 << 10)
	require.NoError(t, err)
	c.Close()
	c.Close()
	fn := function(t, "score", "def score(input, output, expected=None):\n    return 1.0\n")
	require.PanicsWithValue(t, "cpython: Caller used after Close", func() {
		c.Call(fn, nil, 0, 0, false, 0)
	})

	live, err := NewCaller(1 << 10)
	require.NoError(t, err)
	defer live.Close()
	cache, err := NewArgCache(1 << 10)
	require.NoError(t, err)
	cache.Close()
	batch, err := NewBatch(1)
	require.NoError(t, err)
	defer batch.Free()
	args := &BatchArgs{Offsets: []uint64{0, 0, 0}, Buf: nil}
	require.PanicsWithValue(t, "cpython: ArgCache used after Close", func() {
		live.ScoreBatch(batch, fn, nil, 3, args, cache, 1, 0, 0, time.Second)
	})

	release(fn)
	require.PanicsWithValue(t, "cpython: Object used after Release", func() {
		live.Call(fn, nil, 0, 0, false, 0)
	})
}

// ArgCache.AppendJSON transcodes a text as AppendJSON does every time; it
// gives the text an id from its second sighting on (a later one when a text
// seen once in between took its first-sight slot) and, once it has one,
// copies its kept encoding, among many texts seen once.
func TestArgCacheJSON(t *testing.T) {
	cache, err := NewArgCache(1 << 20)
	require.NoError(t, err)
	defer cache.Close()
	text := []byte(`{"answer": "72", "answers": ["72", "seventy-two"]}`)
	want, err := AppendJSON(nil, text)
	require.NoError(t, err)
	id, keptAt := int32(-1), 0
	for sighting := 1; sighting <= 6; sighting++ {
		for i := range 200 { // one-off texts between the sightings
			other := []byte(`{"q": "` + strings.Repeat("x", i%7) + string(rune('a'+sighting)) + `", "n": ` + strconv.Itoa(i) + `}`)
			enc, oid, err := cache.AppendJSON([]byte("prefix"), other)
			require.NoError(t, err)
			plain, _ := AppendJSON([]byte("prefix"), other)
			require.Equal(t, plain, enc)
			require.Equal(t, int32(-1), oid, "a text seen once is not kept")
		}
		enc, got, err := cache.AppendJSON([]byte("prefix"), text)
		require.NoError(t, err)
		require.Equal(t, append([]byte("prefix"), want...), enc, "sighting %d", sighting)
		switch {
		case sighting == 1:
			require.Equal(t, int32(-1), got, "first sighting")
		case id >= 0:
			require.Equal(t, id, got, "sighting %d, kept at %d", sighting, keptAt)
		case got >= 0:
			id, keptAt = got, sighting
		}
	}
	require.GreaterOrEqual(t, id, int32(0))
	require.LessOrEqual(t, keptAt, 4, "kept by the fourth sighting")
}

// A kept value keeps its first-sight slot: a new value that lands in the
// same slot does not take it, so the kept one is found at every sighting.
func TestArgCacheKeptSlot(t *testing.T) {
	cache, err := NewArgCache(1 << 20)
	require.NoError(t, err)
	defer cache.Close()
	encode := func(text string) *Encoded {
		members, _, err := SplitObjectEncoding([]byte(`{"v": `+text+`}`), nil, nil, func(string) bool { return true })
		require.NoError(t, err)
		return &members[0].Encoded
	}
	slotOf := func(v *Encoded) uint64 { return (maphash.Bytes(cache.seed, v.b) &^ 1) >> (64 - seenBits) }
	idOf := func(v *Encoded) int32 {
		var args BatchArgs
		args.Offsets = append(args.Offsets, 0)
		cache.AppendEncoded(&args, v)
		args.IDs = append(args.IDs, -1)
		cache.Resolve(&args)
		return args.IDs[0]
	}
	kept := encode(`"72"`)
	require.Equal(t, int32(-1), idOf(kept), "first sighting")
	id := idOf(kept)
	require.GreaterOrEqual(t, id, int32(0), "second sighting")
	var other *Encoded
	for i := 0; other == nil; i++ { // about 65,536 tries
		if v := encode(strconv.Itoa(i)); slotOf(v) == slotOf(kept) {
			other = v
		}
	}
	for range 3 {
		require.Equal(t, int32(-1), idOf(other), "a new value in a kept value's slot")
		require.Equal(t, id, idOf(kept), "the kept value after it")
	}
}

// A value transcoded where it was read (AppendEncoded, Resolve) is kept as
// the same text given as JSON is, under the same id whichever way it comes,
// and is copied as it is; ids land on their own arguments, a batch at once.
func TestArgCacheEncoded(t *testing.T) {
	cache, err := NewArgCache(1 << 20)
	require.NoError(t, err)
	defer cache.Close()
	line := []byte(`{"expected": {"answer": "72", "answers": ["72", "seventy-two"]}}`)
	encodedOf := func(line []byte) *Encoded {
		members, _, err := SplitObjectEncoding(line, nil, nil, func(string) bool { return true })
		require.NoError(t, err)
		return &members[0].Encoded
	}
	want, err := AppendJSON(nil, []byte(`{"answer": "72", "answers": ["72", "seventy-two"]}`))
	require.NoError(t, err)
	id := int32(-1)
	for sighting := 1; sighting <= 6; sighting++ {
		var args BatchArgs
		for i := range 200 { // one-off values around the sighting, in the same batch
			if i == 100 {
				args.Offsets = append(args.Offsets, uint64(len(args.Buf)))
				cache.AppendEncoded(&args, encodedOf(line))
				args.IDs = append(args.IDs, -1)
			}
			other := encodedOf([]byte(`{"v": {"q": "` + strings.Repeat("x", i%7) + string(rune('a'+sighting)) + `", "n": ` + strconv.Itoa(i) + `}}`))
			args.Offsets = append(args.Offsets, uint64(len(args.Buf)))
			cache.AppendEncoded(&args, other)
			args.IDs = append(args.IDs, -1)
		}
		cache.Resolve(&args)
		require.Equal(t, want, args.Buf[args.Offsets[100]:args.Offsets[101]], "sighting %d", sighting)
		for i, oid := range args.IDs {
			if i != 100 {
				require.Equal(t, int32(-1), oid, "a value seen once is not kept")
			}
		}
		got := args.IDs[100]
		switch {
		case sighting == 1:
			require.Equal(t, int32(-1), got, "first sighting")
		case id >= 0:
			require.Equal(t, id, got, "sighting %d", sighting)
		case got >= 0:
			id = got
		}
	}
	require.GreaterOrEqual(t, id, int32(0), "kept")
	// The same value as JSON text is the same cached object.
	var jid int32 = -1
	for range 4 {
		_, jid, err = cache.AppendJSON(nil, []byte(`{"answer": "72", "answers": ["72", "seventy-two"]}`))
		require.NoError(t, err)
	}
	require.Equal(t, id, jid)

	// A case cut back after a failed argument leaves no id pending.
	var args BatchArgs
	cache.AppendEncoded(&args, encodedOf(line))
	args.Offsets, args.IDs = append(args.Offsets, 0), append(args.IDs, -1)
	args.Truncate(0, 0)
	require.NotPanics(t, func() { cache.Resolve(&args) })
	require.Empty(t, args.Buf)
}
