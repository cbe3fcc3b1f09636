package cpython

/*
#include <stdlib.h>
#include "host.h"
*/
import "C"

import (
	"bytes"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// Batch holds the per-case outcomes of one ScoreBatch call. Slots are
// published as each case finishes, so another goroutine may read finished
// ones (Done, Outcome) or take back pending ones (Claim) while the call runs.
type Batch struct {
	b     *C.sky_batch
	n     int
	slots []C.sky_slot // b's slots, viewed from Go without a crossing
}

// Slot states, as Batch.State and SlotView.State report them. A slot goes
// from pending to running to done; Claim takes a pending one back.
const (
	// SlotPending: the case has not started; Claim can take it back.
	SlotPending = int(C.SKY_SLOT_PENDING)
	// slotRunning: the case is being called now.
	slotRunning = int(C.SKY_SLOT_RUNNING)
	// SlotDone: the case finished; its SlotView may be read.
	SlotDone = int(C.SKY_SLOT_DONE)
	// slotAbandoned: the case was claimed and will not run.
	slotAbandoned = int(C.SKY_SLOT_ABANDONED)
)

// NewBatch allocates a batch of n cases. Free it after ScoreBatch returns.
func NewBatch(n int) (*Batch, error) {
	b := C.sky_batch_new(C.int(n))
	if b == nil {
		return nil, errors.New("cpython: out of memory")
	}
	return &Batch{b: b, n: n, slots: unsafe.Slice(C.sky_batch_slot(b, 0), n)}, nil
}

// Reset makes a batch whose ScoreBatch call has returned, and which nobody
// else touches any more, ready for n cases, reusing its memory. It reports
// false when the batch holds fewer than n cases' slots.
func (b *Batch) Reset(n int) bool {
	if b.b == nil || C.sky_batch_reset(b.b, C.int(n)) == 0 {
		return false
	}
	b.n = n
	b.slots = b.slots[:n:cap(b.slots)]
	return true
}

// ptr is the C batch; a use after Free panics here rather than handing C a
// NULL to crash on.
func (b *Batch) ptr() *C.sky_batch {
	if b.b == nil {
		panic("cpython: Batch used after Free")
	}
	return b.b
}

// Free releases the batch. Idempotent; never while ScoreBatch runs on it.
func (b *Batch) Free() {
	if b.b != nil {
		C.sky_batch_free(b.b)
		b.b, b.slots = nil, nil
	}
}

// Claim takes case i back if it has not started: it will not run.
func (b *Batch) Claim(i int) bool { return C.sky_slot_claim(b.ptr(), C.int(i)) != 0 }

// State is case i's slot state.
func (b *Batch) State(i int) int { return int(C.sky_slot_state(b.ptr(), C.int(i))) }

// Took is the time the cases finished so far took together (each case's
// Elapsed); read it once ScoreBatch has returned.
func (b *Batch) Took() time.Duration { return time.Duration(b.ptr().took_ns) }

// Current returns the case running now (-1 when none) and how long it has run.
func (b *Batch) Current() (int, time.Duration) {
	var started C.int64_t
	cur := int(C.sky_batch_current(b.ptr(), &started))
	if cur < 0 {
		return -1, 0
	}
	return cur, time.Duration(int64(C.sky_now_ns()) - int64(started))
}

// SlotView is a finished case's raw outcome. Data and Logs point into C
// memory that lives until Free: copy what you keep.
//
// In a program batch, Data starts with the encoded output of run, followed
// by the score value (OK) or error; when run itself failed (RunFailed), Data
// is run's error alone.
type SlotView struct {
	State     int           // the slot's state: SlotDone once the case finished
	OK        bool          // Data is an encoded value; otherwise an encoded error
	RunFailed bool          // run itself raised: Data is run's error alone
	RunTime   time.Duration // run's wall time; -1 when no program ran
	Data      []byte        // the outcome, for Decode, DecodeOutcome or DecodeScorePair
	Logs      []byte        // what the case wrote to sys.stdout/sys.stderr (Capture mode)
	Cut       bool          // Logs were cut at the limit
	Elapsed   time.Duration // the case's wall time, run and score together
}

// Slot views case i. For a batch whose ScoreBatch call has returned, any
// slot; while it runs, only slots whose State is SlotDone.
func (b *Batch) Slot(i int) SlotView {
	b.ptr()
	return slotView(&b.slots[i])
}

func slotView(s *C.sky_slot) SlotView {
	v := SlotView{State: int(s.state), OK: s.status == C.SKY_OK, RunFailed: s.status == C.SKY_RUNERR,
		RunTime: time.Duration(s.run_ns), Cut: s.logs_truncated != 0, Elapsed: time.Duration(s.elapsed_ns)}
	if s.len > 0 {
		v.Data = unsafe.Slice((*byte)(unsafe.Pointer(s.data)), int(s.len))
	}
	if s.logs_len > 0 {
		v.Logs = unsafe.Slice((*byte)(unsafe.Pointer(s.logs)), int(s.logs_len))
	}
	return v
}

// Running reports whether the case running is in its run phase (not score).
func (b *Batch) Running() bool { return C.sky_batch_phase(b.ptr()) == C.SKY_PHASE_RUN }

// SplitValue returns the first encoded value of data and what follows it.
func SplitValue(data []byte) (first, rest []byte, err error) {
	d := decoder{b: data}
	if _, err := d.value(0); err != nil {
		return nil, nil, err
	}
	return data[:d.i], data[d.i:], nil
}

// DecodeOutcome turns a slot's Data into the call's value or *Error.
func DecodeOutcome(ok bool, data []byte) (any, error) {
	if ok {
		return Decode(data)
	}
	return nil, decodeError(data)
}

// NewTokens reserves n consecutive call tokens and returns the first.
func NewTokens(n int) uint64 { return tokens.Add(uint64(n)) - uint64(n) + 1 }

// Mode says how a batch's calls run.
type Mode int

const (
	// Capture keeps what calls write to sys.stdout/sys.stderr (SlotView.Logs).
	Capture Mode = C.SKY_CAPTURE
	// Untrusted runs calls under the audit hook: no process creation, no
	// signals to other processes, no ctypes, no writes outside AllowWrites.
	Untrusted Mode = C.SKY_UNTRUSTED
)

// CwdMoved reports, once, that Python code changed the process's working
// directory (os.chdir, os.fchdir) since the last call. A C extension calling
// chdir(2) itself goes unseen.
func CwdMoved() bool { return C.sky_take_cwd_moved() != 0 }

// Protect makes Python's os.kill and os.killpg refuse, with PermissionError,
// to signal process pid, its process group pgid or every process (-1),
// whichever thread calls them: a worker process protects its parent, whose
// SIGTERM or SIGINT would stop the whole run as a user's Ctrl-C does.
// Signals sent another way (a kill command, ctypes) are not seen.
func Protect(pid, pgid int) { C.sky_protect(C.long(pid), C.long(pgid)) }

// AllowWrites lets untrusted calls write under dir (process-wide).
func AllowWrites(dir string) error {
	cd := C.CString(dir)
	defer C.free(unsafe.Pointer(cd))
	if C.sky_allow_writes(cd) != 0 {
		return fmt.Errorf("cpython: cannot allow writes to %s: no such directory", dir)
	}
	return nil
}

// BatchArgs is the arguments of a batch: every argument value encoded one
// after another in Buf, Offsets[i*nargs+k] where case i's argument k starts,
// and IDs naming each value in an ArgCache (-1: not cached).
type BatchArgs struct {
	Buf     []byte   // the argument values, encoded one after another
	Offsets []uint64 // where each argument starts in Buf, nargs per case
	IDs     []int32  // each argument's ArgCache id (-1: not cached); nil: none cached

	pending []pendingID // ids ArgCache.Resolve has yet to look up
}

// pendingID is an argument ArgCache.AppendEncoded appended: where its id
// goes, and what to look up.
type pendingID struct {
	at   int // in IDs
	hash uint64
	enc  []byte
}

// Reset empties args, keeping their memory.
func (a *BatchArgs) Reset() {
	clear(a.pending) // their values are not kept alive
	a.Buf, a.Offsets, a.IDs, a.pending = a.Buf[:0], a.Offsets[:0], a.IDs[:0], a.pending[:0]
}

// Truncate cuts args back to their first n arguments, whose values end at
// buf in Buf: an argument that failed, and the case's others, are dropped.
func (a *BatchArgs) Truncate(buf, n int) {
	a.Buf, a.Offsets, a.IDs = a.Buf[:buf], a.Offsets[:n], a.IDs[:n]
	k := len(a.pending)
	for k > 0 && a.pending[k-1].at >= n {
		k--
	}
	clear(a.pending[k:])
	a.pending = a.pending[:k]
}

// ScoreBatch calls fn on every pending case of b under one GIL hold, with
// nargs arguments per case from args. Case i's token is tokenBase+i, and
// native callbacks see context with case index i. Once budget has passed it
// stops starting cases and returns, leaving the rest pending. It returns how
// many cases it finished. cache may be nil.
//
// With run set, each case is a program evaluation: its arguments are
// (artifact, input[, expected]), run(artifact, input) makes the output and
// fn(input, output[, expected]) scores it; see SlotView.
func (c *Caller) ScoreBatch(b *Batch, fn, run *Object, nargs int, args *BatchArgs, cache *ArgCache,
	tokenBase uint64, mode Mode, context uintptr, budget time.Duration) int {
	if len(args.Offsets) != b.n*nargs || (args.IDs != nil && len(args.IDs) != len(args.Offsets)) {
		panic("cpython: ScoreBatch needs one offset and id per argument")
	}
	cb := b.ptr()
	cb.budget_ns = C.int64_t(budget)
	p, n := cbytes(args.Buf)
	var op *C.size_t
	if len(args.Offsets) > 0 {
		op = (*C.size_t)(unsafe.Pointer(&args.Offsets[0]))
	}
	var ip *C.int32_t
	if len(args.IDs) > 0 {
		ip = (*C.int32_t)(unsafe.Pointer(&args.IDs[0]))
	}
	var cc *C.sky_argcache
	if cache != nil {
		cc = cache.objects()
	}
	var rp *C.PyObject
	if run != nil {
		rp = run.ptr()
	}
	done := C.sky_score_batch(c.ptr(), cb, fn.ptr(), rp, C.int(nargs), p, n, op, ip, cc, C.uint64_t(tokenBase),
		C.int(mode), C.uintptr_t(context))
	runtime.KeepAlive(args)
	return int(done)
}

// ArgCache gives repeated argument values ids, so the Python objects built
// for them are reused across calls (see sky_argcache), and remembers the
// encoding of repeated JSON texts. A value is admitted the second time it is
// seen: a stream of values that never repeat costs a little bookkeeping and
// no memory. Safe for concurrent use.
type ArgCache struct {
	c        atomic.Pointer[C.sky_argcache] // made on first use
	closed   atomic.Bool
	mu       sync.Mutex
	ids      map[string]int32       // encoded value -> id
	json     map[uint64]jsonMemo    // hash of a JSON text -> the text, its encoding and id
	inJSON   *[jsonBits / 64]uint64 // a bit per hash that json may hold: a text never kept skips the map
	seen     *[seenSlots]uint64     // hashes seen once (sawBefore); AppendEncoded also marks kept ones
	seed     maphash.Seed
	bytes    int
	maxBytes int
	touched  uint64 // Resolve's prefetching loads, kept
}

type jsonMemo struct {
	text string
	enc  []byte
	id   int32
}

// seenSlots is the size of the first-sight table (512 KiB): one hash a
// slot, the newest sighting winning its slot unless a kept value holds it.
// A slot lost to another value only delays a value's admission (or, to a
// kept one, prevents it); a hash match of two values only admits one a
// sighting early.
const (
	seenBits  = 16
	seenSlots = 1 << seenBits
)

// jsonBits sizes inJSON (128 KiB): the map is looked in only for a hash
// whose bit is set, so most texts (each case's own, never kept) cost a bit
// test instead of a map lookup, which missed the cache.
const jsonBits = 1 << 20

func jsonBit(h uint64) (word int, mask uint64) {
	b := h >> 44 // the top 20 bits
	return int(b / 64), 1 << (b % 64)
}

// sawBefore reports whether hash h was seen before and forgets it if so, or
// notes it: one load and one store, where a set that grows and is cleared
// cost a map insert (and, every 65,536 values, a rehash) a value. It leaves
// a slot that marks a kept value alone (see AppendEncoded).
func (a *ArgCache) sawBefore(h uint64) bool {
	h &^= 1
	slot := &a.seen[h%seenSlots]
	if *slot == h {
		*slot = 0
		return true
	}
	if *slot&1 == 0 {
		*slot = h
	}
	return false
}

// NewArgCache keeps at most maxBytes of values; later ones are not cached.
func NewArgCache(maxBytes int) (*ArgCache, error) {
	return &ArgCache{ids: map[string]int32{}, json: map[uint64]jsonMemo{}, inJSON: new([jsonBits / 64]uint64),
		seen: new([seenSlots]uint64), seed: maphash.MakeSeed(), maxBytes: maxBytes}, nil
}

// objects is the C cache, or nil when it cannot be made (the batch then
// runs uncached).
func (a *ArgCache) objects() *C.sky_argcache {
	if a.closed.Load() {
		panic("cpython: ArgCache used after Close")
	}
	if c := a.c.Load(); c != nil {
		return c
	}
	c := C.sky_argcache_new()
	if c == nil {
		return nil
	}
	if !a.c.CompareAndSwap(nil, c) {
		C.sky_argcache_free(c) // another worker made it first
	}
	return a.c.Load()
}

// ID returns the id of an encoded value, or -1 when it is not cached (seen
// for the first time, or the cache is full).
func (a *ArgCache) ID(value []byte) int32 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.idLocked(value)
}

