package main

// skynet score and skynet eval run the engine in a child process: the same
// binary, told so by its environment (childEnv). This process reads the
// cases, owns the results, the progress bar, the summary and the signals,
// and runs no Python; so a metric that kills its process (a segfault,
// os._exit, abort) or wedges its interpreter loses nothing. When a child
// dies, the cases it had taken without answering are suspects: a new child
// scores them alone, one at a time, and one that kills that child too gets
// a "crash" result. Then normal scoring resumes.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/skynetml/skynet/engine"
	"github.com/skynetml/skynet/llm"
)

// childEnv marks a child: "1" scores normally, "solo" with one interpreter
// and one worker (the parent then sends one case at a time).
const childEnv = "SKYNET_CHILD"

const (
	childWindow = 2048 // cases in flight to a child
	sendChunk   = 256  // cases per write to a child
	// soloBudget bounds the suspects scored alone after a crash: the case
	// that crashed is nearly always among the first.
	soloBudget = 256
	// killGrace is how long past its own limits a child may take before it
	// is killed: the engine's interrupt grace and a poll, with room.
	killGrace = 2 * time.Second
	// silentLimit: a child that has sent nothing (it pings every
	// pingEvery) for this long is stopped or frozen.
	silentLimit = 10 * time.Second
	cancelGrace = 5 * time.Second
	// drainLimit bounds reading what a dead child left in its pipes (a
	// grandchild outside its process group may hold them open).
	drainLimit = 2 * time.Second
	// DefaultMaxCrashes is how many cases in a row may crash the child
	// before the rest of the run is given up.
	defaultMaxCrashes = 20
)

// entry is one case of a run, from when it is read until its result is written.
type entry struct {
	id   string
	line int    // score: the line number; eval: the dataset index
	raw  []byte // score: the case's line
	obs  engine.Observation
	res  *engine.Result // a result made here (input error, crash, cancel)
	// sent says the current child has it (or had it, when it died).
	sent bool
}

// supervisor runs one score or eval pass through child processes.
type supervisor struct {
	cmd         string // "score" or "eval", for messages
	shard       shardSpec
	args        []string // the subcommand and its flags, for each child
	withRun     bool     // eval: results carry output and observation
	timeout     time.Duration
	loadTimeout time.Duration
	maxCrashes  int
	stderr      io.Writer
	bar         *progress

	entries <-chan *entry // from the case reader; closed at the end of the input
	readErr func() error  // why the case reader stopped early, after entries closed
	noCases func() string // what to say when every case was an input error
	noInput func() string // at the end of the input: why it held no case at all, or ""

	out      io.Writer
	wbuf     []byte
	lastOut  time.Time
	writeErr error
	st       *stats

	// queue holds the entries read and not yet written, in input order.
	// Those before next that are not resolved are with the current child.
	queue     []*entry
	next      int
	held      int // entries with the current child, not answered
	suspects  int // entries at the head of queue to score alone, one at a time
	inputDone bool

	interrupted os.Signal
	kept        mean // --resume: the scores of the results kept, for the summary
	loaded      bool // a child has loaded the metric once
	crashRun    int  // cases in a row that crashed
	deadRun     int  // children in a row that died without a result
	gaveUp      string
	restarts    int
	crashes     int
	wedges      int
	restartTime time.Duration
	models      modelTotals
	loadFailed  int // exit code when the metric never loaded
}

// child is one running child process.
type child struct {
	cmd      *exec.Cmd
	solo     bool
	started  time.Time
	frames   chan frameMsg
	frameErr error // why the frame reader stopped (after frames closed)
	exited   chan struct{}
	state    *os.ProcessState
	send     chan []*entry // to the sender; closed: no more cases
	cancel   chan struct{}
	tail     *stderrTail
	stderrIn chan struct{} // closed once the child's stderr is drained
	hello    bool
	done     bool // sent its done frame
	doneAt   time.Time
	reaped   bool   // killed for lingering after its done frame
	failed   int    // the exit code of a frameFailed, or -1
	wedged   string // the case it reported wedged
	lastWord time.Time
	models   modelUse
	killed   string // why the parent killed it
}

type frameMsg struct {
	typ     byte
	payload []byte
}

