package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A virtualenv made by another CPython: of another major.minor, refused
// before anything is read or written, naming both versions; of another
// patch release (or installation), scored with a warning naming both, on
// stderr and again in the summary.
func TestVenvOfAnotherPython(t *testing.T) {
	python := classesPython(t)
	code, version, _ := skynetOut(t, "version")
	require.Equal(t, exitOK, code)
	own := strings.Fields(strings.SplitN(version, "\nCPython ", 2)[1])[0]
	minor := own[:strings.LastIndex(own, ".")]

	venv := func(version string) string {
		dir := t.TempDir()
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "bin"), 0o755))
		require.NoError(t, os.Symlink(python, filepath.Join(dir, "bin", "python")))
		cfg := "home = " + filepath.Dir(python) + "\ninclude-system-site-packages = false\nversion = " + version + "\n"
		require.NoError(t, os.WriteFile(filepath.Join(dir, "pyvenv.cfg"), []byte(cfg), 0o644))
		return dir
	}
	out := filepath.Join(t.TempDir(), "results.jsonl")
	code, results, errOut, _ := runCLIEnv(t, []string{"VIRTUAL_ENV=" + venv("3.99.0")}, nil,
		"score", "--metric", example+"metric.py", "--data", example+"cases.jsonl", "--out", out)
	assert.Equal(t, exitUsage, code, errOut)
	assert.Empty(t, results)
	assert.Contains(t, errOut, "was made by CPython 3.99.0")
	assert.Contains(t, errOut, "but skynet embeds CPython "+own)
	assert.NoFileExists(t, out, "nothing written")
	code, _, errOut, _ = runCLIEnv(t, []string{"VIRTUAL_ENV=" + venv("3.99.0")}, nil,
		"check", "--metric", example+"metric.py", "--data", example+"cases.jsonl")
	assert.Equal(t, exitUsage, code, errOut)
	assert.Contains(t, errOut, "skynet check: the virtualenv")

	patch := minor + ".99"
	code, results, errOut, _ = runCLIEnv(t, []string{"VIRTUAL_ENV=" + venv(patch)}, nil,
		"score", "--metric", example+"metric.py", "--data", example+"cases.jsonl")
	assert.Equal(t, exitOK, code, errOut)
	assert.Len(t, results, 6, "scored")
	warning := "was made by CPython " + patch + " (" + filepath.Dir(python)
	assert.Equal(t, 1, strings.Count(errOut, warning), "once on stderr, where the summary is too: %s", errOut)
	assert.Contains(t, errOut, "but skynet embeds CPython "+own)
	// With --out the summary goes to stdout, and says it again there.
	code, summary, errOut := skynetEnv(t, []string{"VIRTUAL_ENV=" + venv(patch)},
		"score", "--metric", example+"metric.py", "--data", example+"cases.jsonl", "--out", out)
	assert.Equal(t, exitOK, code, errOut)
	assert.Equal(t, 1, strings.Count(errOut, warning), errOut)
	assert.Contains(t, summary, "warning: the virtualenv")
	assert.Contains(t, summary, warning)
	code, checkOut, errOut := skynetEnv(t, []string{"VIRTUAL_ENV=" + venv(patch)},
		"check", "--metric", example+"metric.py", "--data", example+"cases.jsonl")
	assert.Equal(t, exitOK, code, errOut)
	assert.Contains(t, checkOut, "ok      metric loads")
	assert.Equal(t, 1, strings.Count(errOut, warning), errOut)
}
