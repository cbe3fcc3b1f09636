package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/skynetml/skynet/engine"
	"github.com/skynetml/skynet/llm"
)

// openEngine builds the model client from the flags and opens the engine.
// A non-zero code means stop with it; otherwise closeFn closes both.
func openEngine(cmd string, stderr io.Writer, models modelFlags, opts engine.Options) (e *engine.Engine, client *llm.Client, closeFn func(), code int) {
	client, err := models.client()
	if err != nil {
		fmt.Fprintf(stderr, "skynet %s: %v\n", cmd, err)
		return nil, nil, nil, exitUsage
	}
	opts.LLM = client
	if e, err = engine.Open(opts); err != nil {
		client.Close()
		return nil, nil, nil, openFailed(stderr, cmd, err)
	}
	return e, client, func() { e.Close(); client.Close() }, exitOK
}

// runPass is what score and eval share once everything is open: SIGINT and
// SIGTERM stop it cleanly, a progress bar shows on a terminal, a wedged
// interpreter is reported, and the summary follows the results.
func runPass(cmd string, e *engine.Engine, client *llm.Client, total int, done map[string]bool, summary, stderr io.Writer,
	write func(ctx context.Context, bar *progress) (*stats, error)) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var bar *progress
	if isTerminal(stderr) {
		bar = &progress{w: stderr, total: total}
	}
	go warnWedges(ctx, e, stderr)
	st, err := write(ctx, bar)
	if bar != nil {
		bar.done()
	}
	if err != nil {
		fmt.Fprintf(stderr, "skynet %s: %v\n", cmd, err)
		return exitUsage
	}
	if why := e.Fallback(); why != "" { // known once the sub-interpreters tried to load the metric
		fmt.Fprintf(stderr, "skynet %s: %s\n", cmd, why)
	}
	st.print(summary, ctx.Err() != nil)
	printResumed(summary, done)
	printModelUse(summary, client)
	return exitOK
}

// interpreters is the --interpreters flag: "auto" (0: one per CPU on
// CPython 3.12+, else 1) or a count.
type interpreters int

func (n *interpreters) String() string {
	if *n == 0 {
		return "auto"
	}
	return strconv.Itoa(int(*n))
}

func (n *interpreters) Set(s string) error {
	if s == "auto" {
		*n = 0
		return nil
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 1 {
		return fmt.Errorf(`want "auto" or a count of at least 1, got %q`, s)
	}
	*n = interpreters(v)
	return nil
}

func addInterpretersFlag(fs *flag.FlagSet) *interpreters {
	n := new(interpreters)
	fs.Var(n, "interpreters", `Python interpreters scoring in parallel, each with its own GIL (CPython 3.12+): "auto" is one per CPU there and 1 before`)
	return n
}