func (a *ArgCache) idLocked(value []byte) int32 {
	if id, ok := a.ids[string(value)]; ok {
		return id
	}
	if !a.sawBefore(maphash.Bytes(a.seed, value)) {
		return -1
	}
	return a.keep(value)
}

// keep returns the id of an encoded value, admitting it when it is not
// kept yet; -1 when the cache has no room for it.
func (a *ArgCache) keep(enc []byte) int32 {
	if id, ok := a.ids[string(enc)]; ok {
		return id
	}
	if a.bytes+len(enc) > a.maxBytes || len(a.ids) >= math.MaxInt32 {
		return -1
	}
	id := int32(len(a.ids))
	a.ids[string(enc)] = id
	a.bytes += len(enc)
	return id
}

// AppendJSON transcodes a JSON text onto dst (AppendJSON) and returns the
// value's id in the cache, -1 when it is not cached. A text seen for the
// first time costs one hash more than transcoding it: most values (a
// model's outputs, each case's own input) never come again, and keeping
// them would cost more than decoding them. Seen again, it is kept (up to
// maxBytes), and from then on its encoding is copied rather than made, and
// its Python object reused.
func (a *ArgCache) AppendJSON(dst, text []byte) ([]byte, int32, error) {
	h := maphash.Bytes(a.seed, text)
	word, bit := jsonBit(h)
	a.mu.Lock()
	if a.inJSON[word]&bit != 0 {
		if m, ok := a.json[h]; ok && m.text == string(text) {
			a.mu.Unlock()
			return append(dst, m.enc...), m.id, nil
		}
	}
	again := a.sawBefore(h)
	a.mu.Unlock()
	start := len(dst)
	dst, err := AppendJSON(dst, text)
	if err != nil || !again {
		return dst, -1, err
	}
	enc := dst[start:]
	a.mu.Lock()
	defer a.mu.Unlock()
	id := a.keep(enc)
	if id < 0 {
		return dst, -1, nil
	}
	if a.bytes+len(text)+len(enc) <= a.maxBytes {
		a.json[h] = jsonMemo{text: string(text), enc: bytes.Clone(enc), id: id}
		a.inJSON[word] |= bit
		a.bytes += len(text) + len(enc)
	}
	return dst, id, nil
}

