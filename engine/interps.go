package engine

import (
	"fmt"
	"os"
	"runtime"
	"sync"

	"github.com/skynetml/skynet/cpython"
)

// CheckInterpreters is listed when a metric that was to run in several
// interpreters cannot load in a sub-interpreter (or a case it scored needed
// an import one refuses): it says which import refused, and that scoring
// runs in the main interpreter alone. It is a notice, not a failure (OK is
// true): the metric works, on one core.
const CheckInterpreters = "interpreters"

// interpreterCount resolves Options.Interpreters: 0 is one per CPU where
// sub-interpreters exist (3.12+), else 1.
func interpreterCount(n int) int {
	if n > 0 {
		return n
	}
	if !cpython.SubInterpreters() {
		return 1
	}
	return min(runtime.NumCPU(), cpython.MaxInterpreters)
}

// The process's sub-interpreters, made on demand and shared by engines
// (each engine loads its own modules into them); never finalised.
var (
	subsMu sync.Mutex
	subs   []*cpython.Interp
)

func subInterps(n int) ([]*cpython.Interp, error) {
	subsMu.Lock()
	defer subsMu.Unlock()
	for len(subs) < n {
		in, err := cpython.NewInterp()
		if err != nil {
			return nil, err
		}
		subs = append(subs, in)
	}
	return subs[:n], nil
}

// addInterps loads the metric (and program) into n sub-interpreters, at
// once, each on its own thread, while the main interpreter already scores;
// then starts their workers. If any of them cannot load it, the engine
// scores in the main interpreter alone, and the interpreters check says
// which import refused. It closes interpsReady when done.
func (e *Engine) addInterps(n, workers int, untrusted bool) {
	defer close(e.interpsReady)
	ins, err := subInterps(n)
	var copies []*pyInterp
	if err == nil {
		copies = make([]*pyInterp, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i, in := range ins {
			copies[i] = &pyInterp{in: in}
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = e.loadCopy(copies[i], untrusted)
			}()
		}
		wg.Wait()
		for _, cerr := range errs {
			if cerr != nil && err == nil {
				err = cerr
			}
		}
	}
	if err != nil {
		for _, py := range copies {
			e.unloadFrom(py)
		}
		e.noteFallback(fmt.Sprintf("scoring in the main interpreter only (one core): the metric cannot run in a sub-interpreter: %v", err))
		return
	}
	roomForWorkers(len(copies)+1, workers)
	// Every copy is kept for Close to unload, even one whose workers could
	// not start (out of memory: the others score on).
	e.interpsMu.Lock()
	e.interps = append(e.interps, copies...)
	e.interpsMu.Unlock()
	for _, py := range copies {
		if e.closed.Load() || e.startWorkers(py, workers) != nil {
			return
		}
	}
}

// roomForWorkers raises GOMAXPROCS so that interpreters x workers threads
// running Python do not hold the Ps Go code needs: a worker back from a
// long cgo call otherwise waits for a P while the stream's goroutine holds
// one. On 2 CPUs with 2 interpreters, the difflib metric went from 170% to
// 190% CPU and 2.24 s to 1.77 s for 8,000 cases (medians of 3). A
// GOMAXPROCS the user set in the environment is left alone.
func roomForWorkers(interps, workers int) {
	if os.Getenv("GOMAXPROCS") != "" {
		return
	}
	procsMu.Lock()
	defer procsMu.Unlock()
	if want := runtime.NumCPU() + interps*workers; runtime.GOMAXPROCS(0) < want {
		runtime.GOMAXPROCS(want)
	}
}

var procsMu sync.Mutex

// startWorkers starts n workers in py's interpreter.
func (e *Engine) startWorkers(py *pyInterp, n int) error {
	for i := 0; i < n; i++ {
		if err := e.startWorker(py); err != nil {
			return err
		}
	}
	return nil
}

// Fallback says why the engine scores in the main interpreter alone although
// more interpreters were asked for (Options.Interpreters), or is "". It
// waits until the sub-interpreters have loaded the metric.
func (e *Engine) Fallback() string {
	<-e.interpsReady
	if why := e.fallback.Load(); why != nil {
		return *why
	}
	return ""
}

// noteFallback records the first reason to score in the main interpreter alone.
func (e *Engine) noteFallback(why string) bool { return e.fallback.CompareAndSwap(nil, &why) }

// refuseSubs is called when a sub-interpreter refused an import a case
// needed while scoring (a metric importing numpy or ctypes inside score):
// every sub-interpreter's worker stops, and the main interpreter scores
// that case and the rest, as with a metric that refuses at load.
func (e *Engine) refuseSubs(refusal error) {
	if !e.noteFallback(fmt.Sprintf("scoring in the main interpreter only (one core) from now on: a case needs an import a sub-interpreter refuses: %v", refusal)) {
		return
	}
	e.poolMu.Lock()
	defer e.poolMu.Unlock()
	for _, w := range e.pool {
		if w.py != e.main {
			w.retired.Store(true)
		}
	}
}

// loadCopy loads the metric (and program) already checked in the main
// interpreter into py's.
func (e *Engine) loadCopy(py *pyInterp, untrusted bool) error {
	var err error
	if gerr := py.in.WithGIL(func(g *cpython.GIL) {
		if untrusted {
			g.Untrusted(true)
			defer g.Untrusted(false)
		}
		if py.loader, err = loaderOf(g, py.in); err != nil {
			return
		}
		if py.mod, err = e.loadFile(g, py, e.path, e.module); err != nil {
			return
		}
		if py.score, err = g.Attr(py.mod, "score"); err != nil || e.program == "" {
			return
		}
		if py.pmod, err = e.loadFile(g, py, e.programPath, e.program); err != nil {
			err = fmt.Errorf("program: %w", err)
			return
		}
		py.run, err = g.Attr(py.pmod, "run")
	}); gerr != nil {
		return gerr
	}
	return err
}

// unloadFrom releases what the engine loaded into py's interpreter.
func (e *Engine) unloadFrom(py *pyInterp) {
	if py == nil || py.loader == nil {
		return
	}
	py.in.WithGIL(func(g *cpython.GIL) {
		g.Release(py.score)
		g.Release(py.run)
		for name, mod := range map[string]*cpython.Object{e.module: py.mod, e.program: py.pmod} {
			if mod != nil {
				g.Release(mod)
				e.loaderCall(g, py, "unload", name)
			}
		}
	})
}

// Interpreters is how many interpreters score in parallel (see
// Options.Interpreters). The main interpreter scores from Open on, the
// others once they have loaded the metric: Interpreters waits for them.
func (e *Engine) Interpreters() int {
	<-e.interpsReady
	if e.fallback.Load() != nil {
		return 1
	}
	e.interpsMu.Lock()
	defer e.interpsMu.Unlock()
	return len(e.interps)
}
