package main

// What made a results file: the metric (and, for eval, the program and the
// artifact) by the SHA-256 of their bytes, kept beside the results as
// OUT.meta.json, so that --resume does not put two metrics' scores under one
// mean, and merge does not join parts of two.

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"
)

// metaSuffix names a results file's record of what made it: OUT + metaSuffix.
const metaSuffix = ".meta.json"

// madeFile is one file a run's scores depend on.
type madeFile struct {
	Role   string `json:"role"` // "metric", "program" or "artifact"
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
}

// runIdentity is what made a results file.
type runIdentity struct {
	Skynet  string     `json:"skynet"`
	Command string     `json:"command"`
	Started string     `json:"started"`
	Files   []madeFile `json:"files"`
	// Mixed lists the earlier identities whose results the file also
	// holds (a --resume with --allow-mixed).
	Mixed []runIdentity `json:"mixed,omitempty"`
}

// identityOf hashes the files (role, path pairs) a run of cmd depends on.
func identityOf(cmd string, pairs ...string) (runIdentity, error) {
	id := runIdentity{Skynet: versionLine(), Command: cmd, Started: time.Now().UTC().Format(time.RFC3339)}
	for i := 0; i+1 < len(pairs); i += 2 {
		b, err := os.ReadFile(pairs[i+1])
		if err != nil {
			return id, fmt.Errorf("--%s: %w", pairs[i], err)
		}
		sum := sha256.Sum256(b)
		id.Files = append(id.Files, madeFile{Role: pairs[i], Path: pairs[i+1], SHA256: hex.EncodeToString(sum[:])})
	}
	return id, nil
}

// same says a and b hold the same files, by content (a path may change).
func (a runIdentity) same(b runIdentity) bool {
	if len(a.Files) != len(b.Files) {
		return false
	}
	for i := range a.Files {
		if a.Files[i].Role != b.Files[i].Role || a.Files[i].SHA256 != b.Files[i].SHA256 {
			return false
		}
	}
	return true
}

// String names the files by path and short hash: "metric m.py (sha256 1a2b3c4d5e6f)".
func (a runIdentity) String() string {
	parts := make([]string, len(a.Files))
	for i, f := range a.Files {
		parts[i] = fmt.Sprintf("%s %s (sha256 %.12s)", f.Role, f.Path, f.SHA256)
	}
	return strings.Join(parts, ", ")
}

// readIdentity reads what made the results file out; ok is false when
// nothing says (no OUT.meta.json: a file of an older skynet, or not ours).
func readIdentity(out string) (id runIdentity, ok bool, err error) {
	b, err := os.ReadFile(out + metaSuffix)
	if errors.Is(err, fs.ErrNotExist) {
		return id, false, nil
	}
	if err == nil {
		err = json.Unmarshal(b, &id)
	}
	if err != nil {
		return id, false, fmt.Errorf("%s%s: %w", out, metaSuffix, err)
	}
	return id, true, nil
}

// writeIdentity records id beside the results file out, whole or not at all.
func writeIdentity(out string, id runIdentity) error {
	b, err := json.MarshalIndent(id, "", "  ")
	if err != nil {
		return err
	}
	return replaceFile(out+metaSuffix, func(w io.Writer) error {
		_, err := w.Write(append(b, '\n'))
		return err
	})
}

// changedMessage says that --resume would mix two runs' results.
func changedMessage(out string, was, now runIdentity) string {
	return fmt.Sprintf("--resume: %s was made by %s (skynet %s, %s); this run's is %s: resuming would put two metrics' scores under one mean. Write to another --out, delete %s (and %s%s) to start over, or pass --allow-mixed to keep both",
		out, was, was.Command, was.Started, now, out, out, metaSuffix)
}

// outputFlags are where score and eval write results and their summary,
// and how they resume.
type outputFlags struct {
	out                *string
	resume, retry, mix *bool
	summaryJSON        *string
	cluster            *string
}

func addOutputFlags(fs *flag.FlagSet, verb string) outputFlags {
	return outputFlags{
		out:         fs.String("out", "", "results file (JSONL); default standard output. OUT"+metaSuffix+" records what made it"),
		resume:      fs.Bool("resume", false, "continue an interrupted run: keep --out's finished results and "+verb+" only the rest"),
		retry:       fs.Bool("retry-failed", false, "with --resume: also "+verb+" again the cases whose result is an error (exception, timeout, crash...); input errors are always read again"),
		mix:         fs.Bool("allow-mixed", false, "with --resume: keep results made by another metric (or program, artifact) than this run's"),
		summaryJSON: fs.String("summary-json", "", "also write the summary as JSON to this file (counts, mean with its standard error and 95% interval, named scores, histogram, errors, call times)"),
		cluster:     fs.String("cluster", "", "cluster the mean's standard error by this field of each case's input (questions of one passage, say)"),
	}
}