// AppendEncoded appends a value already transcoded (SplitObjectEncoding)
// to args.Buf, for the argument whose id args.IDs takes next; Resolve looks
// the ids up later, a batch's at once. AppendJSON's admission holds (the
// second sighting), one first-sight slot a value: the slot also marks a
// kept value (the hash with its low bit set), and the ids map is read only
// for a value so marked, which it names exactly. A first sighting does not
// take a kept value's slot, so a kept value is found at every sighting; a
// new value whose slot a kept one holds is not admitted. Each slot is a
// cache miss (Python runs between batches): a batch's misses overlap in
// Resolve, where one at a time they cost 150 ns each.
func (a *ArgCache) AppendEncoded(args *BatchArgs, v *Encoded) {
	args.Buf = append(args.Buf, v.b...)
	args.pending = append(args.pending, pendingID{at: len(args.IDs), hash: maphash.Bytes(a.seed, v.b) &^ 1, enc: v.b})
}

// Resolve sets the ids of the arguments AppendEncoded appended to args.
func (a *ArgCache) Resolve(args *BatchArgs) {
	if len(args.pending) == 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	var touch uint64
	for _, p := range args.pending { // independent loads: their misses overlap
		touch |= a.seen[p.hash>>(64-seenBits)]
	}
	a.touched = touch
	for _, p := range args.pending {
		args.IDs[p.at] = a.encodedID(p.hash, p.enc)
	}
	clear(args.pending)
	args.pending = args.pending[:0]
}

// encodedID is the id of an encoding whose hash (low bit clear) is h, or
// -1; the first-sight slot notes the sighting (see AppendEncoded).
func (a *ArgCache) encodedID(h uint64, enc []byte) int32 {
	slot := &a.seen[h>>(64-seenBits)]
	switch *slot {
	case h | 1:
		if id, ok := a.ids[string(enc)]; ok {
			return id
		}
		return -1 // another value with the same hash
	case h:
		id := a.keep(enc)
		if id < 0 {
			*slot = 0
			return -1
		}
		*slot = h | 1
		return id
	}
	if *slot&1 == 0 {
		*slot = h
	}
	return -1
}

// Close drops the cached objects (taking the GIL). Idempotent; not while a
// ScoreBatch uses the cache.
func (a *ArgCache) Close() {
	a.closed.Store(true)
	if c := a.c.Swap(nil); c != nil {
		C.sky_argcache_free(c)
	}
}
