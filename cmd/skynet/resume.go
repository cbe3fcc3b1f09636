package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"maps"
	"os"
	"path/filepath"

	"github.com/skynetml/skynet/engine"
)

// resumeResults prepares a results file for --resume: it keeps every whole
// line that is a finished result, drops cancelled ones (an interrupted run
// writes those for the cases it stopped) and a torn last line, rewrites the
// file with what it kept and returns the ids already done, and the kept
// results' scores, so the summary can give the mean of the whole file.
func resumeResults(path string) (map[string]bool, mean, error) {
	done := map[string]bool{}
	var kept mean
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return done, kept, nil
	}
	if err != nil {
		return nil, kept, err
	}
	var keptLines bytes.Buffer
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
		if done[id] {
			return nil, kept, fmt.Errorf("%s:%d: case id %q appears twice; --resume needs unique ids", path, n, id)
		}
		done[id] = true
		kept.sum += t.score
		kept.n++
		keptLines.Write(line)
		keptLines.WriteByte('\n')
	}
	if err := sc.Err(); err != nil {
		return nil, kept, fmt.Errorf("%s: %w", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".skynet-resume-*")
	if err != nil {
		return nil, kept, err
	}
	if _, err := io.Copy(tmp, &keptLines); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return nil, kept, err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return nil, kept, err
	}
	return done, kept, os.Rename(tmp.Name(), path)
}

// foreignID returns an id of done that is not among the data's ids: a
// results file from another dataset.
func foreignID(done map[string]bool, ids iter.Seq[string]) (string, bool) {
	if len(done) == 0 {
		return "", false
	}
	left := maps.Clone(done)
	for id := range ids {
		delete(left, id)
	}
	for id := range left {
		return id, true
	}
	return "", false
}

func foreignMessage(out, data, id string) string {
	return fmt.Sprintf("%s has a result for case %q, which is not in %s: is it the results of another dataset? (use another --out, or delete it to start over)", out, id, data)
}

// fileIDs reads the ids of a case file (for --resume's check); bad lines
// have the ids a run gives them.
func fileIDs(path string, maxLine int) iter.Seq[string] {
	return func(yield func(string) bool) {
		f, err := os.Open(path)
		if err != nil {
			return
		}
		defer f.Close()
		cr := engine.NewCaseReader(f)
		cr.MaxLineBytes = maxLine
		for {
			c, err := cr.Next()
			if err == io.EOF {
				return
			}
			var le *engine.LineError
			if err != nil && !errors.As(err, &le) {
				return
			}
			if !yield(c.ID) {
				return
			}
		}
	}
}
