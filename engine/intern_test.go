package engine

import (
	"fmt"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// The intern table must give back each text exactly, share a repeated one,
// and keep texts apart that its cheap hash sees only partly: same length,
// same first and last bytes.
func TestInternTable(t *testing.T) {
	tab := newInternTable()
	first := tab.make([]byte("Correct."))
	again := tab.make([]byte("Correct."))
	require.Equal(t, "Correct.", again)
	require.Equal(t, unsafe.StringData(first), unsafe.StringData(again), "a repeated text is shared")

	for round := 0; round < 2; round++ {
		for _, label := range []string{"aaa", "bbb", "ccc", "abc"} {
			want := fmt.Sprintf("Expected %q, got 'other'.", label)
			require.Equal(t, want, tab.make([]byte(want)))
		}
	}
	for _, s := range []string{"", "a", "ab", "abcdefg", "abcdefgh", "abcdefghi"} {
		require.Equal(t, s, tab.make([]byte(s)))
	}
	long := make([]byte, internMax+1)
	require.Equal(t, string(long), tab.make(long))
}
