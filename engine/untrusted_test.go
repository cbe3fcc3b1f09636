package engine

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const tryEverything = `
import os, subprocess
def score(input, output, expected=None):
    what, path = output, input.get("path", "")
    if what == "subprocess": subprocess.run(["true"])
    if what == "system": os.system("true")
    if what == "kill": os.kill(os.getpid(), 0)
    if what == "ctypes":
        import ctypes
        ctypes.CDLL(None)
    if what == "write": open(path, "w").write("x")
    if what == "remove": os.remove(path)
    if what == "read": open(path).read()
    if what == "thread":
        import threading
        seen = []
        def escape():
            try:
                os.system("true")
                seen.append("escaped")
            except PermissionError as exc:
                seen.append(str(exc))
        th = threading.Thread(target=escape)
        th.start()
        th.join()
        return 1.0, {"feedback": seen[0]}
    return 1.0, {"feedback": "done"}
`

// ctypesInUse is the refusal an untrusted metric meets when ctypes was
// imported before in the process (by a trusted metric, or an earlier test).
const ctypesInUse = "PermissionError: skynet untrusted mode: ctypes.dlopen is not allowed"

func TestUntrustedMode(t *testing.T) {
	allowed, outside := t.TempDir(), t.TempDir()
	readable := filepath.Join(outside, "readable.txt")
	require.NoError(t, os.WriteFile(readable, []byte("x"), 0o644))
	metric := writeMetric(t, tryEverything)
	e := open(t, Options{Metric: metric, Untrusted: true, AllowWrites: []string{allowed}})
	trusted := open(t, Options{Metric: metric})
	for what, want := range map[string]string{
		"subprocess": "PermissionError: skynet untrusted mode: subprocess.Popen is not allowed",
		"system":     "PermissionError: skynet untrusted mode: os.system is not allowed",
		"kill":       "PermissionError: skynet untrusted mode: os.kill is not allowed",
		"ctypes":     "PermissionError: skynet untrusted mode: import ctypes is not allowed",
	} {
		r := e.Score(ctx, Case{ID: what, Input: map[string]any{}, Output: what})
		require.NotNil(t, r.Err, what)
		assert.Equal(t, KindException, r.Err.Kind, what)
		if what == "ctypes" && r.Err.Message == ctypesInUse {
			want = ctypesInUse // imported earlier in this process: a cached import raises no audit event, loading a library does
		}
		assert.Equal(t, want, r.Err.Message, what)
		ok := trusted.Score(ctx, Case{ID: what, Input: map[string]any{}, Output: what})
		assert.Nil(t, ok.Err, "trusted engines are not restricted (%s): %+v", what, ok.Err)
	}
	out := filepath.Join(outside, "f.txt")
	r := e.Score(ctx, Case{ID: "w", Input: map[string]any{"path": out}, Output: "write"})
	require.NotNil(t, r.Err)
	assert.Contains(t, r.Err.Message, "PermissionError: skynet untrusted mode: open is not allowed: writing to "+out)
	_, err := os.Stat(out)
	assert.True(t, os.IsNotExist(err), "nothing was written")
	r = e.Score(ctx, Case{ID: "rm", Input: map[string]any{"path": readable}, Output: "remove"})
	require.NotNil(t, r.Err)
	assert.Contains(t, r.Err.Message, "os.remove is not allowed")
	sneaky := filepath.Join(allowed, "..", filepath.Base(outside), "g.txt")
	r = e.Score(ctx, Case{ID: "dots", Input: map[string]any{"path": sneaky}, Output: "write"})
	require.NotNil(t, r.Err, "a path that climbs out of the allowed directory is refused")
	r = e.Score(ctx, Case{ID: "t", Input: map[string]any{}, Output: "thread"})
	require.Nil(t, r.Err, "%+v", r.Err)
	assert.Equal(t, "skynet untrusted mode: os.system is not allowed", r.Feedback, "a thread the metric starts is no way out")
	for what, path := range map[string]string{"write": filepath.Join(allowed, "ok.txt"), "read": readable} {
		r = e.Score(ctx, Case{ID: what, Input: map[string]any{"path": path}, Output: what})
		assert.Nil(t, r.Err, "%s %s: %+v", what, path, r.Err)
	}
}

func TestUntrustedImportTime(t *testing.T) {
	metric := writeMetric(t, "import os\nos.system('true')\ndef score(i, o, e=None):\n    return 1.0, {'feedback': ''}\n")
	_, err := Open(Options{Metric: metric, Untrusted: true})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "os.system is not allowed")
}
