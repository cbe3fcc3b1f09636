package cpython

import (
	"math/big"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An int longer than str() converts (sys.get_int_max_str_digits()) crosses
// as its sign and size; what str() can convert still crosses as digits.
func TestHugeIntsCrossAsTheirSize(t *testing.T) {
	withThread(t, func(th *GIL) {
		f := module(t, th, "f", `
import sys
class Sly(int):
    def bit_length(self): raise RuntimeError("user code ran")
    def __lt__(self, other): raise RuntimeError("user code ran")
    def __abs__(self): raise RuntimeError("user code ran")
def f(which):
    if which == "limit":
        return 10**sys.get_int_max_str_digits() - 1
    return {
        "huge": 10**100000,
        "negative": -(10**100000 - 1),
        "subclass": Sly(-10**9999),
        "inside": [1, {"k": 10**5000}, "after"],
    }[which]
`)
		defer th.Release(f)
		v, err := th.CallValue(f, "huge")
		require.NoError(t, err)
		assert.Equal(t, HugeInt{Digits: 100001}, v)
		assert.Equal(t, "an int of 100001 digits", v.(HugeInt).String())
		v, err = th.CallValue(f, "negative")
		require.NoError(t, err)
		assert.Equal(t, HugeInt{Negative: true, Digits: 100000}, v)
		assert.Equal(t, "a negative int of 100000 digits", v.(HugeInt).String())
		v, err = th.CallValue(f, "subclass")
		require.NoError(t, err, "only int's own code sizes it")
		assert.Equal(t, HugeInt{Negative: true, Digits: 10000}, v)
		v, err = th.CallValue(f, "inside")
		require.NoError(t, err)
		require.Len(t, v, 3)
		assert.Equal(t, HugeInt{Digits: 5001}, v.([]any)[1].(*Dict).Values[0])
		assert.Equal(t, "after", v.([]any)[2], "the values after it decode")

		v, err = th.CallValue(f, "limit")
		require.NoError(t, err)
		n, ok := v.(*big.Int)
		require.True(t, ok, "an int str() converts crosses as its digits: %T", v)
		assert.Len(t, n.String(), 4300)
	})
}

func TestHugeIntDecode(t *testing.T) {
	v, err := Decode([]byte{'H', 3, 0x80, 0x01})
	require.NoError(t, err)
	assert.Equal(t, HugeInt{Negative: true, about: true, Digits: 128}, v)
	assert.Equal(t, "a negative int of about 128 digits", v.(HugeInt).String())
	for _, b := range [][]byte{{'H'}, {'H', 0}, {'H', 4, 1}, {'H', 0, 0x80}} {
		_, err := Decode(b)
		assert.Error(t, err, "%q", b)
	}
	var e Encoder
	assert.EqualError(t, e.Value(HugeInt{Digits: 5000}), "cannot pass an int of 5000 digits back into Python")
}
