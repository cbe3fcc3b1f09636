package pool

// The frames on the pipes between a pool and its worker processes: the
// parent writes on the worker's fd 3, the worker on its fd 4.

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/skynetml/skynet/caseio"
	"github.com/skynetml/skynet/engine"
)

// protocol is the version of the frames below. The parent puts it in the
// worker's environment and the worker echoes it in its hello, so a binary
// rebuilt (or replaced) while a run used it fails with a clear message
// instead of misreading frames.
const protocol = "skynet-pool/3"

// A frame is a type byte, the payload's length and CRC-32C (little-endian
// uint32s), then the payload. The CRC tells a metric's stray writes on the
// worker's descriptors from what the worker sent.
const (
	frameJob      byte = 'J' // parent: what to load (JSON job); the first frame
	frameCase     byte = 'C' // parent: one case: line number (uint32), artifact (uint32, 0: score only), case line
	frameArtifact byte = 'A' // parent: an artifact for run: id (uint32), then its JSON value
	frameCheck    byte = 'Q' // parent: run the contract check on these case lines (JSON array of strings)
	frameReply    byte = 'r' // parent: a model call's outcome: call id (uint64), JSON modelReply
	frameCancel   byte = 'X' // parent: stop; cases taken get canceled results
	frameEnd      byte = 'E' // parent: no more cases; the pipe stays open for a cancel
	frameHello    byte = 'H' // worker: the metric loaded (JSON hello)
	frameResults  byte = 'R' // worker: result records (appendRecord)
	frameCall     byte = 'L' // worker: a model call to make: call id (uint64), JSON modelCall
	frameWedged   byte = 'W' // worker: this case holds its scoring thread past its timeout
	frameChecks   byte = 'K' // worker: the contract check's checks (JSON)
	frameFailed   byte = 'F' // worker: the metric did not load (JSON failure)
	frameNotice   byte = 'N' // worker: something the user must hear once (text)
	frameDone     byte = 'D' // worker: every case taken has its result
	framePing     byte = 'P' // worker: still alive; how many case frames it has read (uint64)
)

const (
	frameHeader = 9
	maxFrame    = 1 << 30
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrBadFrame means the bytes on a pipe are not frames: something other
// than the peer wrote to it.
var errBadFrame = errors.New("the channel to the Python process was corrupted")

var errShortRecord = fmt.Errorf("%w: a result record is cut short", errBadFrame)

// openFrame appends a frame header to b; closeFrame fills it in once the
// payload that follows it is appended.
func openFrame(b []byte, typ byte) ([]byte, int) {
	at := len(b)
	b = append(b, typ, 0, 0, 0, 0, 0, 0, 0, 0)
	return b, at
}

func closeFrame(b []byte, at int) {
	payload := b[at+frameHeader:]
	binary.LittleEndian.PutUint32(b[at+1:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(b[at+5:], crc32.Checksum(payload, castagnoli))
}

func appendFrame(b []byte, typ byte, payload ...[]byte) []byte {
	b, at := openFrame(b, typ)
	for _, p := range payload {
		b = append(b, p...)
	}
	closeFrame(b, at)
	return b
}

// frameReader reads frames; a payload is valid until the next call.
type frameReader struct {
	r   *bufio.Reader
	hdr [frameHeader]byte
	buf []byte
}

func newFrameReader(r io.Reader) *frameReader {
	return &frameReader{r: bufio.NewReaderSize(r, 1<<16)}
}

func (fr *frameReader) next() (byte, []byte, error) {
	if _, err := io.ReadFull(fr.r, fr.hdr[:]); err != nil {
		if err == io.ErrUnexpectedEOF {
			return 0, nil, fmt.Errorf("%w: a torn frame header", errBadFrame)
		}
		return 0, nil, err // io.EOF: the peer closed its end
	}
	typ := fr.hdr[0]
	n := binary.LittleEndian.Uint32(fr.hdr[1:])
	if !knownFrame(typ) || n > maxFrame {
		return 0, nil, fmt.Errorf("%w: a frame of type %q and %d bytes", errBadFrame, typ, n)
	}
	if cap(fr.buf) < int(n) {
		fr.buf = make([]byte, n)
	}
	p := fr.buf[:n]
	if _, err := io.ReadFull(fr.r, p); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return 0, nil, err // the reader stopped waiting (see start), not a torn frame
		}
		return 0, nil, fmt.Errorf("%w: a torn frame", errBadFrame)
	}
	if crc32.Checksum(p, castagnoli) != binary.LittleEndian.Uint32(fr.hdr[5:]) {
		return 0, nil, fmt.Errorf("%w: a frame's checksum does not match", errBadFrame)
	}
	return typ, p, nil
}

func knownFrame(t byte) bool {
	switch t {
	case frameJob, frameCase, frameArtifact, frameCheck, frameReply, frameCancel, frameEnd,
		frameHello, frameResults, frameCall, frameWedged, frameChecks, frameFailed, frameNotice, frameDone, framePing:
		return true
	}
	return false
}

// frameWriter is the worker's side of the results pipe. Results are
// gathered into one frame and written by a flusher goroutine: at once when
// it is idle or holds the result of every case read (nothing more is
// coming that the parent waits for), otherwise at most every flushGap, so
// a crash loses at most the results of the last flushGap and a fast run
// pays one write for many results.
type frameWriter struct {
	// casesRead counts the case frames the worker has read, for its pings:
	// the parent compares it with what it sent (see Pool.ping).
	casesRead atomic.Uint64
	// answered counts the results added: when it reaches casesRead, the
	// parent has nothing more to wait for from this process.
	answered atomic.Uint64

	mu      sync.Mutex
	buf     []byte // whole frames, then the open results frame at open
	open    int    // start of the open results frame in buf, or -1
	spare   []byte
	err     error
	kick    chan struct{}
	stop    chan struct{}
	stopped chan struct{}
	w       io.Writer
}

const (
	flushGap  = 2 * time.Millisecond
	pingEvery = 500 * time.Millisecond
)

// exitLostChannel is how a worker ends when it cannot write to its parent:
// the metric closed or broke its file descriptors.
const exitLostChannel = 199

func newFrameWriter(w io.Writer) *frameWriter {
	fw := &frameWriter{w: w, open: -1, kick: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{})}
	go fw.flusher()
	return fw
}

