package cpython

/*
#cgo linux LDFLAGS: -ldl
#define PY_SSIZE_T_CLEAN
#include <Python.h> // first: its pyconfig.h defines _GNU_SOURCE, which dladdr needs
#include <dlfcn.h>

static const char *sky_header_version(void) { return PY_VERSION; }

// sky_libpython names the file Py_GetVersion was loaded from, or NULL when
// libpython is linked into the executable itself (a static build).
static const char *sky_libpython(void) {
    Dl_info lib, self;
    if (!dladdr((void *)Py_GetVersion, &lib) || !lib.dli_fname) return NULL;
    if (dladdr((void *)sky_libpython, &self) && self.dli_fbase == lib.dli_fbase) return NULL;
    return lib.dli_fname;
}

// sky_static_libpython: 1 when build/static.sh linked libpython3.X.a into
// this binary; sky_build_python: that installation's BINDIR/python3.X.
#ifdef SKY_LIBPYTHON_STATIC
static int sky_static_libpython(void) { return 1; }
#else
static int sky_static_libpython(void) { return 0; }
#endif
#ifdef SKY_PYTHON_EXECUTABLE
static const char *sky_build_python(void) { return SKY_PYTHON_EXECUTABLE; }
#else
static const char *sky_build_python(void) { return ""; }
#endif
*/
import "C"

import "fmt"

// VersionInfo says which CPython the process embeds.
type VersionInfo struct {
	// Runtime is Py_GetVersion() of the libpython loaded, e.g.
	// "3.12.1 (main, Jan  2 2024, 10:00:00) [GCC 12.2.0]".
	Runtime string
	// Header is PY_VERSION of the Python.h the C layer was compiled with.
	Header string
	// Library is the path of the libpython shared object loaded, or "" when
	// libpython is linked into the executable.
	Library string
}

// Version reports the embedded CPython. It does not need (or start) the
// interpreter: Py_GetVersion works before initialisation.
func Version() VersionInfo {
	v := VersionInfo{
		Runtime: C.GoString(C.Py_GetVersion()),
		Header:  C.GoString(C.sky_header_version()),
	}
	if p := C.sky_libpython(); p != nil {
		v.Library = C.GoString(p)
	}
	return v
}

// StaticLibpython reports whether libpython is linked into the executable
// (the default build, build/static.sh) rather than loaded as a shared object.
func StaticLibpython() bool { return C.sky_static_libpython() == 1 }

// buildPython is the python executable of the installation the static
// libpython came from, as build/static.sh recorded it; "" otherwise.
func buildPython() string { return C.GoString(C.sky_build_python()) }

// PythonVersion is the major.minor of the CPython this package was built against.
func PythonVersion() string { return fmt.Sprintf("%d.%d", C.PY_MAJOR_VERSION, C.PY_MINOR_VERSION) }
