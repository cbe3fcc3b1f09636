package cpython

/*
#include <stdlib.h>
#include "host.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"
)

// MaxInterpreters bounds the interpreters of a process, the main one included.
const MaxInterpreters = int(C.SKY_MAX_INTERPS)

// Interp is one Python interpreter: the main one (Main), or a
// sub-interpreter with its own GIL (NewInterp, CPython 3.12+), which runs
// Python in parallel with the others. Objects of one interpreter must never
// be used in another: each loads its own copy of a metric. Interpreters are
// never finalised (C extensions cannot be re-initialised), so there is no
// Close; keep the ones you make for reuse.
type Interp struct {
	in    *C.sky_interp
	index int
}

var mainInterp Interp

// Main is the main interpreter, once Initialize has succeeded; else nil.
func Main() *Interp {
	if !initialized() {
		return nil
	}
	return &mainInterp
}

// Index is the interpreter's place among the process's: 0 for the main one.
func (i *Interp) Index() int { return i.index }

// id is CPython's interpreter id (0 for the main interpreter).
func (i *Interp) id() int64 { return int64(C.sky_interp_id(i.in)) }

// SubInterpreters reports whether this CPython can run sub-interpreters with
// their own GIL (3.12 and later).
func SubInterpreters() bool { return C.PY_VERSION_HEX >= 0x030C0000 }

// PythonVersion is the major.minor of the CPython this package was built against.
func PythonVersion() string { return fmt.Sprintf("%d.%d", C.PY_MAJOR_VERSION, C.PY_MINOR_VERSION) }

var newInterpMu sync.Mutex

// NewInterp starts a sub-interpreter with its own GIL. It fails before
// CPython 3.12, and past MaxInterpreters. Extension modules built with
// single-phase init (numpy today) refuse to import in it: their import raises
// ImportError there, and callers fall back to the main interpreter.
func NewInterp() (*Interp, error) {
	if !initialized() {
		return nil, errors.New("cpython: interpreter not initialised")
	}
	if !SubInterpreters() {
		return nil, fmt.Errorf("cpython: sub-interpreters with their own GIL need CPython 3.12 or later; this build embeds CPython %s", PythonVersion())
	}
	newInterpMu.Lock()
	defer newInterpMu.Unlock()
	src := C.CString(hostSource)
	defer C.free(unsafe.Pointer(src))
	var errBuf C.sky_buf
	defer C.sky_buf_free(&errBuf)
	in := C.sky_interp_new(src, &errBuf)
	if in == nil {
		if err := decodeError(bufBytes(&errBuf)); err != nil {
			return nil, fmt.Errorf("cpython: starting a sub-interpreter: %w", err)
		}
		return nil, errors.New("cpython: starting a sub-interpreter failed")
	}
	return &Interp{in: in, index: int(in.index)}, nil
}