func (s *supervisor) run(ctx context.Context) int {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var sigOnce sync.Once
	var sig os.Signal
	go func() {
		for g := range sigs {
			sigOnce.Do(func() { sig = g; cancel() })
		}
	}()
	s.st = newStats()
	s.lastOut = time.Now()
	// This process keeps little alive (a window of cases), so the default
	// GC target would collect every few MB of lines read.
	defer debug.SetGCPercent(debug.SetGCPercent(800))
	for !s.finished() {
		if ctx.Err() != nil || s.gaveUp != "" {
			break
		}
		c, err := s.start(s.suspects > 0)
		if err != nil {
			fmt.Fprintf(s.stderr, "skynet %s: starting the Python process: %v\n", s.cmd, err)
			s.resolveRest(engine.KindCrash, "not scored: skynet could not start its Python process: "+err.Error())
			break
		}
		s.drive(ctx, c)
		if s.loadFailed != 0 {
			return s.loadFailed
		}
	}
	if ctx.Err() != nil {
		sigOnce.Do(func() {}) // sig is set before cancel
		s.interrupted = sig
		s.resolveRest(engine.KindCanceled, fmt.Sprintf("%s cancelled: interrupted (%v)", s.cmd, sig))
	} else if s.gaveUp != "" {
		s.resolveRest(engine.KindCrash, s.gaveUp)
	}
	s.flush(true)
	s.st.elapsed = time.Since(s.st.start)
	return 0
}

// finished says every case read has its result and no more will come.
func (s *supervisor) finished() bool { return s.inputDone && len(s.queue) == 0 }

// start starts a child; solo scores the suspects alone.
func (s *supervisor) start(solo bool) (*child, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	casesR, casesW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	resR, resW, err := os.Pipe()
	if err != nil {
		casesR.Close()
		casesW.Close()
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		for _, f := range []*os.File{casesR, casesW, resR, resW} {
			f.Close()
		}
		return nil, err
	}
	cmd := exec.Command(self, s.args...)
	mode := "1"
	if solo {
		mode = "solo"
	}
	cmd.Env = append(append([]string(nil), startEnv...), childEnv+"="+mode)
	cmd.Stdout, cmd.Stderr = errW, errW // the metric's C-level output goes to stderr
	cmd.ExtraFiles = []*os.File{casesR, resW}
	// Its own process group: a Ctrl-C at the terminal reaches this process
	// only, and killing the group takes what the metric forked with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	err = cmd.Start()
	casesR.Close()
	resW.Close()
	errW.Close()
	if err != nil {
		casesW.Close()
		resR.Close()
		errR.Close()
		return nil, err
	}
	c := &child{cmd: cmd, solo: solo, started: time.Now(), frames: make(chan frameMsg, 64), exited: make(chan struct{}),
		send: make(chan []*entry, childWindow), cancel: make(chan struct{}), tail: &stderrTail{}, stderrIn: make(chan struct{}),
		failed: -1, lastWord: time.Now()}
	go func() {
		defer close(c.frames)
		defer resR.Close()
		fr := newFrameReader(resR)
		for {
			typ, p, err := fr.next()
			if err != nil {
				if err != io.EOF {
					c.frameErr = err
				}
				return
			}
			c.frames <- frameMsg{typ, bytes.Clone(p)}
		}
	}()
	go func() {
		defer close(c.stderrIn)
		defer errR.Close()
		c.tail.copy(s.stderr, errR)
	}()
	go func() {
		cmd.Wait()
		c.state = cmd.ProcessState
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // what it forked, holding its pipes
		close(c.exited)
	}()
	go c.sender(casesW)
	return c, nil
}

// sender writes the cases it is given to the child, then the end frame,
// and the cancel frame whenever it comes. The pipe stays open after the
// last case so that a run whose every case was sent can still be cancelled.
func (c *child) sender(w *os.File) {
	defer w.Close()
	var buf []byte
	var num [4]byte
	send, cancel := c.send, c.cancel
	for send != nil || cancel != nil {
		select {
		case batch, ok := <-send:
			if !ok {
				if _, err := w.Write(appendFrame(nil, frameEnd, nil)); err != nil {
					return
				}
				send = nil
				continue
			}
			buf = buf[:0]
			for _, e := range batch {
				var at int
				buf, at = openFrame(buf, frameCase)
				num[0], num[1], num[2], num[3] = byte(e.line), byte(e.line>>8), byte(e.line>>16), byte(e.line>>24)
				buf = append(buf, num[:]...)
				buf = append(buf, e.raw...)
				closeFrame(buf, at)
			}
			if _, err := w.Write(buf); err != nil {
				return // the child is gone; its waiter reports it
			}
		case <-cancel:
			w.Write(appendFrame(nil, frameCancel, nil))
			cancel = nil
		case <-c.exited:
			return
		}
	}
}

