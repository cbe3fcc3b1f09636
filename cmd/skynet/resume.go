package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/skynetml/skynet/caseio"

	"github.com/skynetml/skynet/engine"
)

// resumeResults prepares a results file for --resume: it keeps every whole
// line that is a finished result, drops cancelled ones (an interrupted run
// writes those for the cases it stopped), a torn last line, the results of
// lines that were not cases (an input error: the line is read again, and
// scored if it is now fixed) and, with retryFailed, every other failed
// result (exception, timeout, crash, contract). It returns the ids already
// done, the kept results' scores, so the summary can give the mean of the
// whole file, the order of the file for putting it in input order at the
// end (resumeOrder), and rewrite, which writes the file anew with what it
// kept (a temporary file renamed over it, so a kill loses nothing): called
// once the run is not refused (another dataset's results), so a refused
// run leaves the file as it was.
func resumeResults(path string, retryFailed bool) (done map[string]bool, kept mean, order *resumeOrder, rewrite func() error, err error) {
	done = map[string]bool{}
	order = &resumeOrder{path: path, at: map[string]int{}, dropped: map[engine.ErrorKind]int{}}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return done, kept, order, nil, nil
	}
	if err != nil {
		return nil, kept, nil, nil, err
	}
	var keptLines bytes.Buffer
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<30)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		id, t, _, ok := parseResult(line)
		if !ok {
			continue // a torn line from a crash: the case runs again
		}
		if t.kind == engine.KindCanceled {
			continue
		}
		if t.kind == engine.KindInput {
			// Read again: the line may be fixed now. A repeated id's line
			// has one too, with the id of the line it repeats.
			order.dropped[t.kind]++
			continue
		}
		if seen[id] {
			return nil, kept, nil, nil, fmt.Errorf("%s:%d: case id %q appears twice; --resume needs unique ids", path, n, id)
		}
		seen[id] = true
		if retryFailed && t.kind != "" {
			order.dropped[t.kind]++
			continue
		}
		done[id] = true
		order.keptIDs = append(order.keptIDs, id)
		if t.kind == "" {
			order.scored++
		}
		kept.sum += t.score
		kept.n++
		keptLines.Write(line)
		keptLines.WriteByte('\n')
	}
	if err := sc.Err(); err != nil {
		return nil, kept, nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return done, kept, order, func() error {
		return replaceFile(path, func(w io.Writer) error {
			_, err := io.Copy(w, &keptLines)
			return err
		})
	}, nil
}

