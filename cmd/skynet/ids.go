package main

// Case ids: each case's result is found by its id (--resume, merge), so
// a repeated id is checked as the input is read: the later line gets an
// input error as its result (every line still has one result), and a
// dataset, read whole before it is evaluated, is refused.

import (
	"fmt"
	"hash/maphash"
)

// duplicateIDError is a case id that is already the id of an earlier case.
type duplicateIDError struct {
	id         string
	line, prev int
	what       string // "line" or "row"
}

func (e *duplicateIDError) Error() string {
	return fmt.Sprintf("%s %d: %s", e.what, e.line, e.message())
}

// message is Error without the line it is on.
func (e *duplicateIDError) message() string {
	return fmt.Sprintf("case id %q is also the id of %s %d (a case without an id is named by its %s number); ids must be unique, since results are found by id",
		e.id, e.what, e.prev, e.what)
}

// idSet finds repeated case ids: it keeps a 64-bit hash of each and the
// line it came from, not the id itself, in an open-addressed table, so that
// an id costs one probe (a map took a lookup and an insert: 8% of skynet
// score's own CPU on a cheap grader).
type idSet struct {
	seed  maphash.Seed
	slots []idSlot // a power of two, at most half full; hash 0 marks a free slot
	n     int
}

type idSlot struct {
	hash uint64
	line int
}

// newIDSet returns a set for about hint ids (0: unknown), sized at once so
// that it does not grow and rehash as a large file is read.
func newIDSet(hint int) *idSet {
	size := 1024
	for size < 2*hint {
		size *= 2
	}
	return &idSet{seed: maphash.MakeSeed(), slots: make([]idSlot, size)}
}

// add records id at line; a repeat returns the line it was first seen on.
func (s *idSet) add(id string, line int) (prev int, dup bool) {
	h := maphash.String(s.seed, id) | 1 // never 0
	if 2*(s.n+1) > len(s.slots) {
		s.grow()
	}
	sl := s.slot(h)
	if sl.hash == h {
		return sl.line, true
	}
	*sl = idSlot{hash: h, line: line}
	s.n++
	return 0, false
}

// slot is h's slot, or the free one where it goes.
func (s *idSet) slot(h uint64) *idSlot {
	mask := uint64(len(s.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		if sl := &s.slots[i]; sl.hash == h || sl.hash == 0 {
			return sl
		}
	}
}

func (s *idSet) grow() {
	old := s.slots
	s.slots = make([]idSlot, 2*len(old))
	for _, sl := range old {
		if sl.hash != 0 {
			*s.slot(sl.hash) = sl
		}
	}
}
