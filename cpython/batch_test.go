package cpython

import (
	"testing"

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
		for i := range calls {
			v := b.Slot(i)
			require.True(t, v.OK, "run %d case %d: %s", run, i, v.Data)
			p, ok, err := DecodeScorePair(v.Data, nil)
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, want[i], p.Feedback, "run %d case %d", run, i)
			require.Equal(t, float64(i+1), p.Score)
		}
		b.Free()
	}
}
