package cpython

/*
#include "host.h"
*/
import "C"

import (
	"encoding/binary"
	"runtime/cgo"
	"time"
	"unsafe"
)

// AsyncHost is the Go side of an event loop that runs `async def score`
// (ServeAsync). Its methods are called on the loop's thread, without the GIL.
type AsyncHost interface {
	// Poll adds to f the model replies that came in and up to room new
	// cases, and says whether the loop should stop.
	Poll(room int, f *AsyncFeed) (stop bool)
	// Done takes a case's result, as a batch slot holds it; timedOut: the
	// case overran its time limit and has no value. v's bytes are C
	// memory, valid only during the call.
	Done(token uint64, v SlotView, timedOut bool)
}

// AsyncFeed is what Poll hands the loop: model replies, then cases, in the
// layout aio.c reads.
type AsyncFeed struct {
	replies, cases uint32
	rbuf, cbuf     []byte
}

// Reply adds a finished model call: its text, or its error message.
func (f *AsyncFeed) Reply(id uint64, text string, failed, noModel bool) {
	f.replies++
	f.rbuf = binary.LittleEndian.AppendUint64(f.rbuf, id)
	f.rbuf = append(f.rbuf, b2u(!failed), b2u(noModel))
	f.rbuf = binary.LittleEndian.AppendUint32(f.rbuf, uint32(len(text)))
	f.rbuf = append(f.rbuf, text...)
}

// Case adds a case: its token and its arguments, each an encoded value.
func (f *AsyncFeed) Case(token uint64, args ...[]byte) {
	f.cases++
	f.cbuf = binary.LittleEndian.AppendUint64(f.cbuf, token)
	f.cbuf = binary.LittleEndian.AppendUint32(f.cbuf, uint32(len(args)))
	for _, a := range args {
		f.cbuf = binary.LittleEndian.AppendUint32(f.cbuf, uint32(len(a)))
		f.cbuf = append(f.cbuf, a...)
	}
}

// Cases is how many cases f holds.
func (f *AsyncFeed) Cases() int { return int(f.cases) }

func (f *AsyncFeed) reset() {
	f.replies, f.cases, f.rbuf, f.cbuf = 0, 0, f.rbuf[:0], f.cbuf[:0]
}

func b2u(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// asyncState is what the exported callbacks find through their handle.
type asyncState struct {
	host AsyncHost
	feed AsyncFeed
}

// AsyncOptions configures ServeAsync.
type AsyncOptions struct {
	Driver, Score, Run *Object // the driver's serve, score and (program cases) run
	Wake               int     // the read end of a pipe Go writes a byte to when Poll has something
	Limit              int     // cases in flight at most
	Timeout            time.Duration
	RunTimeout         time.Duration
	Token              uint64  // makes the loop interruptible (Interrupt) while it runs
	Context            uintptr // the skynet module's context (skynetmod.Slot.Handle)
}

// ServeAsync runs the event loop on this thread until host's Poll says
// stop: it returns nil then, or the driver's error.
func (c *Caller) ServeAsync(o AsyncOptions, host AsyncHost) error {
	st := &asyncState{host: host}
	h := cgo.NewHandle(st)
	defer h.Delete()
	var run *C.PyObject
	if o.Run != nil {
		run = o.Run.ptr()
	}
	rc := C.sky_aio_serve(c.ptr(), o.Driver.ptr(), o.Score.ptr(), run, C.int(o.Wake), C.int(o.Limit), C.double(o.Timeout.Seconds()),
		C.double(o.RunTimeout.Seconds()), c.s.logs_limit, C.uint64_t(o.Token), C.uintptr_t(o.Context), C.uintptr_t(h))
	_, err := c.result(rc)
	return err
}

//export skyAioPoll
func skyAioPoll(h C.uintptr_t, room C.int, out *C.sky_buf) C.int {
	st := cgo.Handle(h).Value().(*asyncState)
	f := &st.feed
	f.reset()
	stop := st.host.Poll(int(room), f)
	n := 8 + len(f.rbuf) + len(f.cbuf)
	p := C.sky_buf_reserve(out, C.size_t(n))
	if p == nil {
		return -1
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(p)), n)
	binary.LittleEndian.PutUint32(b, f.replies)
	binary.LittleEndian.PutUint32(b[4:], f.cases)
	copy(b[8:], f.rbuf)
	copy(b[8+len(f.rbuf):], f.cbuf)
	return C.int(b2u(stop))
}

//export skyAioDone
func skyAioDone(h C.uintptr_t, token C.uint64_t, status C.int, data *C.char, n C.size_t, logs *C.char, logsN C.size_t,
	cut C.int, elapsed, runNS C.int64_t) {
	st := cgo.Handle(h).Value().(*asyncState)
	v := SlotView{State: SlotDone, OK: status == C.SKY_OK, RunFailed: status == C.SKY_RUNERR,
		RunTime: time.Duration(runNS), Cut: cut != 0, Elapsed: time.Duration(elapsed)}
	if n > 0 {
		v.Data = unsafe.Slice((*byte)(unsafe.Pointer(data)), int(n))
	}
	if logsN > 0 {
		v.Logs = unsafe.Slice((*byte)(unsafe.Pointer(logs)), int(logsN))
	}
	st.host.Done(uint64(token), v, status < 0)
}
