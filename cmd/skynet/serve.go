package main

// skynet serve: the metric loaded once in a pool of worker processes and
// scored over HTTP (package serve). This file is the command line: flags,
// the contract check before the port opens, the listener and the signals
// that drain it.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/skynetml/skynet/engine"
	"github.com/skynetml/skynet/pool"
	"github.com/skynetml/skynet/serve"
)

const defaultListen = "127.0.0.1:8765"

func runServe(args []string, stdout, stderr io.Writer) int {
	stderr = syncWriter(stderr)
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	metric := fs.String("metric", "", "path of metric.py")
	program := fs.String("program", "", "path of program.py: /v1/score then runs run(artifact, input) on each case and scores what it returns")
	artifactPath := fs.String("artifact", "", "with --program: file whose text is the artifact passed to run")
	data := fs.String("data", "", "sample cases (JSONL) for the contract check before the port opens (default: the load-time checks only)")
	samples := fs.Int("samples", engine.DefaultSamples, "with --data: number of sample cases to call score on")
	listen := fs.String("listen", defaultListen, "address to listen on, host:port (port 0: any free port, printed); give 0.0.0.0:PORT to listen beyond this machine")
	token := fs.String("token", "", "bearer token every request but /healthz and /livez must carry (default: env SKYNET_SERVE_TOKEN)")
	maxBody := fs.Int("max-body", serve.DefaultMaxBody, "largest request body in bytes (413 past it)")
	maxInflight := fs.Int("max-inflight", serve.DefaultMaxInflight, "most cases in flight over all requests (429 past it, with Retry-After)")
	drainTimeout := fs.Duration("drain-timeout", 5*time.Minute, "on SIGTERM or SIGINT, how long requests in flight may take to finish before skynet serve exits anyway")
	timeout := fs.Duration("timeout", engine.DefaultTimeout, "time limit per score call (at most 600s)")
	runTimeout := fs.Duration("run-timeout", 0, "with --program: time limit per run call (default: --timeout, at most 600s)")
	sv := addSupervisorFlags(fs)
	models := addModelFlags(fs)
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if !required(stderr, "serve", "metric", *metric) || missingFiles(stderr, "serve", "metric", *metric) || venvRefused(stderr, "serve") {
		return exitUsage
	}
	if (*program == "") != (*artifactPath == "") {
		fmt.Fprintf(stderr, "skynet serve: --program and --artifact go together: give both, or neither\n")
		return exitUsage
	}
	if *program != "" && missingFiles(stderr, "serve", "program", *program) {
		return exitUsage
	}
	if *data != "" && (missingFiles(stderr, "serve", "data", *data) || stdinData(stderr, "serve", *data)) {
		return exitUsage
	}
	renamed(fs, stderr)
	if *token == "" {
		*token = os.Getenv("SKYNET_SERVE_TOKEN") // not the flag's default: -h would print it
	}
	var artifact any
	if *artifactPath != "" {
		b, err := os.ReadFile(*artifactPath)
		if err != nil {
			fmt.Fprintf(stderr, "skynet serve: artifact: %v\n", err)
			return exitUsage
		}
		artifact = strings.TrimRight(string(b), "\n")
	}
	var cases []engine.Case
	if *data != "" {
		var err error
		// A line that is not a case is passed over, as /v1/score answers it
		// with an input error.
		if cases, _, err = readSamples(*data, *samples); err != nil {
			fmt.Fprintf(stderr, "skynet serve: %v\n", err)
			return exitUsage
		}
	}
	client, err := models.client()
	if err != nil {
		fmt.Fprintf(stderr, "skynet serve: %v\n", err)
		return exitUsage
	}
	defer client.Close()

	// Signals are caught from here: one while the metric loads ends the
	// start at once; one while serving drains.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var first os.Signal
	go func() {
		select {
		case first = <-sigs:
			cancel()
		case <-ctx.Done():
		}
	}()

	// The port opens first: while the metric loads, /healthz answers 503
	// "loading" and the scoring endpoints 503 with Retry-After, so a client
	// or a readiness probe sees a server coming rather than a refused
	// connection (OpenRLHF gives up after five refused tries).
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintf(stderr, "skynet serve: --listen %s: %v\n", *listen, err)
		return exitUsage
	}
	s := serve.NewLoading(serve.Options{Token: *token, MaxBody: int64(*maxBody), MaxInflight: *maxInflight,
		MaxLineBytes: sv.maxLine, Program: *program != "", Artifact: artifact})
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	defer srv.Close()
	what := "metric " + *metric
	if *program != "" {
		what = "program " + *program + ", " + what
	}
	fmt.Fprintf(stderr, "skynet serve: listening on http://%s (loading %s: /healthz answers 503 until it is ready)\n", ln.Addr(), what)

	opts := sv.poolOptions("serve", engine.Options{Metric: *metric, Program: *program, Samples: *samples, Timeout: *timeout,
		RunTimeout: *runTimeout, LLM: client}, 0, stderr)
	p, err := pool.OpenContext(ctx, opts)
	if err != nil {
		if ctx.Err() != nil {
			return interruptCode(first)
		}
		return openFailed(stderr, "serve", err)
	}
	defer p.Close()
	if len(cases) > 0 {
		for _, c := range p.Check(ctx, cases) {
			if c.OK {
				continue
			}
			if ctx.Err() != nil {
				return interruptCode(first)
			}
			where := ""
			if c.Case != "" {
				where = " [case " + c.Case + "]"
			}
			fmt.Fprintf(stderr, "skynet serve: check %q failed%s: %s\n", c.Name, where, c.Message)
			if c.Fix != "" {
				fmt.Fprintf(stderr, "        fix: %s\n", c.Fix)
			}
			if c.Detail != "" {
				fmt.Fprintf(stderr, "\n%s\n", c.Detail)
			}
			return exitCheck
		}
	}
	if ctx.Err() != nil {
		return interruptCode(first)
	}
	s.Ready(p)
	auth := ""
	if *token != "" {
		auth = ", bearer token required"
	}
	fmt.Fprintf(stderr, "skynet serve: ready on http://%s (%d processes, %s%s)\n", ln.Addr(), p.Processes(), what, auth)

	var sig os.Signal
	select {
	case <-ctx.Done():
		sig = first
	case err := <-served:
		fmt.Fprintf(stderr, "skynet serve: %v\n", err)
		return exitUsage
	}
	// Drain: new requests get 503 while those in flight finish; a second
	// signal, or --drain-timeout, stops waiting.
	fmt.Fprintf(stderr, "skynet serve: %v: finishing %d case(s) in flight, then exiting (again to stop now)\n", sig, s.Inflight())
	s.Drain()
	timer := time.NewTimer(*drainTimeout)
	defer timer.Stop()
	select {
	case <-s.Idle():
	case again := <-sigs:
		fmt.Fprintf(stderr, "skynet serve: %v again: stopped with %d case(s) unanswered\n", again, s.Inflight())
		srv.Close()
		return interruptCode(again)
	case <-timer.C:
		fmt.Fprintf(stderr, "skynet serve: --drain-timeout %s passed: stopped with %d case(s) unanswered\n", seconds(*drainTimeout), s.Inflight())
		srv.Close()
		return interruptCode(sig)
	}
	// Every scoring request has its reply; let their connections finish
	// writing it.
	shut, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	if err := srv.Shutdown(shut); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		fmt.Fprintf(stderr, "skynet serve: %v\n", err)
	}
	st := p.Stats()
	fmt.Fprintf(stderr, "skynet serve: stopped (%d score call(s), %d worker restart(s))\n", st.ScoreCalls, st.Restarts)
	return exitOK
}

// interruptCode is a command's exit code after sig: 130 or 143, as shells give.
func interruptCode(sig os.Signal) int {
	if sig == syscall.SIGTERM {
		return 128 + int(syscall.SIGTERM)
	}
	return 128 + int(syscall.SIGINT)
}
