package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const pycDir = "../../clients/python"

// pycServer is a skynet serve process the Python client's tests talk to.
type pycServer struct {
	url string
	cmd *exec.Cmd
	mu  sync.Mutex
	err bytes.Buffer // its stderr so far
}

func (s *pycServer) stderr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err.String()
}

var pycListening = regexp.MustCompile(`skynet serve: listening on (http://\S+)`)

// pycServe starts the skynet binary's serve on a free port and returns once
// it prints where it listens; the test's cleanup stops it with SIGTERM.
func pycServe(t *testing.T, args ...string) *pycServer {
	s := &pycServer{cmd: exec.Command(skynetBin(t), append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...)}
	pipe, err := s.cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, s.cmd.Start())
	found := make(chan string, 1)
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		defer close(found)
		r := bufio.NewReader(pipe)
		for {
			line, err := r.ReadString('\n')
			s.mu.Lock()
			s.err.WriteString(line)
			s.mu.Unlock()
			if m := pycListening.FindStringSubmatch(line); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
			if err != nil { // EOF: the process is gone
				return
			}
		}
	}()
	t.Cleanup(func() {
		s.cmd.Process.Signal(syscall.SIGTERM)
		select { // read stderr to its end before Wait closes the pipe
		case <-readDone:
		case <-time.After(30 * time.Second):
			s.cmd.Process.Kill()
			select { // a worker left holding stderr must not hang the test
			case <-readDone:
			case <-time.After(10 * time.Second):
			}
		}
		s.cmd.Wait()
	})
	select {
	case url, ok := <-found:
		require.True(t, ok, "skynet serve exited before listening:\n%s", s.stderr())
		s.url = url
	case <-time.After(90 * time.Second):
		t.Fatalf("skynet serve printed no listening line in 90s:\n%s", s.stderr())
	}
	return s
}

// pycRun runs the client's unittest file with python against s and returns
// its output; it fails the test with that output when unittest fails.
func pycRun(t *testing.T, python string, s *pycServer, token string) string {
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
	s := pycServe(t, "--metric", metric, "--processes", "2", "--token", token)

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
