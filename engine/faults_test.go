package engine

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fault is one entry of testdata/faults: its header says what it does and
// what the engine must make of it.
type fault struct {
	file, what, kind, result, process string
}

func readFaults(t *testing.T) []fault {
	files, _ := filepath.Glob("../testdata/faults/*.py")
	require.NotEmpty(t, files)
	var out []fault
	for _, path := range files {
		f := fault{file: filepath.Base(path)}
		fh, err := os.Open(path)
		require.NoError(t, err)
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			line := sc.Text()
			for key, dst := range map[string]*string{"# fault: ": &f.what, "# kind: ": &f.kind, "# result: ": &f.result,
				"# process: ": &f.process} {
				if v, ok := strings.CutPrefix(line, key); ok {
					*dst = v
				}
			}
		}
		fh.Close()
		require.NotEmpty(t, f.what, "%s: no '# fault:' line", path)
		require.NotEmpty(t, f.kind, "%s: no '# kind:' line", path)
		out = append(out, f)
	}
	return out
}

var defaultOutcome = map[string]string{
	"timeout":   "the case gets a timeout result on time (the call is interrupted); the next case runs",
	"exception": "the case gets an exception result (type and message for the optimizer, traceback in the results); the next case runs",
	"contract":  "the case gets a contract result naming the rule and what was found",
}

// TestFaultCatalogue runs every fault and holds the engine to the kind its
// header names; then it checks the table in docs/faults.md still lists
// them all (SKYNET_UPDATE_DOCS=1 rewrites it).
func TestFaultCatalogue(t *testing.T) {
	faults := readFaults(t)
	for _, f := range faults {
		t.Run(f.file, func(t *testing.T) {
			if f.process == "child" {
				t.Skip("needs a process of its own; see the test its result names")
			}
			// Short for the faults that must time out; roomy for the rest, so a
			// loaded machine building a 100 MB string is not a timeout.
			timeout := 5 * time.Second
			if f.kind == "timeout" {
				timeout = 300 * time.Millisecond
			}
			e := open(t, Options{Metric: "../testdata/faults/" + f.file, Timeout: timeout})
			start := time.Now()
			r := e.Score(ctx, Case{ID: "f", Input: map[string]any{}, Output: "fault"})
			took := time.Since(start)
			kind := "ok"
			if r.Err != nil {
				kind = string(r.Err.Kind)
			}
			require.Equal(t, f.kind, kind, "%+v", r.Err)
			switch f.kind {
			case "timeout":
				assert.Less(t, took, 2*time.Second, "timed out on time")
			case "exception":
				assert.NotContains(t, r.Feedback, "Traceback")
				assert.NotEmpty(t, r.Err.Traceback)
			}
			switch f.file {
			case "huge_feedback.py":
				assert.Less(t, len(r.Feedback), 2<<20)
				assert.Contains(t, r.Feedback, "[skynet: truncated, ")
			case "changes_process_state.py":
				wd, err := os.Getwd()
				require.NoError(t, err)
				assert.Equal(t, startCwd, wd, "the working directory is restored before the result")
			case "lone_surrogate.py":
				assert.Equal(t, `bad \udc80 text`, r.Feedback)
			case "huge_int_score.py":
				assert.Equal(t, "case f: metric's return value: score must be a finite number, got an int of 100001 digits (too large for a float)", r.Err.Message)
			case "unserialisable_side_info.py":
				assert.Len(t, r.Warnings, 2)
			case "regex_wedge.py":
				var w Wedge
				ok := false
				for wait := time.Now().Add(2 * time.Second); !ok && time.Now().Before(wait); time.Sleep(20 * time.Millisecond) {
					w, ok = e.Wedged()
				}
				assert.True(t, ok, "the wedge is reported within the interrupt grace")
				assert.Equal(t, "f", w.CaseID)
				assert.True(t, w.HoldsGIL, "C code holds the GIL")
			}
			// The engine keeps serving (a wedge first has to return).
			deadline := time.Now().Add(10 * time.Second)
			next := e.Score(ctx, Case{ID: "n", Input: map[string]any{}, Output: "next"})
			assert.True(t, time.Now().Before(deadline))
			if f.file == "sleeps.py" || f.kind == "ok" {
				assert.Nil(t, next.Err, "%+v", next.Err)
			}
			if f.file == "regex_wedge.py" {
				_, still := e.Wedged()
				// The next case waited for the regex to let go of the GIL.
				for wait := time.Now().Add(30 * time.Second); still && time.Now().Before(wait); time.Sleep(20 * time.Millisecond) {
					_, still = e.Wedged()
				}
				assert.False(t, still, "the wedge clears once the regex returns")
			}
		})
	}

	var table strings.Builder
	table.WriteString("| fault (testdata/faults/) | result kind | what the engine does |\n|---|---|---|\n")
	for _, f := range faults {
		outcome := f.result
		if outcome == "" {
			outcome = defaultOutcome[f.kind]
		}
		fmt.Fprintf(&table, "| %s (`%s`) | %s | %s |\n", f.what, f.file, f.kind, outcome)
	}
	const begin, end = "<!-- faults:begin -->\n", "<!-- faults:end -->"
	const doc = "../docs/faults.md"
	b, err := os.ReadFile(doc)
	require.NoError(t, err)
	s := string(b)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	require.True(t, i >= 0 && j > i, "docs/faults.md has no fault table markers")
	if os.Getenv("SKYNET_UPDATE_DOCS") != "" {
		s = s[:i+len(begin)] + table.String() + s[j:]
		require.NoError(t, os.WriteFile(doc, []byte(s), 0o644))
		return
	}
	assert.Equal(t, table.String(), s[i+len(begin):j], "the fault table in docs/faults.md is stale: run SKYNET_UPDATE_DOCS=1 go test -run TestFaultCatalogue ./engine")
}
