package stderrtail

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Copy forwards every line but a Go crash report, and keeps the last lines.
func TestCopy(t *testing.T) {
	var out bytes.Buffer
	tail := &Tail{}
	in := "loading\n\nline 1\nline 2\nline 3\nlast, no newline"
	tail.Copy(&out, strings.NewReader(in))
	assert.Equal(t, in+"\n", out.String(), "forwarded whole, the last line ended")
	assert.Equal(t, "line 2 | line 3 | last, no newline", tail.LastOutput())
	assert.Equal(t, "loading", tail.Head())

	out.Reset()
	tail = &Tail{}
	tail.Copy(&out, strings.NewReader("before\nSIGSEGV: segmentation violation\ngoroutine 1 [running]:\n"))
	assert.Equal(t, "before\n", out.String(), "the crash report is not forwarded")
	assert.Equal(t, "SIGSEGV", tail.Signal())
	assert.Equal(t, "SIGSEGV: segmentation violation", tail.CrashLine())
	assert.Equal(t, "before", tail.LastOutput())
}

// Write keeps lines that come in any pieces, the line not ended yet among
// them, and says when earlier lines were dropped.
func TestWrite(t *testing.T) {
	tail := &Tail{Max: 3}
	for _, p := range []string{"Trace", "back:\n  one\n", "\n  two\nErr", "or: it hung"} {
		n, err := tail.Write([]byte(p))
		assert.NoError(t, err)
		assert.Equal(t, len(p), n)
	}
	lines, dropped := tail.Lines()
	assert.Equal(t, []string{"  one", "  two", "Error: it hung"}, lines)
	assert.True(t, dropped)

	tail.Write([]byte("!\n"))
	lines, _ = tail.Lines()
	assert.Equal(t, []string{"  one", "  two", "Error: it hung!"}, lines, "the line ended is kept once")

	tail = &Tail{}
	tail.Write([]byte("just this\n"))
	lines, dropped = tail.Lines()
	assert.Equal(t, []string{"just this"}, lines)
	assert.False(t, dropped)
}
