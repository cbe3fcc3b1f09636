package pool

// The dispatcher: one goroutine owns the worker processes and the cases
// not yet answered. It hands batches to whichever worker has room, matches
// results to their cases, and supervises: a worker that dies takes no case
// with it. The cases it held unanswered are suspects: a new worker scores
// them alone, one at a time, and one that kills it too gets a "crash"
// result. The other workers keep scoring meanwhile.

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/skynetml/skynet/engine"
	"github.com/skynetml/skynet/llm"
)

func (p *Pool) loop() {
	defer close(p.loopDone)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	quit := p.quit
	for {
		if p.closing && len(p.procs) == 0 {
			p.publish()
			return
		}
		p.dispatch()
		p.publish()
		select {
		case ev := <-p.events:
			p.handle(ev)
		case batch := <-p.submit:
			p.queue(batch)
		case c := <-p.checkReqs:
			p.startCheck(c)
		case r := <-p.artReqs:
			p.artifact(r)
		case <-quit:
			quit = nil
			p.shutdown()
		case now := <-tick.C:
			p.watch(now)
		}
	}
}

// publish makes the counts visible to Stats.
func (p *Pool) publish() {
	p.statsMu.Lock()
	p.shown = p.st
	p.statsMu.Unlock()
}

// notice tells the user something once per message.
func (p *Pool) notice(format string, args ...any) {
	fmt.Fprintf(p.stderr, "%s: "+format+"\n", append([]any{p.opts.Name}, args...)...)
}

// warn records a warning about the metric and hands it on (OnWarning, else Stderr).
func (p *Pool) warn(msg string) {
	p.st.Notices = append(p.st.Notices, msg)
	if p.opts.OnWarning != nil {
		p.opts.OnWarning(msg)
		return
	}
	p.notice("warning: %s", msg)
}

func (p *Pool) artifact(r artReq) {
	if r.id == nil {
		delete(p.arts, r.drop)
		return
	}
	p.artSeq++
	p.arts[p.artSeq] = r.value
	r.id <- p.artSeq
}

// queue takes a stream's new tasks.
func (p *Pool) queue(batch []*Task) {
	if p.gaveUp != "" || p.closing {
		p.resolve(batch)
		return
	}
	p.pending = append(p.pending, batch...)
}

// resolve gives tasks the results the pool's state decides: crash after it
// gave up, canceled once closing.
func (p *Pool) resolve(tasks []*Task) {
	for _, t := range tasks {
		if p.gaveUp != "" {
			t.made(engine.KindCrash, p.gaveUp)
		} else {
			t.made(engine.KindCanceled, "not scored: "+engine.ErrClosed.Error())
		}
	}
}

// target is how many cases w should hold: about aimInflight of work per
// thread at the recent pace, two a thread before any is measured.
func (p *Pool) target(w *proc) int {
	low := 2 * w.threads
	if p.avgCase <= 0 {
		return low
	}
	return max(low, min(maxInflight, int(aimInflight*time.Duration(w.threads)/p.avgCase)))
}

// dispatch hands queued cases to the workers with room: suspects to the
// solo worker one at a time, the rest to the others in batches.
func (p *Pool) dispatch() {
	if p.closing || p.gaveUp != "" {
		return
	}
	ready := 0
	for _, w := range p.procs {
		if w.hello && !w.ending && !w.solo {
			ready++
		}
	}
	// The least loaded first: a case that finds an idle worker goes to it,
	// not to the queue of the first worker with room (which took every
	// one-case request while the others stayed idle).
	p.order = append(p.order[:0], p.procs...)
	slices.SortStableFunc(p.order, func(a, b *proc) int { return len(a.inflight)*b.threads - len(b.inflight)*a.threads })
	for _, w := range p.order {
		if !w.hello || w.ending || w.canceled {
			continue
		}
		if w.solo {
			p.feedSolo(w)
			continue
		}
		p.skipCanceled()
		if len(p.pending) == 0 {
			continue // a solo worker later in procs may still have suspects
		}
		target := p.target(w)
		room := target - len(w.inflight)
		if room <= 0 || (len(w.inflight) > 0 && room < target/2) {
			continue // a batch, not a case at a time
		}
		// Toward the end of the queue, share it out.
		if share := (len(p.pending) + ready - 1) / max(ready, 1); room > share {
			room = max(share, 1)
		}
		room = min(room, len(p.pending))
		batch := make([]*Task, 0, room)
		for _, t := range p.pending[:room] {
			if t.s.ctx.Err() == nil {
				batch = append(batch, t)
			}
		}
		clear(p.pending[:room])
		p.pending = p.pending[room:]
		p.sendTasks(w, batch)
	}
}