// kill ends the child at once; why says what it did.
func (c *child) kill(why string) {
	if c.killed == "" {
		c.killed = why
	}
	syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
}

// drive feeds the child and writes its results until it ends.
func (s *supervisor) drive(ctx context.Context, c *child) {
	window := childWindow
	budget := 0
	if c.solo {
		window, budget = 1, min(s.suspects, soloBudget)
	}
	var soloSince time.Time // when the case the solo child has was sent
	var inputClosed, canceling bool
	var cancelAt time.Time
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	closeInput := func() {
		if !inputClosed {
			inputClosed = true
			close(c.send)
		}
	}
	for {
		// Hand the child what it may take.
		if c.hello && !inputClosed && !canceling {
			s.skipResolved()
			if !c.solo {
				s.readAvailable()
			}
			var batch []*entry
			// A write per case would wake the child per case: a short
			// chunk goes only when the child runs low or the input ended.
			for s.unanswered() < window && (c.solo || s.inputDone || len(s.queue)-s.next >= sendChunk || s.unanswered() < sendChunk) {
				if c.solo && budget == 0 {
					break
				}
				e := s.nextToSend(ctx, c.solo)
				if e == nil {
					break
				}
				e.sent = true
				s.held++
				batch = append(batch, e)
				if c.solo {
					budget--
					soloSince = time.Now()
				}
				if len(batch) == sendChunk {
					c.send <- batch
					batch = nil
				}
			}
			if len(batch) > 0 {
				c.send <- batch
			}
			// Nothing more to send: closing lets the child's last group go
			// (the engine waits for a full one until its input ends).
			if (c.solo && (budget == 0 || s.next >= s.suspects)) || (!c.solo && s.inputDone && s.next >= len(s.queue)) {
				closeInput()
			}
		}
		var entries <-chan *entry
		if c.hello && !inputClosed && !canceling && !c.solo && !s.inputDone && len(s.queue)-s.next < sendChunk && len(s.queue) < 2*childWindow {
			entries = s.entries // wait for input when it is short of a chunk to send
		}
		s.flush(len(c.frames) == 0)
		select {
		case m, ok := <-c.frames:
			if !ok {
				c.frames = nil
				if c.frameErr != nil {
					c.kill(c.frameErr.Error())
				}
				continue
			}
			c.lastWord = time.Now()
			s.handle(c, m)
			if c.solo && s.unanswered() == 0 {
				soloSince = time.Time{}
			}
		case e, ok := <-entries:
			if !ok {
				s.inputDone = true
				continue
			}
			s.queue = append(s.queue, e)
		case <-c.exited:
			s.ended(ctx, c)
			return
		case <-ctx.Done():
			if !canceling {
				canceling, cancelAt = true, time.Now()
				if c.hello {
					close(c.cancel)
				} else {
					c.kill("interrupted")
				}
			}
		case now := <-tick.C:
			switch {
			case c.done && now.Sub(c.doneAt) > cancelGrace:
				c.reaped = true
				c.kill("it did not exit after its last result")
			case canceling && now.Sub(cancelAt) > cancelGrace:
				c.kill("interrupted")
			case !c.hello && now.Sub(c.started) > s.loadTimeout: // nothing in the child bounds a load
				c.kill(fmt.Sprintf("loading the metric did not finish within %s (--load-timeout)", s.loadTimeout))
			case c.hello && s.unanswered() > 0 && now.Sub(c.lastWord) > silentLimit:
				c.kill(fmt.Sprintf("the Python process stopped answering (nothing for %s)", silentLimit))
			case c.solo && !soloSince.IsZero() && now.Sub(soloSince) > s.timeout+killGrace+silentLimit:
				c.kill(fmt.Sprintf("the case did not finish within %s", s.timeout+killGrace+silentLimit))
			}
		}
	}
}

