package cpython

/*
#include <stdlib.h>
#include "host.h"
*/
import "C"

import (
	"errors"
	"runtime"
	"sync/atomic"
	"unsafe"
)

// Each OS thread that calls into Python gets its own thread state, made on
// first use and kept (see sky_enter), so goroutines need not be pinned to
// threads: a call takes the GIL, runs and releases it within one cgo
// crossing, on whichever thread the goroutine is on.

var tokens atomic.Uint64

// newToken returns a process-unique, non-zero call token for Call/Interrupt.
func newToken() uint64 { return tokens.Add(1) }

// Interrupt raises _skynet_host.Interrupted in the call with this token if it
// is still running. Safe from any goroutine. It waits for the GIL, so it does
// not return while C code holds the GIL; callers that must not block run it
// on a goroutine of its own. It reports whether it posted.
func Interrupt(token uint64) bool {
	return C.sky_interrupt(C.uint64_t(token)) != 0
}

// Caller makes calls into Python. It owns the C buffers results land in, so
// it serves one goroutine at a time; make one per worker goroutine.
type Caller struct {
	s *C.sky_scratch
}

var errNotInitialized = errors.New("cpython: interpreter not initialised")

// NewCaller returns a Caller whose calls keep at most logsLimit bytes of output.
func NewCaller(logsLimit int) (*Caller, error) {
	if !initialized() {
		return nil, errNotInitialized
	}
	s := C.sky_scratch_new(C.size_t(logsLimit))
	if s == nil {
		return nil, errors.New("cpython: out of memory")
	}
	return &Caller{s: s}, nil
}

// ptr is the C scratch; a use after Close panics here rather than handing C
// a NULL to crash on.
func (c *Caller) ptr() *C.sky_scratch {
	if c.s == nil {
		panic("cpython: Caller used after Close")
	}
	return c.s
}

// Close frees the buffers. Idempotent.
func (c *Caller) Close() {
	if c.s != nil {
		C.sky_scratch_free(c.s)
		c.s = nil
	}
}

var errNoThread = errors.New("cpython: cannot create a Python thread state")

func cbytes(b []byte) (*C.char, C.size_t) {
	if len(b) == 0 {
		return nil, 0
	}
	return (*C.char)(unsafe.Pointer(&b[0])), C.size_t(len(b))
}