// skipCanceled drops queued tasks whose stream ended: it gave them their results.
func (p *Pool) skipCanceled() {
	for len(p.pending) > 0 && p.pending[0].s.ctx.Err() != nil {
		p.pending[0] = nil
		p.pending = p.pending[1:]
	}
}

// feedSolo gives the solo worker its next suspect, if it has none; when
// the suspects or its budget run out, it goes back to normal scoring.
func (p *Pool) feedSolo(w *proc) {
	if len(w.inflight) > 0 {
		return
	}
	for len(p.suspects) > 0 && p.suspects[0].s.ctx.Err() != nil {
		p.suspects = p.suspects[1:]
	}
	if len(p.suspects) == 0 || w.budget == 0 {
		p.pending = append(p.suspects, p.pending...)
		p.suspects = nil
		if w.threads == p.job.Threads {
			w.solo = false // a solo worker is a normal one with one case at a time
			return
		}
		p.end(w) // it has one thread; a normal worker has more
		return
	}
	t := p.suspects[0]
	p.suspects = p.suspects[1:]
	w.budget--
	w.soloSince = time.Now()
	p.sendTasks(w, []*Task{t})
}

// sendTasks hands tasks to w, with the artifacts it lacks first.
func (p *Pool) sendTasks(w *proc, tasks []*Task) {
	if len(tasks) == 0 {
		return
	}
	var frames []byte
	for _, t := range tasks {
		if t.art != 0 {
			if _, ok := w.arts.m[t.art]; !ok {
				var id [4]byte
				binary.LittleEndian.PutUint32(id[:], t.art)
				frames = appendFrame(frames, frameArtifact, id[:], p.arts[t.art])
				w.arts.add(t.art, struct{}{})
			}
		}
	}
	w.inflight = append(w.inflight, tasks...)
	w.sent += uint64(len(tasks))
	w.send(outMsg{frame: frames, tasks: tasks})
}

// end tells w to finish what it has and exit.
func (p *Pool) end(w *proc) {
	if w.ending {
		return
	}
	w.ending, w.endAt = true, time.Now()
	w.send(outMsg{frame: appendFrame(nil, frameEnd)})
}

// handle acts on one event of a worker.
func (p *Pool) handle(ev event) {
	w := ev.w
	switch {
	case ev.ended:
		p.ended(w)
		p.replace()
		return
	case ev.err != nil:
		w.kill(ev.err.Error())
		return
	}
	w.lastWord = time.Now()
	switch ev.typ {
	case frameHello:
		if p.closing {
			return
		}
		var h hello
		if json.Unmarshal(ev.payload, &h) != nil || h.Protocol != protocol {
			w.kill(fmt.Sprintf("the Python process is another build of this program (it speaks %q, not %q); start the run again", h.Protocol, protocol))
			return
		}
		w.hello, w.loadedAt = true, time.Now()
		if p.loaded {
			p.st.RestartTime += w.loadedAt.Sub(w.started)
		}
		if !p.loaded {
			p.loaded = true
			p.opened <- nil
		}
		if w.solo {
			w.budget = min(len(p.suspects), soloBudget)
		}
	case frameFailed:
		var f failure
		if err := json.Unmarshal(ev.payload, &f); err != nil {
			f.Error = "the Python process failed to load the metric and said nothing readable"
		}
		w.failure = &f
	case frameResults:
		p.results(w, ev.payload)
	case frameCall:
		p.modelCall(w, ev.payload)
	case frameWedged:
		id, why, _ := strings.Cut(string(ev.payload), "\x00")
		w.wedged = id
		if why == "" {
			why = "holds the Python interpreter in C code"
		}
		p.notice("case %s timed out and %s; restarting its Python process", id, why)
		w.kill("wedged")
	case frameChecks:
		if len(w.checks) == 0 {
			return
		}
		c := w.checks[0]
		w.checks = w.checks[1:]
		var checks []engine.Check
		if err := json.Unmarshal(ev.payload, &checks); err != nil {
			w.kill(fmt.Sprintf("%v: %v", errBadFrame, err))
			checks = []engine.Check{{Name: engine.CheckReturnValue, Message: err.Error()}}
		}
		c.reply <- checks
	case frameNotice:
		if msg := string(ev.payload); !p.noticed[msg] {
			p.noticed[msg] = true
			p.warn(msg)
		}
	case frameDone:
		w.done, w.doneAt = true, time.Now()
	case framePing:
		p.ping(w, ev.payload)
	}
}

