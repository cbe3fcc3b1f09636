package pool

// A worker process: its start, its pipes, how it is killed and why it died.
// The dispatcher (dispatch.go) owns the fields marked so; the goroutines
// here only read the process's pipes and wait for its exit, and report
// through the pool's events.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/skynetml/skynet/internal/stderrtail"
)

// workerEnv marks a worker process; its value is the protocol the parent
// speaks (worker.go).
const workerEnv = "SKYNET_WORKER"

// exitProtocol is how a worker ends whose protocol is not its parent's.
const exitProtocol = 198

const (
	// drainLimit bounds reading what a dead worker left in its pipes (a
	// grandchild outside its process group may hold them open).
	drainLimit = 2 * time.Second
	// stopGrace is how long a worker may take to exit after its end (or
	// cancel) frame before it is killed.
	stopGrace = 5 * time.Second
)

// proc is one worker process.
type proc struct {
	n       int // its number in the pool's messages (1, 2, ...), never reused
	cmd     *exec.Cmd
	solo    bool // scores suspects alone, one at a time
	started time.Time
	out     chan outMsg // to the sender
	exited  chan struct{}
	state   *os.ProcessState
	tail    *stderrtail.Tail // its stderr, forwarded, the end kept for crash messages

	// Owned by the dispatcher.
	hello     bool
	loadedAt  time.Time
	done      bool // sent its done frame
	doneAt    time.Time
	ending    bool // was sent its end frame
	endAt     time.Time
	canceled  bool // was sent a cancel frame
	failure   *failure
	wedged    string
	lastWord  time.Time
	killed    string // why the pool killed it
	reaped    bool   // killed for lingering after its last frame
	inflight  []*Task
	checks    []*checkCall        // check requests sent, in order
	arts      artifacts[struct{}] // what it was sent
	soloSince time.Time           // when the case the solo proc has was sent
	budget    int                 // suspects a solo proc may still take
	threads   int                 // scoring threads: the job's
	sent      uint64              // case frames sent to it
	sentMarks [2]uint64           // sent, at its last two pings (see Pool.ping)
}

// outMsg is what the sender writes: cases, or a frame made already.
type outMsg struct {
	tasks []*Task
	frame []byte
}

// start runs exe as a worker, its job the first frame it reads.
func (p *Pool) start(solo bool) (*proc, error) {
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
	p.procSeq++
	w := &proc{n: p.procSeq, solo: solo, started: time.Now(), out: make(chan outMsg, 64), exited: make(chan struct{}),
		tail: &stderrtail.Tail{}, lastWord: time.Now(), arts: newArtifacts[struct{}](), threads: p.job.Threads}
	j := p.job
	if solo {
		j.Threads, j.Solo = 1, true
		w.threads = 1
	}
	cmd := exec.Command(p.exe)
	cmd.Args = []string{p.argv0}
	cmd.Dir = p.dir
	cmd.Env = append(append([]string(nil), p.env...), workerEnv+"="+protocol)
	cmd.Stdout, cmd.Stderr = errW, errW // the metric's C-level output goes to stderr
	cmd.ExtraFiles = []*os.File{casesR, resW}
	// Its own process group: a Ctrl-C at the terminal reaches the parent
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
	w.cmd = cmd
	w.out <- outMsg{frame: appendFrame(nil, frameJob, mustJSON(j))}

	framesDone, stderrDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(framesDone)
		defer resR.Close()
		fr := newFrameReader(resR)
		for {
			typ, payload, err := fr.next()
			if err != nil {
				// At its end, or past drainLimit after the worker exited
				// (the deadline below): nothing wrong with the channel.
				if err != io.EOF && !errors.Is(err, os.ErrDeadlineExceeded) {
					p.events <- event{w: w, err: err}
				}
				return
			}
			p.events <- event{w: w, typ: typ, payload: bytes.Clone(payload)}
		}
	}()
	go func() {
		defer close(stderrDone)
		defer errR.Close()
		w.tail.Copy(p.stderr, errR)
	}()
	go func() {
		cmd.Wait()
		w.state = cmd.ProcessState
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // what it forked, holding its pipes
		close(w.exited)
		// Its last frames and its crash report first, then its end. What
		// it forked and left its process group (os.setsid) may hold the
		// pipes open for as long as it lives: past drainLimit, the reads
		// stop, so the worker's end waits for nobody else.
		deadline := time.Now().Add(drainLimit)
		resR.SetReadDeadline(deadline)
		errR.SetReadDeadline(deadline)
		<-framesDone
		<-stderrDone
		p.events <- event{w: w, ended: true}
	}()
	go w.sender(casesW)
	return w, nil
}

// sender writes what it is given to the worker. The pipe stays open after
// the end frame so that a cancel can still follow.
func (w *proc) sender(f *os.File) {
	defer f.Close()
	var buf []byte
	var num [8]byte
	for {
		var m outMsg
		select {
		case m = <-w.out:
		case <-w.exited:
			return
		}
		buf = buf[:0]
		if m.frame != nil {
			buf = append(buf, m.frame...)
		}
		for _, t := range m.tasks {
			var at int
			buf, at = openFrame(buf, frameCase)
			binary.LittleEndian.PutUint32(num[:4], uint32(t.Line))
			binary.LittleEndian.PutUint32(num[4:], t.art)
			buf = append(buf, num[:]...)
			buf = append(buf, t.Case...)
			closeFrame(buf, at)
		}
		if _, err := f.Write(buf); err != nil {
			return // the worker is gone; its waiter reports it
		}
	}
}

// send hands m to the sender without blocking the dispatcher for long: the
// sender writes as fast as the worker reads, and a worker that stops
// reading is killed by the pool's watch.
func (w *proc) send(m outMsg) {
	select {
	case w.out <- m:
	case <-w.exited:
	}
}

// kill ends the worker at once; why says what it did.
func (w *proc) kill(why string) {
	if w.killed == "" {
		w.killed = why
	}
	syscall.Kill(-w.cmd.Process.Pid, syscall.SIGKILL)
}

// deathReason says how the worker ended; culprit is what ran in it.
func (w *proc) deathReason(culprit string) string {
	if w.killed != "" && w.killed != "wedged" && w.killed != "interrupted" {
		return w.killed
	}
	st := w.state
	if st == nil {
		return "the Python process ended"
	}
	ws, _ := st.Sys().(syscall.WaitStatus)
	switch {
	case ws.Signaled():
		return fmt.Sprintf("%s crashed the Python process (%s)", culprit, signalName(ws.Signal()))
	case w.tail.Signal() != "":
		return fmt.Sprintf("%s crashed the Python process (%s)", culprit, w.tail.Signal())
	case ws.Exited() && ws.ExitStatus() == exitProtocol:
		return "the Python process is another build of this program (" + w.tail.Head() + ")"
	case ws.Exited() && ws.ExitStatus() == 2 && w.tail.CrashLine() != "":
		return fmt.Sprintf("the Python process failed (%s)", w.tail.CrashLine())
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
	syscall.SIGALRM: "SIGALRM", syscall.SIGUSR1: "SIGUSR1", syscall.SIGUSR2: "SIGUSR2", syscall.SIGVTALRM: "SIGVTALRM",
	syscall.SIGPROF: "SIGPROF", syscall.SIGQUIT: "SIGQUIT", syscall.SIGTRAP: "SIGTRAP", syscall.SIGSYS: "SIGSYS",
}

func signalName(s syscall.Signal) string {
	if n, ok := signalNames[s]; ok {
		return n
	}
	return fmt.Sprintf("signal %d", int(s))
}
