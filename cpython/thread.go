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

// Thread is a Python thread state bound to one OS thread. Create it, use it
// and close it from a goroutine that has called runtime.LockOSThread and keeps
// the lock; only Interrupt may be called from elsewhere.
type Thread struct {
	w      *C.sky_worker
	inside bool // holds the GIL
}

var tokens atomic.Uint64

// NewToken returns a process-unique, non-zero call token for Call/Interrupt.
func NewToken() uint64 { return tokens.Add(1) }

// NewThread creates a thread state for the calling OS thread. logsLimit bounds
// the output captured per call, in bytes.
func NewThread(logsLimit int) (*Thread, error) {
	if !Initialized() {
		return nil, errors.New("cpython: interpreter not initialised")
	}
	w := C.sky_worker_new(C.size_t(logsLimit))
	if w == nil {
		return nil, errors.New("cpython: cannot create a thread state")
	}
	return &Thread{w: w}, nil
}

// Enter takes the GIL for this thread.
func (t *Thread) Enter() {
	if !t.inside {
		C.sky_worker_enter(t.w)
		t.inside = true
	}
}

// Leave releases the GIL.
func (t *Thread) Leave() {
	if t.inside {
		C.sky_worker_leave(t.w)
		t.inside = false
	}
}

// Close releases the GIL if held and deletes the thread state. Idempotent.
func (t *Thread) Close() {
	if t.w == nil {
		return
	}
	t.Leave()
	C.sky_worker_free(t.w)
	t.w = nil
}

// Interrupt raises _skynet_host.Interrupted in the call with this token if it
// is still running. Safe from any goroutine; it waits for the GIL, so it does
// not return while C code holds the GIL. It reports whether it posted.
func (t *Thread) Interrupt(token uint64) bool {
	return C.sky_interrupt(t.w, C.uint64_t(token)) != 0
}

func (t *Thread) mustBeInside() {
	if !t.inside {
		panic("cpython: Thread used without the GIL (call Enter first)")
	}
}

func (t *Thread) out() []byte { return bufBytes(&t.w.out) }

func cbytes(b []byte) (*C.char, C.size_t) {
	if len(b) == 0 {
		return nil, 0
	}
	return (*C.char)(unsafe.Pointer(&b[0])), C.size_t(len(b))
}

// Call calls fn with nargs values from args (an Encoder's buffer) and returns
// the decoded result. With capture set, what the call writes to sys.stdout and
// sys.stderr is kept and returned by Logs. token (from NewToken) lets
// Interrupt target this call; 0 makes it uninterruptible.
func (t *Thread) Call(fn *Object, args []byte, nargs int, token uint64, capture bool) (any, error) {
	t.mustBeInside()
	p, n := cbytes(args)
	c := C.int(0)
	if capture {
		c = 1
	}
	rc := C.sky_call(t.w, fn.p, nil, p, n, C.int(nargs), C.uint64_t(token), c)
	runtime.KeepAlive(args)
	if rc != C.SKY_OK {
		return nil, decodeError(t.out())
	}
	return Decode(t.out())
}

// CallObject is Call for setup code that needs the result as an Object.
func (t *Thread) CallObject(fn *Object, args ...any) (*Object, error) {
	t.mustBeInside()
	var e Encoder
	for _, a := range args {
		if err := e.Value(a); err != nil {
			return nil, err
		}
	}
	p, n := cbytes(e.buf)
	var res *C.PyObject
	rc := C.sky_call_obj(t.w, fn.p, p, n, C.int(len(args)), &res)
	runtime.KeepAlive(e.buf)
	if rc != C.SKY_OK {
		return nil, decodeError(t.out())
	}
	return newObject(res), nil
}

// CallValue is CallObject returning the decoded value.
func (t *Thread) CallValue(fn *Object, args ...any) (any, error) {
	var e Encoder
	for _, a := range args {
		if err := e.Value(a); err != nil {
			return nil, err
		}
	}
	return t.Call(fn, e.buf, len(args), 0, false)
}

// CallValueWith is CallValue with obj as the first argument.
func (t *Thread) CallValueWith(fn, obj *Object, args ...any) (any, error) {
	t.mustBeInside()
	var e Encoder
	for _, a := range args {
		if err := e.Value(a); err != nil {
			return nil, err
		}
	}
	p, n := cbytes(e.buf)
	rc := C.sky_call(t.w, fn.p, obj.p, p, n, C.int(len(args)), 0, 0)
	runtime.KeepAlive(e.buf)
	if rc != C.SKY_OK {
		return nil, decodeError(t.out())
	}
	return Decode(t.out())
}

// Logs returns the output captured by the last Call and whether it was cut
// at the limit.
func (t *Thread) Logs() (string, bool) {
	b := bufBytes(&t.w.logs)
	return string(b), t.w.logs_truncated != 0
}

// ExecModule runs source as a new module called name and returns it.
func (t *Thread) ExecModule(name, filename, source string) (*Object, error) {
	t.mustBeInside()
	cn, cf, cs := C.CString(name), C.CString(filename), C.CString(source)
	defer C.free(unsafe.Pointer(cn))
	defer C.free(unsafe.Pointer(cf))
	defer C.free(unsafe.Pointer(cs))
	var res *C.PyObject
	if C.sky_exec_module(t.w, cn, cf, cs, &res) != C.SKY_OK {
		return nil, decodeError(t.out())
	}
	return newObject(res), nil
}

// Attr returns obj.name.
func (t *Thread) Attr(obj *Object, name string) (*Object, error) {
	t.mustBeInside()
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	var res *C.PyObject
	if C.sky_getattr(t.w, obj.p, cn, &res) != C.SKY_OK {
		return nil, decodeError(t.out())
	}
	return newObject(res), nil
}

// Value decodes obj into Go values.
func (t *Thread) Value(obj *Object) (any, error) {
	t.mustBeInside()
	if C.sky_encode_obj(t.w, obj.p) != C.SKY_OK {
		return nil, decodeError(t.out())
	}
	return Decode(t.out())
}

// Release drops a reference to obj. Needs the GIL. Idempotent.
func (t *Thread) Release(obj *Object) {
	t.mustBeInside()
	if obj != nil && obj.p != nil {
		C.sky_decref(obj.p)
		obj.p = nil
	}
}

// Object is a strong reference to a Python object, owned by C. Use it only
// with the GIL held, through a Thread.
type Object struct {
	p *C.PyObject
}

func newObject(p *C.PyObject) *Object { return &Object{p: p} }