// ping checks that w has read the cases sent to it before its last ping
// but one. A worker reads its pipe as cases come (it holds at most
// maxInflight of them and queues more), so cases sent that long before and
// still unread were taken by something else in it: a metric reading its
// file descriptors. Their results would never come, and nothing else would
// notice while it pings.
func (p *Pool) ping(w *proc, payload []byte) {
	if len(payload) < 8 {
		return
	}
	read := binary.LittleEndian.Uint64(payload)
	if read < w.sentMarks[0] {
		w.kill(fmt.Sprintf("%v: %d case(s) sent to it never reached it (something in the Python process read its channel)", errBadFrame, w.sentMarks[0]-read))
		return
	}
	w.sentMarks[0], w.sentMarks[1] = w.sentMarks[1], w.sent
}

// results matches a frame of records to the cases w holds, in order.
func (p *Pool) results(w *proc, payload []byte) {
	var r Record
	var took time.Duration
	n := 0
	for len(payload) > 0 {
		var err error
		if payload, err = nextRecord(payload, &r); err != nil {
			w.kill(err.Error())
			return
		}
		// A bad line's id is the worker's to say (QuickID reads less).
		if len(w.inflight) == 0 || (w.inflight[0].ID != string(r.ID) && r.Kind != engine.KindInput) {
			w.kill(fmt.Sprintf("%v: a result for case %q came out of turn", errBadFrame, r.ID))
			return
		}
		if r.Kind == engine.KindCanceled && !w.canceled && !p.closing {
			// Nothing asked it to cancel: its own end of the channel went
			// wrong, and the case was never scored. Its cases go to
			// another process, as after a crash.
			w.kill(fmt.Sprintf("%v: case %s came back cancelled though nothing cancelled it", errBadFrame, r.ID))
			return
		}
		t := w.inflight[0]
		w.inflight[0] = nil
		w.inflight = w.inflight[1:]
		if len(w.inflight) == 0 {
			w.inflight = nil // let the old backing array go
			w.soloSince = time.Time{}
		}
		switch r.Kind {
		case "", engine.KindException, engine.KindContract:
			p.st.ScoreCalls++
		}
		p.publish() // Stats agrees with the results a caller has
		t.finish(r)
		if r.Kind != engine.KindCanceled {
			p.deadRun = 0
			if r.Kind != engine.KindCrash {
				p.crashRun = 0
			}
		}
		took += r.Duration
		n++
	}
	if n > 0 {
		per := took / time.Duration(n)
		if p.avgCase > 0 {
			per = (p.avgCase*3 + per) / 4
		}
		p.avgCase = max(per, time.Microsecond)
	}
}

// modelCall makes a worker's llm() call with the pool's client and sends
// the reply back; the worker waits with its GIL released.
func (p *Pool) modelCall(w *proc, payload []byte) {
	if len(payload) < 8 {
		return
	}
	id := binary.LittleEndian.Uint64(payload)
	var c modelCall
	if err := json.Unmarshal(payload[8:], &c); err != nil {
		w.kill(fmt.Sprintf("%v: %v", errBadFrame, err))
		return
	}
	go func() {
		ctx, cancel := context.Background(), context.CancelFunc(func() {})
		if c.Timeout > 0 {
			ctx, cancel = context.WithTimeout(ctx, c.Timeout)
		}
		defer cancel()
		reply, err := p.llm.Call(ctx, c.Role, c.Request)
		r := modelReply{Reply: reply}
		if err != nil {
			le, ok := errors.AsType[*llm.Error](err)
			if !ok {
				le = &llm.Error{Model: p.llm.Model(c.Role), Msg: err.Error()}
			}
			r.Err = le
		}
		w.send(outMsg{frame: appendFrame(nil, frameReply, uint64Bytes(id), mustJSON(r))})
	}()
}

// startCheck sends a contract check to the worker with the least to do.
func (p *Pool) startCheck(c *checkCall) {
	var best *proc
	for _, w := range p.procs {
		if w.hello && !w.ending && !w.solo && (best == nil || len(w.inflight)+len(w.checks) < len(best.inflight)+len(best.checks)) {
			best = w
		}
	}
	if best == nil {
		why := "no Python process is running"
		if p.gaveUp != "" {
			why = p.gaveUp
		}
		c.reply <- []engine.Check{{Name: engine.CheckReturnValue, Message: "not run: " + why}}
		return
	}
	lines := make([]string, len(c.cases))
	for i, b := range c.cases {
		lines[i] = string(b)
	}
	c.w = best
	best.checks = append(best.checks, c)
	best.send(outMsg{frame: appendFrame(nil, frameCheck, mustJSON(lines))})
}