// replaceFile writes path anew through a temporary file beside it, synced
// and renamed over it: a kill at any moment leaves the old file or the new
// one, whole.
func replaceFile(path string, write func(io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".skynet-resume-*")
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(tmp, 1<<16)
	err = write(bw)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		mode := os.FileMode(0o644) // CreateTemp's 0600 would hide the results from others
		if st, serr := os.Stat(path); serr == nil {
			mode = st.Mode().Perm()
		}
		os.Chmod(tmp.Name(), mode)
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// resumeOrder puts a resumed results file in input order at the end of
// the run, as if the run had never stopped. During the run the file is the
// kept results (in the order they were in) followed by the new ones,
// appended as they come (in input order among themselves), so a kill
// loses nothing; at the end it is rewritten in input order by replaceFile.
// A kept result's place is learned as the input passes its case; one the
// input never reached (an interrupted run, an id the input lacks) goes
// after the rest, in the order it had.
type resumeOrder struct {
	path    string
	keptIDs []string                 // the kept results' ids: the file's first lines
	scored  int                      // how many kept results have a score (no error)
	dropped map[engine.ErrorKind]int // results dropped to be scored again, by error kind

	mu      sync.Mutex
	at      map[string]int // a kept case's place in the input (line or row)
	written []int          // each new result's place in the input, in the order written
}

// keptAt records where in the input a kept result's case is.
func (o *resumeOrder) keptAt(id string, pos int) {
	o.mu.Lock()
	o.at[id] = pos
	o.mu.Unlock()
}

// wrote records the place in the input of the result written next.
func (o *resumeOrder) wrote(pos int) { o.written = append(o.written, pos) }

// droppedLine says what was dropped to be scored again, or "".
func (o *resumeOrder) droppedLine() string {
	if o == nil || len(o.dropped) == 0 {
		return ""
	}
	total, kinds := byKind(o.dropped)
	return fmt.Sprintf("resumed: %d failed result(s) dropped, to score their cases again (%s)", total, kinds)
}

// byKind is the total of counts by error kind and each kind's count,
// "exception 2, timeout 1", in order of kind.
func byKind(counts map[engine.ErrorKind]int) (total int, kinds string) {
	list := make([]string, 0, len(counts))
	for k, n := range counts {
		total += n
		list = append(list, fmt.Sprintf("%s %d", k, n))
	}
	slices.Sort(list)
	return total, strings.Join(list, ", ")
}

// finish rewrites the results file in input order, unless it already is.
func (o *resumeOrder) finish() error {
	f, err := os.Open(o.path)
	if err != nil {
		return err
	}
	defer f.Close()
	type span struct{ at, n int64 }
	var lines []span
	r := bufio.NewReaderSize(f, 1<<16)
	var off int64
	for {
		n, err := lineLength(r)
		if n > 0 {
			lines = append(lines, span{off, n})
			off += n
		}
		if err == io.EOF {
			if n > 0 {
				return fmt.Errorf("%s does not end with a newline: left as it is", o.path)
			}
			break
		}
		if err != nil {
			return err
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(lines) != len(o.keptIDs)+len(o.written) {
		return fmt.Errorf("%s holds %d line(s), not the %d kept and written: left as it is", o.path, len(lines), len(o.keptIDs)+len(o.written))
	}
	pos := make([]int, 0, len(lines))
	for _, id := range o.keptIDs {
		p, ok := o.at[id]
		if !ok {
			p = math.MaxInt
		}
		pos = append(pos, p)
	}
	pos = append(pos, o.written...)
	idx := make([]int, len(lines))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return pos[idx[a]] < pos[idx[b]] })
	inOrder := true
	for i, j := range idx {
		inOrder = inOrder && i == j
	}
	if inOrder {
		return nil
	}
	return replaceFile(o.path, func(w io.Writer) error {
		for _, i := range idx {
			if _, err := io.Copy(w, io.NewSectionReader(f, lines[i].at, lines[i].n)); err != nil {
				return err
			}
		}
		return nil
	})
}

// lineLength reads past one line and returns its length, newline included.
func lineLength(r *bufio.Reader) (int64, error) {
	var n int64
	for {
		b, err := r.ReadSlice('\n')
		n += int64(len(b))
		if err != bufio.ErrBufferFull {
			return n, err
		}
	}
}

// foreignID returns an id of done that the data does not have (has is
// false): a results file from another dataset.
func foreignID(done map[string]bool, has func(id string) bool) (string, bool) {
	for id := range done {
		if !has(id) {
			return id, true
		}
	}
	return "", false
}

func foreignMessage(out, data, id string) string {
	return fmt.Sprintf("%s has a result for case %q, which is not in %s: is it the results of another dataset? (use another --out, or delete it to start over)", out, id, data)
}

// fileIDs is the set of a case file's ids, as a run names its cases' results
// (caseio.LineID), for --resume's check; nil when it cannot be read.
func fileIDs(path string, maxLine int) map[string]bool {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	ids := map[string]bool{}
	cr := caseio.NewReader(f)
	cr.MaxLineBytes = maxLine
	for {
		line, err := cr.NextLine()
		if err == io.EOF {
			return ids
		}
		le, bad := err.(*caseio.LineError)
		if err != nil && !bad {
			return nil
		}
		var lineErr error
		if bad {
			lineErr = le
		}
		ids[caseio.LineID(line, cr.Line(), lineErr)] = true
	}
}
