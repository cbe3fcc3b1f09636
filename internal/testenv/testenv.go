// Package testenv finds, for tests, what comes from outside the
// repository: the pinned Python test venv that runs the peers' own code
// (DSPy, GEPA, Math-Verify; build/pyvenv.sh, build/python-test.lock).
package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// VenvVar names the venv; make test sets it (to bin/pyvenv) for its first
// go test pass, so that the -race and ASan passes skip these tests.
const VenvVar = "SKYNET_TEST_VENV"

// Venv returns the pinned test venv. Without VenvVar the test skips, saying
// how to run it; a venv named but broken fails it. When version is not
// empty, the venv's python must be that CPython version ("3.11.2"): its
// packages are imported by the CPython skynet embeds.
func Venv(t testing.TB, version string) string {
	t.Helper()
	venv := os.Getenv(VenvVar)
	if venv == "" {
		t.Skipf("%s is not set: make test sets it to the pinned venv (make pyvenv; build/pyvenv.sh)", VenvVar)
	}
	python := filepath.Join(venv, "bin", "python")
	out, err := exec.Command(python, "-c", `import platform; print(platform.python_version())`).CombinedOutput()
	if err != nil {
		t.Fatalf("%s=%s: its python does not run: %v: %s (make pyvenv makes it again)", VenvVar, venv, err, out)
	}
	if got := strings.TrimSpace(string(out)); version != "" && got != version {
		t.Fatalf("%s=%s is a venv of CPython %s, but the one under test is %s: make pyvenv with the same PYTHON", VenvVar, venv, got, version)
	}
	return venv
}