// nextToSend returns the next entry for the child, reading one if none is
// queued; nil when there is none now.
func (s *supervisor) nextToSend(ctx context.Context, solo bool) *entry {
	for {
		if s.next < len(s.queue) {
			if solo && s.next >= s.suspects {
				return nil
			}
			e := s.queue[s.next]
			s.next++
			if e.res != nil {
				continue
			}
			return e
		}
		if solo || s.inputDone {
			return nil
		}
		select {
		case e, ok := <-s.entries:
			if !ok {
				s.inputDone = true
				return nil
			}
			s.queue = append(s.queue, e)
		default:
			return nil
		}
	}
}

// readAvailable queues what the case reader has ready, without waiting.
func (s *supervisor) readAvailable() {
	for !s.inputDone && len(s.queue) < 2*childWindow {
		select {
		case e, ok := <-s.entries:
			if !ok {
				s.inputDone = true
				return
			}
			s.queue = append(s.queue, e)
		default:
			return
		}
	}
}

// unanswered counts the entries the child has and has not answered.
func (s *supervisor) unanswered() int { return s.held }

// skipResolved writes the results at the head of the queue that are ready.
func (s *supervisor) skipResolved() {
	for len(s.queue) > 0 && s.queue[0].res != nil {
		e := s.queue[0]
		s.writeMade(e)
		s.pop()
	}
}

func (s *supervisor) pop() {
	s.queue[0] = nil
	s.queue = s.queue[1:]
	if s.next > 0 {
		s.next--
	}
	if s.suspects > 0 {
		s.suspects--
	}
	if len(s.queue) == 0 {
		s.queue = s.queue[:0:0] // let the old backing array go
	}
}

// handle acts on one frame from the child.
func (s *supervisor) handle(c *child, m frameMsg) {
	switch m.typ {
	case frameHello:
		c.hello = true
		if s.loaded {
			s.restartTime += time.Since(c.started)
		}
		s.loaded = true
	case frameResults:
		p := m.payload
		var r record
		for len(p) > 0 {
			var err error
			if p, err = nextRecord(p, &r); err != nil {
				c.kill(err.Error())
				return
			}
			s.skipResolved()
			// A bad line's id is the child's to say (QuickID reads less).
			if s.next == 0 || len(s.queue) == 0 || !s.queue[0].sent || (s.queue[0].id != string(r.id) && r.tally.kind != engine.KindInput) {
				c.kill(fmt.Sprintf("%v: a result for case %q came out of turn", errBadFrame, r.id))
				return
			}
			s.writeRecord(&r)
			s.pop()
			s.held--
			if r.tally.kind != engine.KindCanceled {
				s.deadRun = 0
				if r.tally.kind != engine.KindCrash {
					s.crashRun = 0
				}
			}
		}
	case frameModels:
		var u modelUse
		if json.Unmarshal(m.payload, &u) == nil {
			c.models = u
		}
	case frameWedged:
		c.wedged = string(m.payload)
		fmt.Fprintf(s.stderr, "\nskynet %s: case %s timed out and holds the Python interpreter in C code; restarting the Python process\n", s.cmd, c.wedged)
		c.kill("wedged")
	case frameFailed:
		if len(m.payload) > 0 {
			c.failed = int(m.payload[0])
		}
	case frameDone:
		c.done, c.doneAt = true, time.Now()
	}
}

