package engine

import (
	"context"
	"fmt"
	"iter"
	"os"
	"path/filepath"

	"github.com/skynetml/skynet/cpython"
)

// Checks made when a program is loaded.
const (
	CheckProgramLoads = "program loads"
	CheckRunSignature = "run signature"
)

// loadProgram imports program.py and checks run(artifact, input). The GIL
// is held.
func (e *Engine) loadProgram(g *cpython.GIL, py *pyMetric, shown string) error {
	path, err := filepath.Abs(shown)
	if err != nil {
		return e.fail(Check{Name: CheckProgramLoads, Message: err.Error()})
	}
	if st, err := os.Stat(path); err != nil || st.IsDir() {
		msg := fmt.Sprintf("%s: no such file", shown)
		if err == nil {
			msg = fmt.Sprintf("%s is a directory, not a program file", shown)
		}
		ce := e.fail(Check{Name: CheckProgramLoads, Message: msg}).(*CheckError)
		ce.Err = err
		return ce
	}
	e.program = moduleName("program", path)
	e.programPath = path
	if e.mainThread {
		if _, err := e.loaderCall(g, py, "watch_signals", path); err != nil {
			return fmt.Errorf("engine: %w", err)
		}
		e.program = e.stemName(g, py, path, e.program)
	}
	if py.pmod, err = e.importFile(g, py, path, e.program, shown, CheckProgramLoads); err != nil {
		return err
	}
	if _, err := e.signature(g, py, "run_arity", py.pmod, CheckRunSignature); err != nil {
		return err
	}
	py.run, err = g.Attr(py.pmod, "run")
	return err
}

// Evaluate runs the program on each case with the artifact and scores what
// it returns, in-process: run(artifact, case.Input) makes the output (the
// Python object goes straight to score, unconverted) and score(input,
// output, expected) judges it. Skynet measures run's wall time and the cost
// of the task-model calls it makes; they become the case's observation
// (what observation(), service_cost() and reward() see) and Result.Observation.
// Results come in input order with their index, with Result.Output set.
// A run that raises or overruns RunTimeout gives an error of kind run.
func (e *Engine) Evaluate(ctx context.Context, artifact any, cases iter.Seq[Case]) iter.Seq2[int, Result] {
	if e.py.run == nil {
		return func(yield func(int, Result) bool) {
			i := 0
			for c := range cases {
				if !yield(i, failed(c.ID, KindRun, "no program: open the engine with Options.Program")) {
					return
				}
				i++
			}
		}
	}
	var enc cpython.Encoder
	encErr := enc.Value(artifact)
	art := prepared{args: enc.Bytes(), id: -1}
	if encErr == nil {
		art.id = e.cache.ID(art.args)
	}
	return e.stream(ctx, cases, 0, &art, encErr)
}

// prepared is an argument encoded once for many cases.
type prepared struct {
	args []byte
	id   int32
}
