package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// resumeResults prepares a results file for --resume: it keeps every whole
// line that is a finished result, drops cancelled ones (an interrupted run
// writes those for the cases it stopped) and a torn last line, rewrites the
// file with what it kept and returns the ids already done.
func resumeResults(path string) (map[string]bool, error) {
	done := map[string]bool{}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return done, nil
	}
	if err != nil {
		return nil, err
	}
	var kept bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<30)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		var r struct {
			ID    *string `json:"id"`
			Error *struct {
				Kind string `json:"kind"`
			} `json:"error"`
		}
		if json.Unmarshal(line, &r) != nil || r.ID == nil {
			continue // a torn line from a crash: the case runs again
		}
		if r.Error != nil && r.Error.Kind == "canceled" {
			continue
		}
		if done[*r.ID] {
			return nil, fmt.Errorf("%s:%d: case id %q appears twice; --resume needs unique ids", path, n, *r.ID)
		}
		done[*r.ID] = true
		kept.Write(line)
		kept.WriteByte('\n')
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".skynet-resume-*")
	if err != nil {
		return nil, err
	}
	if _, err := io.Copy(tmp, &kept); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return nil, err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return nil, err
	}
	return done, os.Rename(tmp.Name(), path)
}