// ended settles what a child that exited left: its last frames, then the
// cases it did not answer.
func (s *supervisor) ended(ctx context.Context, c *child) {
	deadline := time.After(drainLimit)
drain:
	for c.frames != nil {
		select {
		case m, ok := <-c.frames:
			if !ok {
				break drain
			}
			s.handle(c, m)
		case <-deadline:
			break drain
		}
	}
	select {
	case <-c.stderrIn:
	case <-time.After(drainLimit):
	}
	s.models.add(c.models)
	s.skipResolved()
	if !c.hello {
		s.loadEnded(ctx, c)
		return
	}
	if c.done && (c.killed == "" || c.reaped) && s.unanswered() == 0 {
		if c.solo {
			s.suspects = 0 // the budget is spent: back to normal scoring
		}
		return // a clean end
	}
	if ctx.Err() != nil {
		s.next = 0
		return // run resolves the rest as cancelled
	}
	s.restarts++
	left := s.unanswered()
	if c.wedged != "" {
		s.wedges++
		// The wedged case timed out; the others it held are innocent.
		for _, e := range s.queue[:s.next] {
			if e.res == nil && e.id == c.wedged {
				r := failedResult(e, engine.KindTimeout, fmt.Sprintf("%s timed out after %s and could not be stopped: it held the Python interpreter in C code, so skynet restarted the Python process", s.callName(), s.timeout))
				e.res = &r
			}
		}
		s.resetSent(false)
		return
	}
	why := c.deathReason(s.culprit())
	if left == 0 {
		// Died between cases: nothing to blame.
		s.deadRun++
		if s.deadRun >= 3 {
			s.gaveUp = fmt.Sprintf("not scored: the Python process died %d times in a row without finishing a case (last: %s)", s.deadRun, why)
		}
		s.resetSent(false)
		return
	}
	if !c.solo {
		fmt.Fprintf(s.stderr, "\nskynet %s: %s; scoring the %d case(s) it had alone to find the one that did it\n", s.cmd, why, left)
		s.resetSent(true)
		return
	}
	// Alone, the case it had killed it: that is the case's result.
	for _, e := range s.queue[:s.next] {
		if e.res == nil {
			doing := "scoring"
			if s.cmd == "eval" {
				doing = "running and scoring"
			}
			msg := fmt.Sprintf("case %s: %s while %s this case alone", e.id, why, doing)
			if out := c.tail.lastOutput(); out != "" {
				msg += "; last output: " + out
			}
			r := failedResult(e, engine.KindCrash, msg)
			e.res = &r
			s.crashes++
			s.crashRun++
			fmt.Fprintf(s.stderr, "skynet %s: case %s: %s\n", s.cmd, e.id, why)
			break
		}
	}
	if s.crashRun >= s.maxCrashes {
		s.gaveUp = fmt.Sprintf("not scored: %s crashed the Python process on %d cases in a row, so skynet stopped restarting it (--max-crashes)", s.culprit(), s.crashRun)
	}
	s.resetSent(s.suspects > 1)
}

// resetSent takes back what the dead child had: all of it is sent again,
// the first suspects alone when alone is set.
func (s *supervisor) resetSent(alone bool) {
	s.skipResolved()
	for _, e := range s.queue[:s.next] {
		e.sent = false
	}
	s.held = 0
	if alone {
		s.suspects = max(s.suspects, s.next)
	} else {
		s.suspects = 0
	}
	s.next = 0
}

// loadEnded handles a child that ended before loading the metric.
func (s *supervisor) loadEnded(ctx context.Context, c *child) {
	if ctx.Err() != nil {
		return
	}
	if !s.loaded {
		// The first load: its failure is the run's.
		switch {
		case c.failed >= 0:
			s.loadFailed = c.failed // the child said why on stderr
		default:
			why := c.killed
			if why == "" {
				why = c.deathReason(s.culprit()) + " while loading the metric"
			}
			if out := c.tail.lastOutput(); out != "" && !strings.Contains(why, "did not finish") {
				why += "; last output: " + out
			}
			fmt.Fprintf(s.stderr, "skynet %s: check %q failed: %s\n", s.cmd, engine.CheckLoads, why)
			s.loadFailed = exitCheck
		}
		return
	}
	s.restarts++
	s.deadRun++
	if s.deadRun >= 3 {
		why := c.killed
		if why == "" {
			why = c.deathReason(s.culprit())
		}
		s.gaveUp = fmt.Sprintf("not scored: the Python process failed to load the metric again %d times in a row (last: %s)", s.deadRun, why)
	}
	s.resetSent(s.suspects > 0)
}

func (s *supervisor) callName() string {
	if s.withRun {
		return "the call"
	}
	return "score"
}