// addResult appends r to the open results frame.
func (fw *frameWriter) addResult(r engine.Result, withRun bool) {
	fw.mu.Lock()
	if fw.open < 0 {
		fw.buf, fw.open = openFrame(fw.buf, frameResults)
	}
	fw.buf = appendRecord(fw.buf, r, withRun)
	fw.mu.Unlock()
	fw.answered.Add(1)
	fw.wake()
}

// send queues a whole frame behind the results added so far.
func (fw *frameWriter) send(typ byte, payload ...[]byte) {
	fw.mu.Lock()
	fw.closeOpen()
	fw.buf = appendFrame(fw.buf, typ, payload...)
	fw.mu.Unlock()
	fw.wake()
}

func (fw *frameWriter) wake() {
	select {
	case fw.kick <- struct{}{}:
	default:
	}
}

func (fw *frameWriter) closeOpen() {
	if fw.open >= 0 {
		closeFrame(fw.buf, fw.open)
		fw.open = -1
	}
}

// flush writes what is queued; it reports the first write error.
func (fw *frameWriter) flush() error {
	fw.mu.Lock()
	fw.closeOpen()
	b := fw.buf
	fw.buf = fw.spare[:0]
	err := fw.err
	fw.mu.Unlock()
	if len(b) > 0 && err == nil {
		_, err = fw.w.Write(b)
	}
	fw.mu.Lock()
	if fw.err == nil {
		fw.err = err
	}
	fw.spare = b[:0]
	fw.mu.Unlock()
	return err
}

func (fw *frameWriter) flusher() {
	defer close(fw.stopped)
	ping := time.NewTimer(pingEvery)
	defer ping.Stop()
	var last time.Time
	for {
		select {
		case <-fw.stop:
			return
		case <-fw.kick:
			// At once after a pause, or when every case read is answered
			// (a lone request waits on it); under load, results added
			// meanwhile go in the next write.
			if gap := time.Since(last); gap < flushGap && fw.answered.Load() < fw.casesRead.Load() {
				time.Sleep(flushGap - gap)
			}
			if fw.flush() != nil {
				os.Exit(exitLostChannel) // nothing this process does can reach the parent now
			}
			last = time.Now()
		case <-ping.C:
			fw.send(framePing, binary.LittleEndian.AppendUint64(nil, fw.casesRead.Load()))
		}
		ping.Reset(pingEvery)
	}
}

// close sends a last frame and everything before it, and stops the flusher.
func (fw *frameWriter) close(typ byte, payload ...[]byte) error {
	close(fw.stop)
	<-fw.stopped
	fw.send(typ, payload...)
	return fw.flush()
}

// Record flags.
const (
	recRunMS  = 1 << iota // a measured run time follows the kind
	recCost               // a measured run cost follows
	recWarned             // the result has warnings
)

// appendRecord writes one result as the parent needs it: what a summary
// counts, and the results line itself (AppendResult).
//
//	id (uint32 length, bytes), flags (byte), score (float64), duration (int64 ns),
//	error kind (byte length, bytes), [run ms], [cost], named scores
//	(uint32 count; each uint32 length, name, float64), line (uint32 length, bytes)
//
// Lengths are 32 bits: an id or a score name as long as a case line may be
// crosses whole (a 16-bit length once cut a 64 KiB id, and the parent took
// its result for another case's).
func appendRecord(b []byte, r engine.Result, withRun bool) []byte {
	b = appendLenString(b, r.ID)
	flags := byte(0)
	if r.Observation.RunMS != nil {
		flags |= recRunMS
	}
	if r.Observation.CostUSD != nil {
		flags |= recCost
	}
	if len(r.Warnings) > 0 {
		flags |= recWarned
	}
	b = append(b, flags)
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(r.Score))
	b = binary.LittleEndian.AppendUint64(b, uint64(r.Duration))
	kind := ""
	if r.Err != nil {
		kind = string(r.Err.Kind)
	}
	b = append(b, byte(len(kind)))
	b = append(b, kind...)
	if flags&recRunMS != 0 {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(*r.Observation.RunMS))
	}
	if flags&recCost != 0 {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(*r.Observation.CostUSD))
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(r.Scores)))
	for _, k := range caseio.ScoreNames(r) {
		b = appendLenString(b, k)
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(r.Scores[k]))
	}
	at := len(b)
	b = append(b, 0, 0, 0, 0)
	b = caseio.AppendResult(b, r, withRun)
	binary.LittleEndian.PutUint32(b[at:], uint32(len(b)-at-4))
	return b
}

