package cpython

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The libpython loaded must be the version whose headers the C layer was
// compiled with: a mismatch means the rpath or the loader found another one.
func TestVersionMatchesHeaders(t *testing.T) {
	v := Version()
	parts := strings.SplitN(v.Header, ".", 3)
	require.GreaterOrEqual(t, len(parts), 2, "PY_VERSION %q", v.Header)
	minor := parts[0] + "." + parts[1]
	assert.True(t, strings.HasPrefix(v.Runtime, minor+"."), "Py_GetVersion() = %q, compiled against Python.h %s", v.Runtime, v.Header)
	if StaticLibpython() {
		assert.Empty(t, v.Library, "libpython is linked into the test binary")
		return
	}
	assert.Contains(t, v.Library, "libpython"+minor)
}
