package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"iter"
	"os"
	"syscall"
	"time"

	"github.com/skynetml/skynet/engine"
	"github.com/skynetml/skynet/llm"
)

// childJob is what a child runs: score or eval with the parent's flags.
type childJob struct {
	cmd     string
	models  modelFlags
	opts    engine.Options
	withRun bool
	// caseOf makes the case the parent sent: a line number and line (score)
	// or a dataset index (eval).
	caseOf func(n int, raw []byte) engine.Case
	// results scores cases with the open engine.
	results func(e *engine.Engine, ctx context.Context, cases iter.Seq[engine.Case]) iter.Seq2[int, engine.Result]
}

// exitLostChannel is how a child ends when it cannot write to the parent:
// the metric closed or broke its file descriptors.
const exitLostChannel = 199

// isChild says this process is a child of supervise.go; solo says it scores
// one case at a time.
func isChild() (child, solo bool) {
	mode := os.Getenv(childEnv)
	return mode != "", mode == "solo"
}

// serveChild is the child's side of supervise.go: it opens the engine,
// scores the cases the parent sends on fd 3 and streams the results back
// on fd 4. Its stdin is /dev/null and its stdout is its stderr.
func serveChild(job childJob) int {
	_, solo := isChild()
	os.Unsetenv(childEnv) // processes the metric starts are not children
	syscall.CloseOnExec(3)
	syscall.CloseOnExec(4)
	in, out := os.NewFile(3, "cases"), os.NewFile(4, "results")
	if solo {
		job.opts.Threads = 1
	}
	var client *llm.Client
	var sent []byte
	models := func() []byte { // the model use, when any of it changed
		if client == nil {
			return nil
		}
		// The whole of it, not only the call count: a call's tokens, cost,
		// retries and failure come after it is counted.
		b, _ := json.Marshal(modelUseOf(client))
		if bytes.Equal(b, sent) {
			return nil
		}
		sent = b
		return b
	}
	fw := newFrameWriter(out, models)
	e, cl, _, code := openEngine(job.cmd, os.Stderr, job.models, job.opts)
	if code != exitOK {
		fw.close(frameFailed, []byte{byte(code)})
		return code
	}
	client = cl
	defer client.Close() // the model cache is a file to close
	fw.send(frameHello, nil)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cases := make(chan engine.Case, childWindow)
	go func() {
		ended := false
		end := func() { // no more cases; cancel frames may still come
			if !ended {
				ended = true
				close(cases)
			}
		}
		defer end()
		fr := newFrameReader(in)
		for {
			typ, p, err := fr.next()
			if err != nil {
				return // the parent closed the pipe (or it died)
			}
			switch typ {
			case frameCancel:
				cancel()
			case frameEnd:
				end()
			case frameCase:
				if ended || len(p) < 4 {
					end()
					continue
				}
				c := job.caseOf(int(binary.LittleEndian.Uint32(p)), append([]byte(nil), p[4:]...))
				select {
				case cases <- c:
				case <-ctx.Done():
				}
			}
		}
	}()
	go func() { // a case wedged in C: only the parent can end it, by killing this process
		var last string
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if w, ok := e.Wedged(); ok && w.CaseID != last {
				last = w.CaseID
				fw.send(frameWedged, []byte(w.CaseID))
			}
		}
	}()
	if solo {
		for c := range cases {
			for _, r := range job.results(e, ctx, oneCase(c)) {
				fw.addResult(r, job.withRun)
			}
		}
	} else {
		all := func(yield func(engine.Case) bool) {
			for c := range cases {
				if !yield(c) {
					return
				}
			}
		}
		for _, r := range job.results(e, ctx, all) {
			fw.addResult(r, job.withRun)
		}
	}
	cancel()
	if err := fw.close(frameDone, nil); err != nil {
		return exitLostChannel
	}
	return exitOK
}

func oneCase(c engine.Case) iter.Seq[engine.Case] {
	return func(yield func(engine.Case) bool) { yield(c) }
}
