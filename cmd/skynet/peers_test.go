package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// peerEnv is the environment the Python peers run in: no network fetch of
// litellm's price map at DSPy's import, DSPy's cache in the test's folder,
// no bytecode written into the checkout.
func peerEnv(t *testing.T, extra ...string) []string {
	env := append(os.Environ(), extra...)
	return append(env, "LITELLM_LOCAL_MODEL_COST_MAP=True", "DSPY_CACHEDIR="+t.TempDir(), "PYTHONDONTWRITEBYTECODE=1")
}

// TestPythonPeers runs clients/python/test_peers.py on the pinned venv's
// python (the real DSPy and GEPA from build/python-test.lock, and the
// quoted reward callers of OpenRLHF, verl and TRL) against a skynet serve
// with no token, as OpenRLHF calls it; the file compares what the peers
// got with skynet score on the same cases.
func TestPythonPeers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts skynet serve and runs the peers' own code")
	}
	python := classesPython(t)
	venv := testVenv(t, python)
	metric, err := filepath.Abs(filepath.Join(pycDir, "testdata", "metric.py"))
	require.NoError(t, err)
	s := startServe(t, "--metric", metric, "--processes", "2")
	cmd := exec.Command(filepath.Join(venv, "bin", "python"), "-m", "unittest", "-v", "test_peers")
	cmd.Dir = pycDir
	cmd.Env = peerEnv(t, "SKYNET_URL="+s.url, "SKYNET_BIN="+skynetBin(t), "SKYNET_METRIC="+metric)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "test_peers.py (clients/python) against %s failed:\n%s\n--- skynet serve's stderr:\n%s", s.url, out, s.stderr())
	assert.NotContains(t, string(out), "skipped", "every peer test ran")
	for _, name := range []string{"DSPyTest", "GEPATest", "OpenRLHFTest", "VerlTest", "TRLTest", "ClientFixesTest"} {
		assert.Regexp(t, `(?m)^test_\w+ \(test_peers\.`+name+`\.test_\w+\)`, string(out), name)
	}
}

// TestPythonClientPackage: clients/python installs as a package with
// pip's ordinary resolution and build isolation (no --no-deps), with the pip
// a venv of the embedded CPython starts with (Debian's, from ensurepip) and
// with the newest (the pinned venv's), from its folder and from a git URL's
// subdirectory, with py.typed; the installed package and the one file
// copied alone both score against skynet serve in a venv that has nothing
// else. The build backend (flit_core) comes from the pinned venv's wheel,
// not an index.
func TestPythonClientPackage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and installs the Python client")
	}
	python := classesPython(t)
	venv := testVenv(t, python)
	pinned := filepath.Join(venv, "bin", "python")
	s := startServe(t, "--metric", filepath.Join(pycDir, "testdata", "metric.py"), "--processes", "1")
	dir := t.TempDir()
	run := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Env = peerEnv(t, "PIP_DISABLE_PIP_VERSION_CHECK=1", "PIP_NO_INPUT=1", "PIP_NO_INDEX=1",
			"PIP_FIND_LINKS="+filepath.Join(venv, "wheels"), "PIP_NO_CACHE_DIR=1")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s %s:\n%s", name, strings.Join(args, " "), out)
		return string(out)
	}
	src, err := filepath.Abs(pycDir)
	require.NoError(t, err)
	pyproject, err := os.ReadFile(filepath.Join(src, "pyproject.toml"))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^version = "([^"]+)"`).FindSubmatch(pyproject)
	require.NotNil(t, m, "pyproject.toml has a version")
	version := string(m[1])

	fresh := filepath.Join(dir, "fresh")
	run(python, "-m", "venv", fresh)
	freshPip := run(filepath.Join(fresh, "bin", "python"), "-m", "pip", "--version")
	newestPip := run(pinned, "-m", "pip", "--version")
	t.Logf("pips: %s and %s", strings.TrimSpace(freshPip), strings.TrimSpace(newestPip))
	require.Contains(t, newestPip, "pip 26.", "the pinned venv's pip is the newest (build/python-test.lock)")

	// Into the fresh venv, with its own pip, from the folder.
	run(filepath.Join(fresh, "bin", "python"), "-m", "pip", "install", src)
	// With the newest pip: a wheel, and from a git URL's subdirectory, as
	// pip install "git+https://.../skynet#subdirectory=clients/python" reads
	// it (a repository holding this checkout's clients/python).
	run(pinned, "-m", "pip", "wheel", "-w", filepath.Join(dir, "dist"), src)
	wheels, err := filepath.Glob(filepath.Join(dir, "dist", "skynet_client-*.whl"))
	require.NoError(t, err)
	require.Len(t, wheels, 1)
	repo := filepath.Join(dir, "repo")
	require.NoError(t, os.MkdirAll(filepath.Join(repo, "clients"), 0o755))
	run("cp", "-r", src, filepath.Join(repo, "clients", "python"))
	for _, args := range [][]string{{"init", "-q"}, {"add", "clients/python"}, {"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "client"}} {
		run("git", append([]string{"-C", repo}, args...)...)
	}
	target := filepath.Join(dir, "from-git")
	run(pinned, "-m", "pip", "install", "--target", target, "git+file://"+repo+"#subdirectory=clients/python")
	// The wheel's metadata, as every installer reads it: no extra that is
	// not one (a classifier under [project.optional-dependencies] was).
	meta := run(pinned, "-c", `import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
print(z.read(next(n for n in z.namelist() if n.endswith("METADATA"))).decode())`, wheels[0])
	assert.Contains(t, meta, "Classifier: Typing :: Typed")
	assert.Contains(t, meta, "Provides-Extra: ray")
	assert.NotContains(t, meta, "Provides-Extra: classifiers")

	// The one file, copied alone.
	copied := filepath.Join(dir, "copied")
	require.NoError(t, os.MkdirAll(copied, 0o755))
	b, err := os.ReadFile(filepath.Join(pycDir, "skynet_client", "__init__.py"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(copied, "skynet_client.py"), b, 0o644))

	check := `
import importlib.resources, json, sys
import skynet_client as sc
c = sc.Client(sys.argv[1])
c.wait_ready(30)
r = c.score([{"id": "a", "input": {}, "output": "x", "expected": {"label": "x"}}])[0]
typed = sc.__file__.endswith("__init__.py") and importlib.resources.files("skynet_client").joinpath("py.typed").is_file()
print(json.dumps({"file": sc.__file__, "score": r["score"], "typed": typed, "version": sc.__version__}))
`
	for _, c := range []struct {
		name, pythonPath string
		typed            bool
	}{{"pip install", "", true}, {"git", target, true}, {"copied", copied, false}} {
		cmd := exec.Command(filepath.Join(fresh, "bin", "python"), "-c", check, s.url)
		cmd.Dir = dir // not clients/python: the import must come from what was installed
		cmd.Env = append(os.Environ(), "PYTHONPATH="+c.pythonPath, "PYTHONNOUSERSITE=1")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s: %s", c.name, out)
		var got struct {
			File    string
			Score   float64
			Typed   bool
			Version string
		}
		require.NoError(t, json.Unmarshal(out, &got), "%s: %s", c.name, out)
		assert.Equal(t, 1.0, got.Score, c.name)
		assert.Equal(t, c.typed, got.Typed, "%s: py.typed installed", c.name)
		assert.NotContains(t, got.File, src, "%s: imported from %s, not the checkout", c.name, got.File)
		assert.Equal(t, version, got.Version, "%s: __version__ is pyproject.toml's version", c.name)
	}
}