// watch runs every tick: the limits nothing inside a worker enforces.
func (p *Pool) watch(now time.Time) {
	limit := max(p.opts.Timeout, p.opts.RunTimeout)
	for _, w := range p.procs {
		switch {
		case w.done && now.Sub(w.doneAt) > stopGrace:
			w.reaped = true
			w.kill("it did not exit after its last result")
		case (w.ending || w.canceled) && now.Sub(w.endAt) > stopGrace:
			w.kill("it did not stop when told")
		case !w.hello && now.Sub(w.started) > p.opts.LoadTimeout:
			w.kill(fmt.Sprintf("loading the metric did not finish within %s (--load-timeout)", p.opts.LoadTimeout))
		case w.hello && !w.done && now.Sub(w.lastWord) > stoppedAfter && stopped(w.cmd.Process.Pid):
			w.kill(fmt.Sprintf("the Python process was stopped (SIGSTOP) and sent nothing for %s", now.Sub(w.lastWord).Round(100*time.Millisecond)))
		case w.hello && (len(w.inflight) > 0 || len(w.checks) > 0) && now.Sub(w.lastWord) > silentLimit:
			w.kill(fmt.Sprintf("the Python process stopped answering (nothing for %s)", silentLimit))
		case w.solo && !w.soloSince.IsZero() && now.Sub(w.soloSince) > limit+killGrace+silentLimit:
			w.kill(fmt.Sprintf("the case did not finish within %s", limit+killGrace+silentLimit))
		case len(w.checks) > 0 && now.After(w.checks[0].deadline):
			w.kill(fmt.Sprintf("the sample cases did not finish within %s", w.checks[0].deadline.Sub(w.loadedAt).Round(time.Second)))
		}
	}
}

// shutdown starts closing: nothing more is scored, the workers are told to
// stop (a call in flight is interrupted) and killed if they linger.
func (p *Pool) shutdown() {
	p.closing = true
	p.resolve(p.pending)
	p.resolve(p.suspects)
	p.pending, p.suspects = nil, nil
	for _, w := range p.procs {
		if !w.hello {
			w.kill("interrupted")
			continue
		}
		if !w.canceled {
			w.canceled = true
			w.send(outMsg{frame: appendFrame(nil, frameCancel)})
		}
		p.end(w)
	}
	if !p.loaded && p.openErr == nil {
		p.openErr = engine.ErrClosed
		p.opened <- p.openErr
	}
}

// replace starts workers until the pool has its count again: a solo one
// first when there are suspects and no solo worker.
func (p *Pool) replace() {
	if p.closing || p.gaveUp != "" || !p.loaded {
		return
	}
	live, solo := 0, false
	for _, w := range p.procs {
		if !w.ending {
			live++
		}
		solo = solo || w.solo
	}
	for ; live < p.want; live++ {
		w, err := p.start(len(p.suspects) > 0 && !solo)
		if err != nil {
			p.giveUp("not scored: skynet could not start its Python process: " + err.Error())
			return
		}
		solo = solo || w.solo
		p.procs = append(p.procs, w)
	}
}

// giveUp stops scoring for good: every case waiting or held gets a crash
// result with why, as will every case queued later.
func (p *Pool) giveUp(why string) {
	if p.gaveUp != "" {
		return
	}
	p.gaveUp, p.st.GaveUp = why, why
	p.publish() // before the results it makes: a caller that has them sees why (Stats, /livez)
	p.resolve(p.pending)
	p.resolve(p.suspects)
	p.pending, p.suspects = nil, nil
	for _, w := range p.procs {
		p.resolve(w.inflight)
		w.inflight = nil
		w.kill("the pool gave up")
	}
}

