package engine

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/skynetml/skynet/cpython"
)

// internTable shares the Go strings made for repeated short texts from Python
// (feedback such as "Correct.", score names), so a stream of results does not
// allocate one string per case. It is a direct-mapped table: a collision
// only replaces an entry. Safe for concurrent use without locks.
type internTable struct {
	seed  uint64
	slots [internSlots]atomic.Pointer[string]
}

const (
	internSlots = 1 << 10
	internMax   = 128 // longer texts are rarely repeated: always a new string
)

func newInternTable() *internTable { return &internTable{seed: rand.Uint64()} }

// hash mixes the length with the first, middle and last 8 bytes of b: on
// these short texts it saved ~16 of the stream's ~175 ns per case against
// maphash. Texts it confuses only miss the table.
func (t *internTable) hash(b []byte) uint64 {
	n := len(b)
	var first, mid, last uint64
	if n >= 8 {
		first = binary.LittleEndian.Uint64(b)
		mid = binary.LittleEndian.Uint64(b[n/2-4:])
		last = binary.LittleEndian.Uint64(b[n-8:])
	} else {
		for i, c := range b {
			first |= uint64(c) << (8 * i)
		}
	}
	h := (first ^ t.seed) * 0x9e3779b97f4a7c15
	h = (h ^ mid ^ uint64(n)) * 0xc2b2ae3d27d4eb4f
	h = (h ^ last) * 0x165667b19e3779f9
	return h ^ h>>32
}

// make returns b as a string, the shared one when b was seen recently.
func (t *internTable) make(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if len(b) > internMax {
		return string(b)
	}
	slot := &t.slots[t.hash(b)&(internSlots-1)]
	if p := slot.Load(); p != nil && *p == string(b) {
		return *p
	}
	s := string(b)
	slot.Store(&s)
	return s
}

// jsonMemo remembers, for one stream, the encodings of the JSON texts it
// met, keyed by where the text lives: a dataset's cases hand the same
// json.RawMessage over and over, so a hit costs a comparison instead of the
// shared cache's lock and hash. The text is compared in full, so a caller
// reusing the memory for other text gets a miss, never a stale value.
type jsonMemo struct {
	slots [jsonMemoSlots]jsonMemoEntry
}

const jsonMemoSlots = 256

// getMemo returns a cleared memo for a stream; putMemo keeps it for the
// next (a few, so concurrent streams need not allocate).
func (e *Engine) getMemo() *jsonMemo {
	if m := e.memos.take(&e.spareMu); m != nil {
		*m = jsonMemo{}
		return m
	}
	return new(jsonMemo)
}

func (e *Engine) putMemo(m *jsonMemo) { e.memos.keep(&e.spareMu, m) }

// spares keeps up to max finished things for reuse, guarded by the
// engine's spareMu: streams then allocate next to nothing. The engine keeps
// them rather than a sync.Pool, because a GC empties a sync.Pool, and
// faulting fresh pages back in costs more here than the cases they serve.
type spares[T any] struct {
	items []*T
	max   int
}

func (l *spares[T]) take(mu *sync.Mutex) *T {
	mu.Lock()
	defer mu.Unlock()
	k := len(l.items)
	if k == 0 {
		return nil
	}
	x := l.items[k-1]
	l.items = l.items[:k-1]
	return x
}

// keep reports false when the list is full (or closed: max 0).
func (l *spares[T]) keep(mu *sync.Mutex, x *T) bool {
	mu.Lock()
	defer mu.Unlock()
	if len(l.items) >= l.max {
		return false
	}
	l.items = append(l.items, x)
	return true
}

type jsonMemoEntry struct {
	at   *byte
	text string // the text when it was encoded
	enc  []byte // shared: read only
	id   int32
}

// appendEncoded transcodes raw onto dst and returns its ArgCache id, as
// cache.AppendJSON, remembering the encodings of values the cache keeps by
// where their text is: a caller that scores the same Case values again
// (a benchmark, an optimizer's fixed devset) then only copies them. A nil
// memo asks the cache.
func (m *jsonMemo) appendEncoded(dst []byte, cache *cpython.ArgCache, raw []byte) ([]byte, int32, error) {
	if m == nil {
		return cache.AppendJSON(dst, raw)
	}
	at := unsafe.SliceData(raw)
	slot := &m.slots[(uintptr(unsafe.Pointer(at))>>3)%jsonMemoSlots]
	if slot.at == at && slot.text == string(raw) {
		return append(dst, slot.enc...), slot.id, nil
	}
	start := len(dst)
	dst, id, err := cache.AppendJSON(dst, raw)
	if err == nil && id >= 0 { // only values the cache keeps: a one-off text is not worth a copy
		*slot = jsonMemoEntry{at: at, text: string(raw), enc: bytes.Clone(dst[start:]), id: id}
	}
	return dst, id, err
}
