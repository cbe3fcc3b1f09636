package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The progress bar draws the last result whatever the clock says, and
// otherwise at most every 100 ms (and the first time it reads the clock).
func TestProgress(t *testing.T) {
	var buf bytes.Buffer
	p := &progress{w: &buf, total: 1000}
	for n := 1; n <= 1000; n++ {
		p.step(n)
	}
	p.done()
	out := buf.String()
	assert.Contains(t, out, "] 1000/1000 ")
	assert.LessOrEqual(t, strings.Count(out, "\r"), 2, "a fast run draws the bar at its start and end: %q", out)
	assert.True(t, strings.HasSuffix(out, "\n"))
}
