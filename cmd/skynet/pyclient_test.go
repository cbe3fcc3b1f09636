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

const pycDir = "../../clients/python"

// pycRun runs the client's unittest file with python against s and returns
// its output; it fails the test with that output when unittest fails.
func pycRun(t *testing.T, python string, s *serveProc, token string) string {
	cmd := exec.Command(python, "-m", "unittest", "-v", "test_skynet_client")
	cmd.Dir = pycDir
	cmd.Env = append(os.Environ(), "SKYNET_URL="+s.url, "SKYNET_TOKEN="+token, "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s -m unittest test_skynet_client (clients/python) against %s failed:\n%s\n--- skynet serve's stderr:\n%s", python, s.url, out, s.stderr())
	return string(out)
}

// TestPythonClient runs clients/python/test_skynet_client.py (the
// stdlib-only Python client, its DSPy/GEPA adapters on stand-ins, and its
// stand-in server tests) against a real skynet serve with a bearer token,
// on the python of the CPython skynet embeds, and also on a python3.9 when
// one on PATH runs (the client's oldest supported version).
func TestPythonClient(t *testing.T) {
	if testing.Short() {
		t.Skip("starts skynet serve and runs the Python client's tests")
	}
	python := classesPython(t)
	dir := t.TempDir()
	src, err := os.ReadFile(filepath.Join(pycDir, "testdata", "metric.py"))
	require.NoError(t, err)
	metric := writeFile(t, dir, "metric.py", string(src))
	const token = "pyclient-test-token"
	s := startServe(t, "--metric", metric, "--processes", "2", "--token", token)

	out := pycRun(t, python, s, token)
	assert.Regexp(t, `(?m)^test_score_results_in_order \(test_skynet_client\.RealServerTest`, out)
	assert.NotContains(t, out, "skipped 'set SKYNET_URL", "the real-server tests ran")
	assert.Regexp(t, `(?m)^OK`, out)

	// Python 3.9, the client's oldest: SKYNET_CLIENT_PYTHONS (paths, space
	// separated), else a python3.9 on PATH that runs (a pyenv shim may not).
	extra := strings.Fields(os.Getenv("SKYNET_CLIENT_PYTHONS"))
	if len(extra) == 0 {
		if py39, err := exec.LookPath("python3.9"); err == nil && exec.Command(py39, "-c", "pass").Run() == nil {
			extra = append(extra, py39)
		}
	}
	for _, py := range extra {
		assert.Regexp(t, `(?m)^OK`, pycRun(t, py, s, token), py)
	}
	if len(extra) == 0 {
		t.Log("no python3.9 (SKYNET_CLIENT_PYTHONS, or on PATH): the client ran on " + python + " only; test_python39_syntax parses it as 3.9")
	}
}
