package cpython

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeVenv writes a venv's pyvenv.cfg and bin/python (a link to the
// embedded CPython's python, which CheckVenv never runs).
func fakeVenv(t *testing.T, cfg string) string {
	t.Helper()
	venv := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(venv, "bin"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(venv, "pyvenv.cfg"), []byte(cfg), 0o644))
	require.NoError(t, os.Symlink("/bin/true", filepath.Join(venv, "bin", "python")))
	return filepath.Join(venv, "bin", "python")
}

// A venv is of the embedded CPython, of another patch release or
// installation (its packages import: a warning), or of another
// major.minor (refused); each message names both.
func TestCheckVenv(t *testing.T) {
	own := runtimeVersion()
	exe := installedPython()
	if exe == "" {
		t.Skip("the embedded CPython's python executable is unknown: no home to compare")
	}
	home := filepath.Dir(exe)

	same := fakeVenv(t, "home = "+home+"\ninclude-system-site-packages = false\nversion = "+own+"\n")
	assert.Nil(t, CheckVenv(same), "a venv of this CPython")

	patch := fakeVenv(t, "home = /opt/py/bin\nversion = "+minor(own)+".99\nexecutable = /opt/py/bin/python"+minor(own)+"\n")
	e := CheckVenv(patch)
	require.NotNil(t, e)
	assert.False(t, e.Fatal())
	assert.Contains(t, e.Error(), "CPython "+minor(own)+".99 (/opt/py/bin/python"+minor(own)+")")
	assert.Contains(t, e.Error(), "skynet embeds CPython "+own+" ("+exe+")")
	assert.Contains(t, e.Error(), exe+" -m venv")

	other := fakeVenv(t, "home = "+home+"\nversion = "+own+"\n")
	require.NoError(t, os.WriteFile(filepath.Join(filepath.Dir(filepath.Dir(other)), "pyvenv.cfg"),
		[]byte("home = /somewhere/else/bin\nversion = "+own+"\n"), 0o644))
	e = CheckVenv(other)
	require.NotNil(t, e, "the same version of another installation")
	assert.False(t, e.Fatal())
	assert.Contains(t, e.Error(), "/somewhere/else/bin/python"+minor(own))

	newer := fakeVenv(t, "home = /opt/py/bin\nversion = 3.99.1\n")
	e = CheckVenv(newer)
	require.NotNil(t, e)
	assert.True(t, e.Fatal())
	assert.Contains(t, e.Error(), "was made by CPython 3.99.1 (/opt/py/bin/python3.99), but skynet embeds CPython "+own)
	assert.Contains(t, e.Error(), "make build PYTHON=/opt/py/bin/python3.99")

	// Not a venv: an installation's own python.
	assert.Nil(t, CheckVenv(exe))
	// Through VIRTUAL_ENV, as Initialize resolves it.
	t.Setenv("VIRTUAL_ENV", filepath.Dir(filepath.Dir(newer)))
	assert.NotNil(t, CheckVenv(""))
}