// ended settles what a worker that exited left: its checks, then the cases
// it did not answer.
func (p *Pool) ended(w *proc) {
	for i, x := range p.procs {
		if x == w {
			p.procs = append(p.procs[:i], p.procs[i+1:]...)
			break
		}
	}
	why := w.deathReason(p.culprit)
	for _, c := range w.checks {
		c.reply <- []engine.Check{{Name: engine.CheckLoads, OK: true, Message: "loaded"},
			{Name: engine.CheckReturnValue, Message: p.withOutput(w, why) + " while scoring a sample case"}}
	}
	w.checks = nil
	if !w.hello {
		p.loadEnded(w, why)
		return
	}
	left := w.inflight
	w.inflight = nil
	if w.done && (w.killed == "" || w.reaped) && len(left) == 0 {
		return // a clean end
	}
	if p.closing || p.gaveUp != "" {
		p.resolve(left)
		return
	}
	p.st.Restarts++
	if w.wedged != "" {
		p.st.Wedges++
		p.publish()
		// The wedged case timed out; the others it held are innocent.
		var rest []*Task
		for _, t := range left {
			if t.ID == w.wedged {
				t.made(engine.KindTimeout, fmt.Sprintf("%s timed out after %s and could not be stopped: it held the Python interpreter, so skynet restarted the Python process", p.callName, p.limitOf(t)))
				continue
			}
			rest = append(rest, t)
		}
		p.pending = append(rest, p.pending...)
		return
	}
	if len(left) == 0 {
		// Died between cases: nothing to blame.
		p.deadRun++
		if p.deadRun >= 3 {
			p.giveUp(fmt.Sprintf("not scored: the Python process died %d times in a row without finishing a case (last: %s)", p.deadRun, why))
		}
		return
	}
	if !w.solo {
		p.notice("%s; scoring the %d case(s) it had alone to find the one that did it", why, len(left))
		p.addSuspects(left)
		return
	}
	// Alone, the case it had killed it: that is the case's result.
	t := left[0]
	doing := "scoring"
	if t.withRun {
		doing = "running and scoring"
	}
	msg := fmt.Sprintf("case %s: %s while %s this case alone", t.ID, why, doing)
	if out := w.tail.LastOutput(); out != "" {
		msg += "; last output: " + out
	}
	p.st.Crashes++
	p.crashRun++
	p.publish()
	t.made(engine.KindCrash, msg)
	p.notice("case %s: %s", t.ID, why)
	p.addSuspects(left[1:])
	if p.crashRun >= p.opts.MaxCrashes {
		p.giveUp(fmt.Sprintf("not scored: %s crashed the Python process on %d cases in a row, so skynet stopped restarting it (--max-crashes)", p.culprit, p.crashRun))
	}
}

// addSuspects adds cases to score alone, keeping them in input order, so
// that the crashes of several workers at once are found as one would be.
func (p *Pool) addSuspects(tasks []*Task) {
	p.suspects = append(p.suspects, tasks...)
	slices.SortStableFunc(p.suspects, func(a, b *Task) int {
		if a.s.id != b.s.id {
			return int(a.s.id - b.s.id)
		}
		return a.seq - b.seq
	})
}

func (p *Pool) limitOf(t *Task) time.Duration {
	if t.withRun {
		return max(p.opts.Timeout, p.opts.RunTimeout)
	}
	return p.opts.Timeout
}

// withOutput adds a dead worker's last output to why it died.
func (p *Pool) withOutput(w *proc, why string) string {
	if out := w.tail.LastOutput(); out != "" && !strings.Contains(why, "did not finish") {
		why += "; last output: " + out
	}
	return why
}

// loadEnded handles a worker that ended before loading the metric.
func (p *Pool) loadEnded(w *proc, why string) {
	if p.closing {
		return
	}
	if !p.loaded {
		// The first load: its failure is the pool's.
		if p.openErr != nil {
			return // said once
		}
		switch {
		case w.failure != nil && len(w.failure.Checks) > 0:
			p.openErr = &engine.CheckError{Checks: w.failure.Checks}
		case w.failure != nil:
			p.openErr = errors.New(w.failure.Error)
		case w.killed != "" && w.killed != "interrupted":
			p.openErr = &engine.CheckError{Checks: []engine.Check{{Name: engine.CheckLoads, Message: w.killed}}}
		default:
			p.openErr = &engine.CheckError{Checks: []engine.Check{{Name: engine.CheckLoads,
				Message: p.withOutput(w, why+" while loading the metric")}}}
		}
		p.opened <- p.openErr
		for _, x := range p.procs {
			x.kill("another worker failed to load the metric")
		}
		p.closing = true
		return
	}
	p.st.Restarts++
	p.deadRun++
	if p.deadRun >= 3 {
		if w.failure != nil {
			why = w.failure.Error
			if n := len(w.failure.Checks); n > 0 {
				why = w.failure.Checks[n-1].Message
			}
		}
		p.giveUp(fmt.Sprintf("not scored: the Python process failed to load the metric again %d times in a row (last: %s)", p.deadRun, why))
	}
}