// Call makes one call outside a batch (the engine's scheduler uses
// ScoreBatch): it takes the GIL, calls fn with nargs values from args (an
// Encoder's buffer), releases the GIL and returns the decoded result, in one
// cgo crossing. With capture set, what the call writes to sys.stdout and
// sys.stderr is kept in the Caller, up to its logs limit, instead of reaching
// the process's streams. token (from NewTokens) lets Interrupt target the
// call; 0 makes it uninterruptible. context is handed to native callbacks as
// ScoreBatch's is (skynetmod passes a Slot's Handle); they read it from the
// running thread's state (sky_current_thread in host.h).
func (c *Caller) Call(fn *Object, args []byte, nargs int, token uint64, capture bool, context uintptr) (any, error) {
	p, n := cbytes(args)
	rc := C.sky_call_gil(c.ptr(), fn.ptr(), p, n, C.int(nargs), C.uint64_t(token), cbool(capture), C.uintptr_t(context))
	runtime.KeepAlive(args)
	return c.result(rc)
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

func (c *Caller) out() []byte { return bufBytes(&c.ptr().out) }

func (c *Caller) result(rc C.int) (any, error) {
	switch rc {
	case C.SKY_OK:
		return Decode(c.out())
	case C.SKY_NOTHREAD:
		return nil, errNoThread
	}
	return nil, decodeError(c.out())
}

// logs returns the output captured by the last capturing call and whether it
// was cut at the limit.
func (c *Caller) logs() (string, bool) {
	return string(bufBytes(&c.ptr().logs)), c.s.logs_truncated != 0
}

// currentContext returns the context value of the call running on this OS thread,
// or 0. Native module functions use it to find the current case.
func currentContext() uintptr {
	t := C.sky_current_thread()
	if t == nil {
		return 0
	}
	return uintptr(t.context)
}

// GIL is held for setup code that makes several calls in a row; see WithGIL.
type GIL struct {
	c *Caller
}

// WithGIL runs fn on this goroutine's OS thread with the GIL held. Not for
// the hot path: it pins the goroutine for fn's duration.
func WithGIL(fn func(g *GIL)) error {
	c, err := NewCaller(0)
	if err != nil {
		return err
	}
	defer c.Close()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	entered := C.sky_enter()
	if entered < 0 {
		return errNoThread
	}
	defer C.sky_leave(entered)
	fn(&GIL{c: c})
	return nil
}

// Untrusted puts this thread's calls under the audit hook (see Untrusted)
// until turned off; for code run through a GIL, such as imports.
func (g *GIL) Untrusted(on bool) { C.sky_set_untrusted(cbool(on)) }

// CallValue calls fn with Go values and returns the decoded result.
func (g *GIL) CallValue(fn *Object, args ...any) (any, error) {
	return g.CallValueWith(fn, nil, args...)
}

// CallValueWith is CallValue with obj (when not nil) as the first argument.
func (g *GIL) CallValueWith(fn, obj *Object, args ...any) (any, error) {
	buf, err := encodeArgs(args)
	if err != nil {
		return nil, err
	}
	p, n := cbytes(buf)
	var first *C.PyObject
	if obj != nil {
		first = obj.ptr()
	}
	rc := C.sky_call(g.c.ptr(), fn.ptr(), first, p, n, C.int(len(args)), 0, 0, 0)
	runtime.KeepAlive(buf)
	return g.c.result(rc)
}

// encodeArgs encodes call arguments one after another in one buffer.
func encodeArgs(args []any) ([]byte, error) {
	var e Encoder
	for _, a := range args {
		if err := e.Value(a); err != nil {
			return nil, err
		}
	}
	return e.buf, nil
}

// CallObject calls fn with Go values and returns the result as an Object.
func (g *GIL) CallObject(fn *Object, args ...any) (*Object, error) {
	buf, err := encodeArgs(args)
	if err != nil {
		return nil, err
	}
	p, n := cbytes(buf)
	var res *C.PyObject
	rc := C.sky_call_obj(g.c.ptr(), fn.ptr(), p, n, C.int(len(args)), &res)
	runtime.KeepAlive(buf)
	if rc != C.SKY_OK {
		return nil, decodeError(g.c.out())
	}
	return &Object{p: res}, nil
}

// ExecModule runs source as a new module called name and returns it.
func (g *GIL) ExecModule(name, filename, source string) (*Object, error) {
	cn, cf, cs := C.CString(name), C.CString(filename), C.CString(source)
	defer C.free(unsafe.Pointer(cn))
	defer C.free(unsafe.Pointer(cf))
	defer C.free(unsafe.Pointer(cs))
	var res *C.PyObject
	if C.sky_exec_module(g.c.ptr(), cn, cf, cs, &res) != C.SKY_OK {
		return nil, decodeError(g.c.out())
	}
	return &Object{p: res}, nil
}

// Attr returns obj.name.
func (g *GIL) Attr(obj *Object, name string) (*Object, error) {
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	var res *C.PyObject
	if C.sky_getattr(g.c.ptr(), obj.ptr(), cn, &res) != C.SKY_OK {
		return nil, decodeError(g.c.out())
	}
	return &Object{p: res}, nil
}

// value decodes obj into Go values.
func (g *GIL) value(obj *Object) (any, error) {
	if C.sky_encode_obj(g.c.ptr(), obj.p) != C.SKY_OK {
		return nil, decodeError(g.c.out())
	}
	return Decode(g.c.out())
}

// Release drops a reference. Idempotent.
func (g *GIL) Release(obj *Object) {
	if obj != nil && obj.p != nil {
		C.sky_decref(obj.p)
		obj.p = nil
	}
}

// Object is a strong reference to a Python object, owned by C. Use it only
// with the GIL held: through a Caller or a GIL.
type Object struct {
	p *C.PyObject
}

// ptr is the object; a use after Release panics here rather than handing C
// a NULL to crash on.
func (o *Object) ptr() *C.PyObject {
	if o.p == nil {
		panic("cpython: Object used after Release")
	}
	return o.p
}
