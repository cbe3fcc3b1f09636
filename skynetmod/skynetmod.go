// Package skynetmod is the native `skynet` module that metrics import:
// llm, reward, observation and service_cost. It is registered before the
// interpreter starts (PyImport_AppendInittab); its C functions call the Go
// functions exported here. Measurements are held in Go, per call, in a Slot;
// Python can read them but not change them.
package skynetmod

/*
#cgo pkg-config: python3-embed
#cgo CFLAGS: -Wall -Werror=implicit-function-declaration -I${SRCDIR}/../cpython
#include <stdlib.h>
#include "skynetmod.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime/cgo"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/skynetml/skynet/cpython"
	"github.com/skynetml/skynet/llm"
	"github.com/skynetml/skynet/reward"
)

func init() {
	// Must precede the interpreter's start, which Go's package init order
	// guarantees: importers of skynetmod start it only later, at run time.
	src := C.CString(dspySource)
	C.skynetmod_set_python(src)
	C.free(unsafe.Pointer(src))
	if C.skynetmod_register() != 0 {
		panic("skynetmod: cannot register the skynet module")
	}
}

// Observation is what was measured for a case. Nil means not measured.
type Observation struct {
	// RunMS is how long the program took to produce the output, in milliseconds.
	RunMS *float64 `json:"run_ms,omitempty"`
	// CostUSD is what producing the output cost, in US dollars.
	CostUSD *float64 `json:"cost_usd,omitempty"`
	// ModelCalls is how many model calls producing the output made.
	ModelCalls *int64 `json:"model_calls,omitempty"`
	// InputTokens is how many tokens those calls sent.
	InputTokens *int64 `json:"input_tokens,omitempty"`
	// OutputTokens is how many tokens those calls got back.
	OutputTokens *int64 `json:"output_tokens,omitempty"`
}

// Slot carries the current cases' context into the module's functions. A
// worker owns one and sets the observations of a batch before scoring it;
// Handle is passed as the calls' context (cpython.Caller.ScoreBatch), and the
// C side adds the index of the case running, so each finds its own.
type Slot struct {
	handle cgo.Handle
	cur    atomic.Pointer[[]*Observation]
	model  atomic.Pointer[ModelFunc]
	lookup atomic.Pointer[func(int) *Observation] // an event loop's cases, by token (SetLookup)
	start  atomic.Pointer[StartFunc]
}

// StartFunc starts an allm() call, numbered call, for case i (an event
// loop's token) without waiting for it: the engine hands the reply to the
// loop when it comes (cpython.AsyncFeed.Reply).
type StartFunc func(call uint64, i int, inRun bool, req llm.Request)

// SetStart routes this slot's allm() calls.
func (s *Slot) SetStart(f StartFunc) { s.start.Store(&f) }

// SetLookup makes f find the observation of case i, for a slot whose cases
// run on an event loop (where i is a case's token, not a batch index).
func (s *Slot) SetLookup(f func(i int) *Observation) { s.lookup.Store(&f) }

// ModelFunc makes llm() calls for case i of the current batch; inRun says the
// call comes from run code (the task model) rather than score. The engine
// sets it: it knows the models, the case's remaining time and its costs.
type ModelFunc func(i int, inRun bool, req llm.Request) (string, error)

// SetModel routes this slot's llm() calls; nil leaves llm() unconfigured.
func (s *Slot) SetModel(f ModelFunc) {
	if f == nil {
		s.model.Store(nil)
		return
	}
	s.model.Store(&f)
}

// NewSlot returns a Slot; Close it when the worker ends.
func NewSlot() *Slot {
	s := &Slot{}
	s.handle = cgo.NewHandle(s)
	return s
}

// Set makes obs[i] the observation of case i of the next calls made with this
// slot; nil clears it.
func (s *Slot) Set(obs []*Observation) {
	if obs == nil {
		s.cur.Store(nil)
		return
	}
	s.cur.Store(&obs)
}

// observation is case i's, with the run time measured for it in C when a
// program ran (runNS >= 0): the host's own clock, out of Python's reach.
func (s *Slot) observation(i, runNS C.int64_t) *Observation {
	var o *Observation
	if f := s.lookup.Load(); f != nil {
		o = (*f)(int(i))
	} else if p := s.cur.Load(); p != nil && i >= 0 && int(i) < len(*p) {
		o = (*p)[i]
	}
	if o == nil {
		return nil
	}
	if runNS >= 0 {
		c := *o
		ms := float64(runNS) / 1e6
		c.RunMS = &ms
		return &c
	}
	return o
}

// Handle is the value to pass as a call's context.
func (s *Slot) Handle() uintptr { return uintptr(s.handle) }

// Close releases the handle. Idempotent.
func (s *Slot) Close() {
	if s.handle != 0 {
		s.handle.Delete()
		s.handle = 0
	}
}

func slotOf(ctx C.uintptr_t) (*Slot, bool) {
	defer func() { recover() }() // a stale handle must not unwind into C
	s, ok := cgo.Handle(ctx).Value().(*Slot)
	return s, ok
}

//export skynetObservation
func skynetObservation(ctx C.uintptr_t, index, runNS C.int64_t, out *C.sky_observation) (ok C.int) {
	defer func() {
		if recover() != nil {
			ok = 0
		}
	}()
	s, found := slotOf(ctx)
	if !found {
		return 0
	}
	o := s.observation(index, runNS)
	if o == nil {
		return 0
	}
	if o.RunMS != nil {
		out.has_run_ms, out.run_ms = 1, C.double(*o.RunMS)
	}
	if o.CostUSD != nil {
		out.has_cost_usd, out.cost_usd = 1, C.double(*o.CostUSD)
	}
	if o.ModelCalls != nil {
		out.has_model_calls, out.model_calls = 1, C.longlong(*o.ModelCalls)
	}
	if o.InputTokens != nil {
		out.has_input_tokens, out.input_tokens = 1, C.longlong(*o.InputTokens)
	}
	if o.OutputTokens != nil {
		out.has_output_tokens, out.output_tokens = 1, C.longlong(*o.OutputTokens)
	}
	return 1
}

// specs caches parsed specs by their encoded bytes: a metric passes the same
// REWARD_SPEC on every call, and it was validated when the metric loaded.
var specs sync.Map // string -> *reward.Spec

const maxCachedSpecs = 64

var cachedSpecs atomic.Int64

func parseSpec(encoded []byte) (*reward.Spec, error) {
	if s, ok := specs.Load(string(encoded)); ok {
		return s.(*reward.Spec), nil
	}
	v, err := cpython.Decode(encoded)
	if err != nil {
		return nil, err
	}
	spec, err := reward.Parse(cpython.Plain(v))
	if err != nil {
		return nil, err
	}
	if cachedSpecs.Add(1) <= maxCachedSpecs {
		specs.Store(string(encoded), spec)
	}
	return spec, nil
}

//export skynetReward
func skynetReward(ctx C.uintptr_t, index, runNS C.int64_t, spec *C.char, specLen C.size_t, accuracy C.double,
	feedback *C.char, feedbackLen C.size_t, out *C.sky_reward_out) {
	defer func() {
		if r := recover(); r != nil {
			out.error = C.CString("skynet.reward: internal error")
		}
	}()
	fail := func(msg string) { out.error = C.CString(msg) }
	s, ok := slotOf(ctx)
	if !ok {
		fail("skynet.reward: no current case")
		return
	}
	parsed, err := parseSpec(C.GoBytes(unsafe.Pointer(spec), C.int(specLen)))
	if err != nil {
		fail(err.Error())
		return
	}
	var obs reward.Observation
	if o := s.observation(index, runNS); o != nil {
		obs = reward.Observation{RunMS: o.RunMS, CostUSD: o.CostUSD}
	}
	parts, err := parsed.Compute(float64(accuracy), C.GoStringN(feedback, C.int(feedbackLen)), obs)
	if err != nil {
		fail(err.Error())
		return
	}
	out.total, out.accuracy, out.speed, out.cost = C.double(parts.Total), C.double(parts.Accuracy),
		C.double(parts.Speed), C.double(parts.Cost)
	out.feedback = C.CString(parts.Feedback)
	out.feedback_len = C.size_t(len(parts.Feedback))
}

//export skynetLLM
func skynetLLM(ctx C.uintptr_t, index C.int64_t, inRun C.int, instr *C.char, instrLen C.size_t, input *C.char, inputLen C.size_t,
	hasTemp C.int, temp C.double, hasMax C.int, maxTokens C.longlong, out *C.sky_llm_out) {
	defer func() {
		if r := recover(); r != nil {
			out.error = C.CString(fmt.Sprintf("skynet.llm: internal error: %v", r))
		}
	}()
	s, ok := slotOf(ctx)
	f := (*ModelFunc)(nil)
	if ok {
		f = s.model.Load()
	}
	if f == nil {
		out.no_model = 1
		role := llm.RoleMetric
		if inRun != 0 {
			role = llm.RoleTask
		}
		out.error = C.CString("skynet.llm: " + (&llm.NoModelError{Role: role}).Error())
		return
	}
	req := request(instr, instrLen, input, inputLen, hasTemp, temp, hasMax, maxTokens)
	text, err := (*f)(int(index), inRun != 0, req)
	if err != nil {
		var nm *llm.NoModelError
		if errors.As(err, &nm) {
			out.no_model = 1
		}
		out.error = C.CString("skynet.llm: " + err.Error())
		return
	}
	out.text = C.CString(text)
	out.text_len = C.size_t(len(text))
}

// request copies a model call's arguments out of C memory.
func request(instr *C.char, instrLen C.size_t, input *C.char, inputLen C.size_t, hasTemp C.int, temp C.double,
	hasMax C.int, maxTokens C.longlong) llm.Request {
	req := llm.Request{Instructions: C.GoStringN(instr, C.int(instrLen)), Input: C.GoStringN(input, C.int(inputLen))}
	if hasTemp != 0 {
		t := float64(temp)
		req.Temperature = &t
	}
	if hasMax != 0 {
		m := int(maxTokens)
		req.MaxTokens = &m
	}
	return req
}

//export skynetLLMStart
func skynetLLMStart(ctx C.uintptr_t, index C.int64_t, inRun C.int, call C.uint64_t, instr *C.char, instrLen C.size_t,
	input *C.char, inputLen C.size_t, hasTemp C.int, temp C.double, hasMax C.int, maxTokens C.longlong) {
	s, ok := slotOf(ctx)
	if !ok {
		return
	}
	if f := s.start.Load(); f != nil {
		(*f)(uint64(call), int(index), inRun != 0, request(instr, instrLen, input, inputLen, hasTemp, temp, hasMax, maxTokens))
	}
}
