package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// poolProgram is a Go program of another module that scores case files
// with package pool: its workers are the program itself, started again.
const poolProgram = `package main

import (
	"context"
	"encoding/json"
	"io"
	"log"
	"os"
	"slices"

	"github.com/skynetml/skynet/caseio"
	"github.com/skynetml/skynet/engine"
	"github.com/skynetml/skynet/pool"
)

func main() {
	metric, data := os.Args[1], os.Args[2]
	p, err := pool.Open(pool.Options{Options: engine.Options{Metric: metric}, Processes: 2})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	f, err := os.Open(data)
	if err != nil {
		log.Fatal(err)
	}
	cr := caseio.NewReader(f)
	var cases []engine.Case
	for {
		c, err := cr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			log.Fatal(err)
		}
		cases = append(cases, c)
	}
	enc := json.NewEncoder(os.Stdout)
	for _, r := range p.ScoreAll(context.Background(), slices.Values(cases), 0) {
		line := map[string]any{"id": r.ID, "score": r.Score, "feedback": r.Feedback, "error": nil}
		if r.Err != nil {
			line["error"] = map[string]any{"kind": r.Err.Kind, "message": r.Err.Message}
		}
		enc.Encode(line)
	}
}
`

// TestGoModulePool builds a program of its own module that links package
// pool (as a user's optimizer would: go mod edit -replace, go build) and
// runs it: a segfaulting metric costs exactly one case a crash result, and
// a metric that times itself out with signal.alarm scores as python3 does.
func TestGoModulePool(t *testing.T) {
	if raceEnabled {
		t.Skip("builds and runs a program; the run without -race covers it")
	}
	python := classesPython(t)
	root, err := filepath.Abs(repoRoot)
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(poolProgram), 0o644))
	for _, line := range []string{"go mod init example.com/poolprogram", "go mod edit -replace github.com/skynetml/skynet=" + root,
		"go mod tidy", "go build -o poolprogram ."} {
		cmd := exec.Command("bash", "-c", line)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s:\n%s", line, out)
	}
	run := func(class, cases string) []resultLine {
		metric, _ := filepath.Abs(classesDir + class + "/metric.py")
		data, _ := filepath.Abs(classesDir + class + "/" + cases)
		cmd := exec.Command(filepath.Join(dir, "poolprogram"), metric, data)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		require.NoError(t, err, stderr.String())
		return jsonLines[resultLine](t, string(out))
	}
	compare := func(class string, want []refLine, got []resultLine, skip string) {
		i := 0
		for _, g := range got {
			if g.ID == skip {
				continue
			}
			require.Less(t, i, len(want), "%s: more results than reference.py's", class)
			w := refOutcome(want[i])
			assert.Equal(t, want[i].ID, g.ID, "%s: result %d", class, i)
			assert.Equal(t, w, outcome{g.Score, g.Feedback, caseError(g.Error)}, "%s case %s", class, g.ID)
			i++
		}
		assert.Equal(t, len(want), i, "%s: results", class)
	}

	got := run("signal_timeout", "cases.jsonl")
	compare("signal_timeout", reference(t, python, classesDir+"signal_timeout/metric.py", classesDir+"signal_timeout/cases.jsonl"), got, "")

	got = run("crash_one", "cases.jsonl")
	crashes := 0
	for _, g := range got {
		if g.Error != nil && g.Error.Kind == "crash" {
			crashes++
			assert.Equal(t, "co07", g.ID)
			assert.Contains(t, g.Error.Message, "SIGSEGV")
		}
	}
	assert.Equal(t, 1, crashes, "exactly one crash result")
	compare("crash_one", reference(t, python, classesDir+"crash_one/metric.py", classesDir+"crash_one/cases_nocrash.jsonl"), got, "co07")
}