// resolveRest gives every case read and not written a result of kind.
func (s *supervisor) resolveRest(kind engine.ErrorKind, msg string) {
	for {
		for _, e := range s.queue {
			if e.res == nil {
				r := failedResult(e, kind, msg)
				e.res = &r
			}
		}
		s.skipResolved()
		if kind == engine.KindCanceled || s.inputDone {
			return
		}
		e, ok := <-s.entries // given up: the rest of the input gets its results too
		if !ok {
			s.inputDone = true
			continue
		}
		s.queue = append(s.queue, e)
	}
}

func failedResult(e *entry, kind engine.ErrorKind, msg string) engine.Result {
	return engine.Result{ID: e.id, Feedback: msg, Err: &engine.CaseError{Kind: kind, Message: msg}, Observation: e.obs}
}

// writeMade writes a result made in this process.
func (s *supervisor) writeMade(e *entry) {
	s.st.addResult(*e.res)
	s.wbuf = appendResult(s.wbuf, *e.res, s.withRun)
	s.wbuf = append(s.wbuf, '\n')
	s.stepBar()
}

// writeRecord writes a result from the child.
func (s *supervisor) writeRecord(r *record) {
	s.st.add(r.tally)
	if r.tally.kind != engine.KindCanceled {
		r.eachScore(s.st.addScore)
	}
	s.wbuf = append(s.wbuf, r.line...)
	s.wbuf = append(s.wbuf, '\n')
	s.stepBar()
}

func (s *supervisor) stepBar() {
	if s.bar != nil {
		s.bar.step(s.st.count + s.st.canceled)
	}
	if len(s.wbuf) >= 1<<16 {
		s.flush(true)
	}
}

// flush writes the results gathered, whole lines: at once when now is set
// (nothing else is waiting), else when the last write is 50 ms old.
func (s *supervisor) flush(now bool) {
	if len(s.wbuf) == 0 || (!now && time.Since(s.lastOut) < 50*time.Millisecond) {
		return
	}
	if s.writeErr == nil {
		_, s.writeErr = s.out.Write(s.wbuf)
	}
	s.wbuf = s.wbuf[:0]
	s.lastOut = time.Now()
}

// restartLine is the summary's line on restarts, if there were any.
func (s *supervisor) restartLine() string {
	if s.restarts == 0 {
		return ""
	}
	return fmt.Sprintf("restarts: %d of the Python process (%d crashed case(s), %d wedged); %.2fs spent loading the metric again",
		s.restarts, s.crashes, s.wedges, s.restartTime.Seconds())
}

// deathReason says how the child ended, for messages.
// culprit is what a crash is put down to: eval runs the program and the metric.
func (s *supervisor) culprit() string {
	if s.cmd == "eval" {
		return "the program or the metric"
	}
	return "the metric"
}

// deathReason says how the child ended; culprit is what ran in it.
func (c *child) deathReason(culprit string) string {
	if c.killed != "" && c.killed != "wedged" && c.killed != "interrupted" {
		return c.killed
	}
	st := c.state
	if st == nil {
		return "the Python process ended"
	}
	ws, _ := st.Sys().(syscall.WaitStatus)
	switch {
	case ws.Signaled():
		return fmt.Sprintf("%s crashed the Python process (%s)", culprit, signalName(ws.Signal()))
	case c.tail.signal != "":
		return fmt.Sprintf("%s crashed the Python process (%s)", culprit, c.tail.signal)
	case ws.Exited() && ws.ExitStatus() == 2 && c.tail.first != "":
		return fmt.Sprintf("the Python process failed (%s)", c.tail.first)
	case ws.Exited() && ws.ExitStatus() == exitLostChannel:
		return culprit + " closed or broke the Python process's channel to skynet (its file descriptors)"
	case ws.Exited():
		return fmt.Sprintf("%s ended the Python process (exit code %d)", culprit, ws.ExitStatus())
	}
	return "the Python process ended: " + st.String()
}

var signalNames = map[syscall.Signal]string{
	syscall.SIGSEGV: "SIGSEGV", syscall.SIGABRT: "SIGABRT", syscall.SIGKILL: "SIGKILL", syscall.SIGBUS: "SIGBUS",
	syscall.SIGFPE: "SIGFPE", syscall.SIGILL: "SIGILL", syscall.SIGTERM: "SIGTERM", syscall.SIGXCPU: "SIGXCPU",
	syscall.SIGINT: "SIGINT", syscall.SIGPIPE: "SIGPIPE", syscall.SIGXFSZ: "SIGXFSZ", syscall.SIGHUP: "SIGHUP",
}

