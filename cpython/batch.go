package cpython

/*
#include <stdlib.h>
#include "host.h"
*/
import "C"

import (
	"errors"
	"runtime"
	"time"
	"unsafe"
)

// Batch holds the per-case outcomes of one ScoreBatch call. Slots are
// published as each case finishes, so another goroutine may read finished
// ones (Done, Outcome) or take back pending ones (Claim) while the call runs.
type Batch struct {
	b *C.sky_batch
	n int
}

// Slot states.
const (
	SlotPending   = int(C.SKY_SLOT_PENDING)
	SlotRunning   = int(C.SKY_SLOT_RUNNING)
	SlotDone      = int(C.SKY_SLOT_DONE)
	SlotAbandoned = int(C.SKY_SLOT_ABANDONED)
)

// NewBatch allocates a batch of n cases. Free it after ScoreBatch returns.
func NewBatch(n int) (*Batch, error) {
	b := C.sky_batch_new(C.int(n))
	if b == nil {
		return nil, errors.New("cpython: out of memory")
	}
	return &Batch{b: b, n: n}, nil
}

// Len is the number of cases.
func (b *Batch) Len() int { return b.n }

// Free releases the batch. Idempotent; never while ScoreBatch runs on it.
func (b *Batch) Free() {
	if b.b != nil {
		C.sky_batch_free(b.b)
		b.b = nil
	}
}

// Claim takes case i back if it has not started: it will not run.
func (b *Batch) Claim(i int) bool { return C.sky_slot_claim(b.b, C.int(i)) != 0 }

// State is case i's slot state.
func (b *Batch) State(i int) int { return int(C.sky_slot_state(b.b, C.int(i))) }

// Current returns the case running now (-1 when none) and how long it has run.
func (b *Batch) Current() (int, time.Duration) {
	var started C.int64_t
	cur := int(C.sky_batch_current(b.b, &started))
	if cur < 0 {
		return -1, 0
	}
	return cur, time.Duration(int64(C.sky_now_ns()) - int64(started))
}

// Outcome decodes finished case i. Call only when State(i) is SlotDone.
func (b *Batch) Outcome(i int) (value any, err error, logs string, cut bool, elapsed time.Duration) {
	s := C.sky_batch_slot(b.b, C.int(i))
	data := unsafe.Slice((*byte)(unsafe.Pointer(s.data)), int(s.len))
	if s.status == C.SKY_OK {
		value, err = Decode(data)
	} else {
		err = decodeError(data)
	}
	if s.logs_len > 0 {
		logs = C.GoStringN(s.logs, C.int(s.logs_len))
	}
	return value, err, logs, s.logs_truncated != 0, time.Duration(s.elapsed_ns)
}

// NewTokens reserves n consecutive call tokens and returns the first.
func NewTokens(n int) uint64 { return tokens.Add(uint64(n)) - uint64(n) + 1 }

// ScoreBatch calls fn on every pending case of b under one GIL hold: case i's
// nargs arguments are args[offsets[i]:offsets[i+1]] (the last runs to the
// end), its token is tokenBase+i, and native callbacks see context with case
// index i. Once budget has passed it stops starting cases and returns, leaving
// the rest pending. It returns how many cases it finished.
func (c *Caller) ScoreBatch(b *Batch, fn *Object, nargs int, args []byte, offsets []int,
	tokenBase uint64, capture bool, context uintptr, budget time.Duration) int {
	if len(offsets) != b.n {
		panic("cpython: ScoreBatch needs one offset per case")
	}
	offs := make([]C.size_t, len(offsets))
	for i, o := range offsets {
		offs[i] = C.size_t(o)
	}
	b.b.budget_ns = C.int64_t(budget)
	p, n := cbytes(args)
	var op *C.size_t
	if len(offs) > 0 {
		op = &offs[0]
	}
	done := C.sky_score_batch(c.s, b.b, fn.p, C.int(nargs), p, n, op, C.uint64_t(tokenBase),
		cbool(capture), C.uintptr_t(context))
	runtime.KeepAlive(args)
	runtime.KeepAlive(offs)
	return int(done)
}
