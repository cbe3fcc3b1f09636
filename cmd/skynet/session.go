package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
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
	st.print(summary, ctx.Err() != nil)
	printResumed(summary, done)
	printModelUse(summary, client)
	return exitOK
}