func signalName(s syscall.Signal) string {
	if n, ok := signalNames[s]; ok {
		return n
	}
	return fmt.Sprintf("signal %d", int(s))
}

// stderrTail forwards a child's stderr and keeps its last lines for crash
// messages. A Go crash report (the runtime's answer to a signal in C code)
// is not forwarded: its first line names the signal, which is kept.
type stderrTail struct {
	mu     sync.Mutex
	lines  []string
	signal string
	dump   bool
	first  string // the crash report's first line
}

var goCrash = regexp.MustCompile(`^(?:(SIG[A-Z0-9]+): |fatal error: |\[signal (SIG[A-Z0-9]+)|runtime: |panic: )`)

const tailLines = 8

func (t *stderrTail) copy(w io.Writer, r io.Reader) {
	br := bufio.NewReaderSize(r, 1<<16)
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			t.add(w, line)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			return
		}
	}
}

func (t *stderrTail) add(w io.Writer, line []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if m := goCrash.FindSubmatch(line); m != nil && !t.dump {
		t.dump = true
		t.first = strings.TrimSpace(string(line[:min(len(line), 200)]))
		if n := string(m[1]) + string(m[2]); n != "" {
			t.signal = n
		}
	}
	if t.dump {
		if t.signal == "" {
			if m := goCrash.FindSubmatch(line); m != nil {
				t.signal = string(m[1]) + string(m[2])
			}
		}
		return
	}
	w.Write(line)
	text := strings.TrimRight(string(line[:min(len(line), 300)]), "\r\n")
	if strings.TrimSpace(text) == "" {
		return
	}
	if len(t.lines) == tailLines {
		copy(t.lines, t.lines[1:])
		t.lines = t.lines[:tailLines-1]
	}
	t.lines = append(t.lines, text)
}

// lastOutput is the child's last lines of output before it died, at most three.
func (t *stderrTail) lastOutput() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	l := t.lines[max(0, len(t.lines)-3):]
	return strings.Join(l, " | ")
}

// modelUse is a child's model calls so far, by role.
type modelUse map[llm.Role]roleUse

type roleUse struct {
	Model string    `json:"model"`
	Stats llm.Stats `json:"stats"`
}

// modelTotals adds up the model use of every child of a run.
type modelTotals struct{ use modelUse }

func (t *modelTotals) add(u modelUse) {
	if t.use == nil {
		t.use = modelUse{}
	}
	for role, r := range u {
		cur := t.use[role]
		cur.Model = r.Model
		s := &cur.Stats
		s.Calls += r.Stats.Calls
		s.Failures += r.Stats.Failures
		s.Retries += r.Stats.Retries
		s.InputTokens += r.Stats.InputTokens
		s.OutputTokens += r.Stats.OutputTokens
		s.CostUSD += r.Stats.CostUSD
		s.Unpriced += r.Stats.Unpriced
		s.CacheHits += r.Stats.CacheHits
		t.use[role] = cur
	}
}

// modelUseOf reads a client's use, nil when it made no calls.
func modelUseOf(c *llm.Client) modelUse {
	u := modelUse{}
	for _, role := range []llm.Role{llm.RoleTask, llm.RoleMetric} {
		if s := c.Stats(role); s.Calls > 0 {
			u[role] = roleUse{Model: c.Model(role), Stats: s}
		}
	}
	if len(u) == 0 {
		return nil
	}
	return u
}

// errDuplicate is a case id that is already the id of an earlier case.
type errDuplicate struct {
	id         string
	line, prev int
	what       string // "line" or "row"
}

func (e *errDuplicate) Error() string {
	return fmt.Sprintf("%s %d: case id %q is also the id of %s %d (a case without an id is named by its %s number); ids must be unique",
		e.what, e.line, e.id, e.what, e.prev, e.what)
}

// lockedWriter serialises writes: the child's stderr is passed on from a
// goroutine of its own while the run writes notices and the summary.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// syncWriter wraps w in a lockedWriter once.
func syncWriter(w io.Writer) io.Writer {
	if _, ok := w.(*lockedWriter); ok {
		return w
	}
	return &lockedWriter{w: w}
}
