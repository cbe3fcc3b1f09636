package engine

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/skynetml/skynet/cpython"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sys.executable is the interpreter's own python, not the metric: code that
// starts Python (subprocess with sys.executable, multiprocessing's spawn)
// runs the embedded CPython's version. sys.argv is CPython's embedded
// default, [""]: no script is running.
func TestSysExecutableIsThePython(t *testing.T) {
	metric := writeMetric(t, `
import json, multiprocessing, subprocess, sys
def score(input, output, expected=None):
    child = subprocess.run([sys.executable, "-c", "import sys; print(list(sys.version_info[:2]))"],
                           capture_output=True, text=True)
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        spawned = pool.map(abs, [-1, -2, 3])
    return 1.0, {"feedback": json.dumps({
        "executable": sys.executable, "argv": sys.argv, "version": list(sys.version_info[:2]),
        "child": child.stdout.strip(), "child_stderr": child.stderr, "child_rc": child.returncode,
        "spawned": spawned})}
`)
	e := open(t, Options{Metric: metric})
	r := e.Score(ctx, Case{ID: "1", Input: map[string]any{}})
	require.Nil(t, r.Err, "%+v", r.Err)
	var got struct {
		Executable  string   `json:"executable"`
		Argv        []string `json:"argv"`
		Version     []int    `json:"version"`
		Child       string   `json:"child"`
		ChildStderr string   `json:"child_stderr"`
		ChildRC     int      `json:"child_rc"`
		Spawned     []int    `json:"spawned"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.Feedback), &got), r.Feedback)
	var version []int
	require.NoError(t, json.Unmarshal([]byte(got.Child), &version), "the child's output: %q, stderr: %s", got.Child, got.ChildStderr)
	assert.Equal(t, 0, got.ChildRC, got.ChildStderr)
	assert.Equal(t, got.Version, version, "subprocess with sys.executable runs the embedded CPython's version")
	require.Len(t, got.Version, 2)
	assert.Equal(t, cpython.PythonVersion(), fmt.Sprintf("%d.%d", got.Version[0], got.Version[1]))
	st, err := os.Stat(got.Executable)
	require.NoError(t, err, "sys.executable %q exists", got.Executable)
	assert.True(t, st.Mode().IsRegular() && st.Mode()&0o111 != 0, "sys.executable %q is an executable file", got.Executable)
	assert.NotEqual(t, metric, got.Executable)
	assert.Equal(t, []string{""}, got.Argv, "sys.argv is CPython's embedded default, not the metric")
	assert.Equal(t, []int{1, 2, 3}, got.Spawned, "a spawn-context Pool(1) works")
}
