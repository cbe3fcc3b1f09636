// Package stderrtail keeps the end of a child process's stderr, whole lines
// at a time, for the errors that say why the child failed: the pool's
// worker processes and the Python baselines of skynet bench.
package stderrtail

import (
	"bufio"
	"bytes"
	"io"
	"regexp"
	"strings"
	"sync"
)

// DefaultLines is how many lines a Tail keeps when its Max is 0.
const DefaultLines = 8

const (
	// lineWidth is the most of a line kept: a line is one part of a message.
	lineWidth = 300
	// pieceSize is the longest piece of a line taken at once; a longer
	// line comes in several pieces, each kept as a line.
	pieceSize = 1 << 16
)

// Tail keeps the last lines written to it, blank lines left out. A Go crash
// report (the runtime's answer to a signal in C code) is not kept: its
// first line names the signal, which is. Safe for concurrent use; the zero
// value keeps DefaultLines lines.
type Tail struct {
	Max int // lines kept; 0: DefaultLines

	mu      sync.Mutex
	lines   []string
	dropped bool   // lines came before the kept ones
	partial []byte // Write's line so far
	signal  string
	dump    bool
	first   string // the crash report's first line
	head    string // the first line of all
}

var goCrash = regexp.MustCompile(`^(?:(SIG[A-Z0-9]+): |fatal error: |\[signal (SIG[A-Z0-9]+)|runtime: |panic: )`)

// Copy forwards r to w, whole lines at a time, keeping the end of it; a Go
// crash report is kept out of w too.
func (t *Tail) Copy(w io.Writer, r io.Reader) {
	br := bufio.NewReaderSize(r, pieceSize)
	for {
		line, err := br.ReadSlice('\n')
		wrote := len(line) > 0 && t.add(w, line)
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			if wrote && line[len(line)-1] != '\n' {
				// Its last output lacked a newline: end the line, so that
				// what is written to w next starts one.
				w.Write([]byte{'\n'})
			}
			return
		}
	}
}

// Write keeps the end of p without forwarding it: a Tail is then a
// command's Stderr. A line not ended yet counts in Lines.
func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		piece := p
		if i := bytes.IndexByte(p, '\n'); i >= 0 {
			piece = p[:i+1]
		}
		p = p[len(piece):]
		t.partial = append(t.partial, piece...)
		if piece[len(piece)-1] == '\n' || len(t.partial) >= pieceSize {
			t.addLocked(io.Discard, t.partial)
			t.partial = t.partial[:0]
		}
	}
	return n, nil
}

// add forwards line and keeps it; false when it was not forwarded (a Go
// crash report).
func (t *Tail) add(w io.Writer, line []byte) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.addLocked(w, line)
}

func (t *Tail) addLocked(w io.Writer, line []byte) bool {
	if m := goCrash.FindSubmatch(line); m != nil && !t.dump {
		t.dump = true
		t.first = strings.TrimSpace(string(line[:min(len(line), 200)]))
		if n := string(m[1]) + string(m[2]); n != "" {
			t.signal = n
		}
	}
	if t.dump {
		if t.signal == "" {
			if m := goCrash.FindSubmatch(line); m != nil {
				t.signal = string(m[1]) + string(m[2])
			}
		}
		return false
	}
	if t.head == "" {
		t.head = strings.TrimSpace(string(line[:min(len(line), 200)]))
	}
	w.Write(line)
	t.keep(line)
	return true
}

// keep adds line to the kept ones, dropping the oldest past Max.
func (t *Tail) keep(line []byte) {
	if text, ok := lineText(line); ok {
		t.lines, t.dropped = keepLine(t.lines, text, t.Max, t.dropped)
	}
}

// lineText is what is kept of line; false for a blank one.
func lineText(line []byte) (string, bool) {
	text := strings.TrimRight(string(line[:min(len(line), lineWidth)]), "\r\n")
	return text, strings.TrimSpace(text) != ""
}

// keepLine appends text to lines, the oldest dropped past most lines.
func keepLine(lines []string, text string, most int, dropped bool) ([]string, bool) {
	if most <= 0 {
		most = DefaultLines
	}
	if len(lines) == most {
		copy(lines, lines[1:])
		lines, dropped = lines[:most-1], true
	}
	return append(lines, text), dropped
}

// Lines are the kept lines, oldest first, and whether lines came before
// them.
func (t *Tail) Lines() (lines []string, dropped bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines, dropped = append([]string(nil), t.lines...), t.dropped
	if text, ok := lineText(t.partial); ok && !t.dump {
		// A line not ended yet: what the child wrote last, before it hung
		// or was killed.
		lines, dropped = keepLine(lines, text, t.Max, dropped)
	}
	return lines, dropped
}

// LastOutput is the last lines kept, at most three, on one line.
func (t *Tail) LastOutput() string {
	lines, _ := t.Lines()
	return strings.Join(lines[max(0, len(lines)-3):], " | ")
}

// Signal is the signal a Go crash report named, or "".
func (t *Tail) Signal() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.signal
}

// CrashLine is the first line of a Go crash report, or "".
func (t *Tail) CrashLine() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.first
}

// Head is the first line written, or "".
func (t *Tail) Head() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.head
}