// appendLenString writes a string with its uint32 length (a frame is at
// most maxFrame bytes, so any string that fits one fits this).
func appendLenString(b []byte, s string) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

// Record is one case's result as a worker sent it: what a summary counts,
// and Line, the results line (AppendResult's JSON). Its byte slices point
// into a buffer it shares with the other records of its frame.
type Record struct {
	ID       []byte
	Score    float64
	Duration time.Duration    // the score (and run) call's wall time
	Kind     engine.ErrorKind // "" when scored
	RunMS    float64          // the measured run time, when HasRunMS
	CostUSD  float64          // the measured run cost, when HasCost
	HasRunMS bool
	HasCost  bool
	Warned   bool   // the result has warnings (side-info keys dropped)
	Line     []byte // the results line, without a newline
	scores   []byte // the named scores, as appendRecord wrote them
}

// nextRecord decodes the record at the start of p and returns the rest.
func nextRecord(p []byte, r *Record) ([]byte, error) {
	take := func(n int) []byte {
		if n > len(p) {
			return nil
		}
		s := p[:n:n]
		p = p[n:]
		return s
	}
	str := func() ([]byte, bool) {
		l := take(4)
		if l == nil {
			return nil, false
		}
		s := take(int(binary.LittleEndian.Uint32(l)))
		return s, s != nil
	}
	u64 := func() (uint64, bool) {
		s := take(8)
		if s == nil {
			return 0, false
		}
		return binary.LittleEndian.Uint64(s), true
	}
	var ok bool
	*r = Record{}
	if r.ID, ok = str(); !ok {
		return nil, errShortRecord
	}
	fl := take(1)
	if fl == nil {
		return nil, errShortRecord
	}
	r.Warned = fl[0]&recWarned != 0
	v, ok := u64()
	if !ok {
		return nil, errShortRecord
	}
	r.Score = math.Float64frombits(v)
	if v, ok = u64(); !ok {
		return nil, errShortRecord
	}
	r.Duration = time.Duration(v)
	kl := take(1)
	if kl == nil {
		return nil, errShortRecord
	}
	kind := take(int(kl[0]))
	if kind == nil {
		return nil, errShortRecord
	}
	r.Kind = engine.ErrorKind(kind)
	if fl[0]&recRunMS != 0 {
		if v, ok = u64(); !ok {
			return nil, errShortRecord
		}
		r.RunMS, r.HasRunMS = math.Float64frombits(v), true
	}
	if fl[0]&recCost != 0 {
		if v, ok = u64(); !ok {
			return nil, errShortRecord
		}
		r.CostUSD, r.HasCost = math.Float64frombits(v), true
	}
	scoresAt := p
	nl := take(4)
	if nl == nil {
		return nil, errShortRecord
	}
	for i := 0; i < int(binary.LittleEndian.Uint32(nl)); i++ {
		if _, ok := str(); !ok {
			return nil, errShortRecord
		}
		if take(8) == nil {
			return nil, errShortRecord
		}
	}
	r.scores = scoresAt[:len(scoresAt)-len(p)]
	ll := take(4)
	if ll == nil {
		return nil, errShortRecord
	}
	if r.Line = take(int(binary.LittleEndian.Uint32(ll))); r.Line == nil {
		return nil, errShortRecord
	}
	return p, nil
}

// EachScore calls f with each named score of the record.
func (r *Record) EachScore(f func(name []byte, v float64)) {
	p := r.scores
	if len(p) < 4 {
		return
	}
	n := int(binary.LittleEndian.Uint32(p))
	p = p[4:]
	for i := 0; i < n; i++ {
		l := int(binary.LittleEndian.Uint32(p))
		name := p[4 : 4+l]
		v := math.Float64frombits(binary.LittleEndian.Uint64(p[4+l:]))
		f(name, v)
		p = p[4+l+8:]
	}
}

// RecordOf makes the record of a result made in this process (a case that
// never reached a worker: a bad line, a crash, a cancellation).
func RecordOf(r engine.Result, withRun bool) Record {
	var rec Record
	if _, err := nextRecord(appendRecord(nil, r, withRun), &rec); err != nil {
		panic("pool: a record does not decode: " + err.Error())
	}
	return rec
}
