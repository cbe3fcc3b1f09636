// Package engine runs a user's metric.py in-process: it loads the metric into
// the embedded CPython, checks its contract and scores cases on one or more
// Python threads (Options.Threads), which share the process's GIL. A worker
// process that wants python3's main-thread semantics for the metric (signal
// handlers, alarm timeouts) opens its engine with Options.MainThread.
//
//	e, err := engine.Open(engine.Options{Metric: "metric.py"})
//	if err != nil { ... }            // *CheckError when a load-time check fails
//	defer e.Close()
//	r := e.Score(ctx, engine.Case{ID: "1", Input: map[string]any{"q": "2+2"}, Output: "4",
//	    Expected: map[string]any{"label": "4"}})
//
// Score is safe for concurrent use. Every Case gets exactly one Result: a
// metric that raises, overruns its timeout or returns a bad value produces a
// Result with Err set, and the engine goes on serving other cases.
//
// The API is a few nouns: Options and Open make an Engine; Check runs the
// contract check on sample cases; Score, ScoreAll (a stream, in order) and
// Evaluate (run a program, then score) turn Cases into Results. Package
// caseio reads them from case files and datasets and writes results lines.
// The examples run against the files in testdata/.
package engine

import (
	_ "embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/skynetml/skynet/cpython"
	"github.com/skynetml/skynet/llm"
	"github.com/skynetml/skynet/reward"
)

// Defaults and limits of Options (SPEC §1).
const (
	DefaultTimeout = 60 * time.Second  // Options.Timeout when 0
	MaxTimeout     = 600 * time.Second // the largest Timeout or RunTimeout Open accepts
	DefaultSamples = 3                 // Options.Samples when 0
	DefaultLogs    = 64 << 10          // Options.LogsLimit when 0, in bytes

	// argCacheBytes bounds the encoded size of argument values whose Python
	// objects are kept for reuse.
	argCacheBytes = 64 << 20
)

// Options configures an Engine. The zero value of each field means its default.
type Options struct {
	// Metric is the path of metric.py.
	Metric string
	// Program is the path of program.py, whose run(artifact, input) Evaluate
	// calls before score; optional.
	Program string
	// RunTimeout bounds each run call (default: Timeout, at most 600s).
	RunTimeout time.Duration
	// Timeout bounds each score call: default 60s, at most 600s.
	Timeout time.Duration
	// Samples is how many cases Check calls score on (default 3).
	Samples int
	// Threads is how many Python threads score in this process, sharing
	// its one GIL (default 1). More only help calls that wait (skynet.llm,
	// I/O): CPU-bound metrics scale with more processes instead.
	Threads int
	// MainThread scores on the process's main thread, as python3 runs a
	// script: signal.signal (and so signal.alarm and setitimer timeouts),
	// os.fork and multiprocessing behave there as under python3 (see
	// cpython.Config.MainThread). Open must then be called on the main
	// goroutine, locked to the main thread (runtime.LockOSThread in an init
	// function); it imports the metric there. The first scoring thread runs
	// there too, once the process calls cpython.ServeMainThread: with
	// Threads 1 no case is scored before. The other Threads-1 threads are
	// ordinary ones, where signal.signal raises ValueError (see CheckThreads).
	// One engine per process may use the main thread at a time.
	MainThread bool
	// NoSpin makes the engine's waits block at once rather than poll for up
	// to 2 ms first. Polling saves a wake-up (microseconds) a batch to a
	// process with a core to spare; where processes share the cores (the
	// pool's workers, one a core), the polling thread takes the CPU another
	// process scores on: the pool measured 20% more CPU, and up to 20% more
	// time, with it.
	NoSpin bool
	// AdaptProcs lets a MainThread engine of one thread change the
	// process's GOMAXPROCS: 1 while its batches are short (a cheap metric),
	// back to what it was while they are long, and at Close. For a process
	// that runs nothing else in Go (the pool's workers set it); ignored
	// otherwise.
	AdaptProcs bool
	// LogsLimit bounds the output of print() kept per case, in bytes (default 64 KiB).
	LogsLimit int
	// PythonExecutable selects the Python installation or virtualenv, e.g.
	// "venv/bin/python". Default: $VIRTUAL_ENV/bin/python if set, else the
	// installation libpython was built for. One per process.
	PythonExecutable string
	// PythonHome overrides the standard library location (PYTHONHOME).
	PythonHome string
	// PythonMemoryLimit caps the memory Python code may hold, in bytes
	// (0: no cap): an allocation bomb then raises MemoryError in its case
	// instead of the process being killed. One per process, like the
	// interpreter; it slows allocation, so it is opt-in.
	PythonMemoryLimit int64
	// Untrusted runs score and run under an audit hook that refuses process
	// creation, signals to other processes, ctypes, and writes outside
	// AllowWrites; each refusal is a PermissionError (a case error).
	Untrusted bool
	// AllowWrites are the directories untrusted code may write to
	// (process-wide: every untrusted engine shares them).
	AllowWrites []string
	// LLM makes the metric's skynet.llm() calls. Nil: EnvLLM's client,
	// configured from the environment (SKYNET_METRIC_MODEL,
	// SKYNET_REFLECTION_MODEL, SKYNET_LLM_BASE_URL or OPENAI_BASE_URL,
	// SKYNET_API_KEY or OPENAI_API_KEY) once per process, at the first Open:
	// variables set later are not seen, so pass a client made with llm.New
	// to configure an engine in code.
	LLM *llm.Client `json:"-"` // a process's own: it does not cross to a worker
}

// Engine scores cases with one loaded metric (and program, for Evaluate).
// Open makes one; its methods are safe for concurrent use; Close frees it.
type Engine struct {
	path        string
	module      string // unique sys.modules name of the metric
	timeout     time.Duration
	samples     int
	logsLimit   int
	nargs       int // 2 or 3: how score is called
	runTimeout  time.Duration
	program     string // unique sys.modules name of the program, if any
	programPath string
	spec        *reward.Spec
	loadChecks  []Check
	py          *pyMetric
	threads     int  // Options.Threads, resolved: with an async score, the cases in flight on its loop
	mainThread  bool // Options.MainThread
	noSpin      bool // Options.NoSpin
	adaptProcs  bool // Options.AdaptProcs
	async       bool // score is `async def`: it runs on an event loop (aio)
	aio         *aioLoop

	scheduler // the queue, worker threads, batches and watchdog (scheduler.go)

	closing    sync.Once
	closed     atomic.Bool
	scoreCalls atomic.Int64
	mode       cpython.Mode

	cache *cpython.ArgCache   // Python objects of repeated argument values
	str   func([]byte) string // makes result strings, sharing repeated ones (internTable)
	llm   *llm.Client
}

// pyMetric is the metric (and program) loaded into Python. Its objects are
// touched only with the GIL.
type pyMetric struct {
	loader *cpython.Object
	mod    *cpython.Object
	score  *cpython.Object
	pmod   *cpython.Object // program module and its run, if any
	run    *cpython.Object
}

//go:embed loader.py
var loaderSource string

var moduleSeq atomic.Uint64

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_]`)

// moduleName is a sys.modules name no other loaded file has.
func moduleName(kind, path string) string {
	base := unsafeName.ReplaceAllString(filepath.Base(path[:len(path)-len(filepath.Ext(path))]), "_")
	return fmt.Sprintf("skynet_%s_%d_%s", kind, moduleSeq.Add(1), base)
}

var (
	envOnce   sync.Once
	envClient *llm.Client
	envErr    error
)

// EnvLLM is the model client configured from the environment, made once
// per process. Making it also removes the API key variables from the
// environment, so Python code started afterwards never sees them; call it
// (or Open) before anything starts the interpreter.
func EnvLLM() (*llm.Client, error) {
	envOnce.Do(func() {
		cfg := llm.ConfigFromEnv()
		llm.ScrubEnv()
		envClient, envErr = llm.New(cfg)
	})
	return envClient, envErr
}

// LLM is the client that makes this engine's skynet.llm() calls.
func (e *Engine) LLM() *llm.Client { return e.llm }

// Stats counts what an engine has done, for optimizers that enforce budgets.
type Stats struct {
	// ScoreCalls is how many score calls have returned, with a score or
	// not; a case whose run failed (Evaluate) made none. A call still
	// running after its timeout (blocked in time.sleep or a socket read) is
	// counted when it returns.
	ScoreCalls int64
	// Models counts llm() calls, tokens, cost and cache hits by role. They
	// are the client's: totals over every engine that shares it.
	Models map[llm.Role]llm.Stats
}

// Sub returns what happened between before and s: a run's own counts.
func (s Stats) Sub(before Stats) Stats {
	d := Stats{ScoreCalls: s.ScoreCalls - before.ScoreCalls, Models: map[llm.Role]llm.Stats{}}
	for r, m := range s.Models {
		b := before.Models[r]
		d.Models[r] = llm.Stats{Calls: m.Calls - b.Calls, Failures: m.Failures - b.Failures, Retries: m.Retries - b.Retries,
			InputTokens: m.InputTokens - b.InputTokens, OutputTokens: m.OutputTokens - b.OutputTokens,
			CostUSD: m.CostUSD - b.CostUSD, Unpriced: m.Unpriced - b.Unpriced, CacheHits: m.CacheHits - b.CacheHits}
	}
	return d
}

// Stats returns the engine's counts so far; Sub two of them for one run's.
func (e *Engine) Stats() Stats {
	s := Stats{ScoreCalls: e.scoreCalls.Load(), Models: map[llm.Role]llm.Stats{}}
	for _, r := range []llm.Role{llm.RoleMetric, llm.RoleReflection, llm.RoleTask} {
		s.Models[r] = e.llm.Stats(r)
	}
	return s
}

// Open loads the metric and checks its signature (and REWARD_SPEC when it
// defines one). A failed check is returned as a *CheckError.
func Open(opts Options) (*Engine, error) {
	timeout, err := timeLimit("timeout", opts.Timeout, DefaultTimeout)
	if err != nil {
		return nil, err
	}
	runTimeout, err := timeLimit("run timeout", opts.RunTimeout, timeout)
	if err != nil {
		return nil, err
	}
	if opts.Samples < 0 || opts.Threads < 0 || opts.LogsLimit < 0 {
		return nil, errors.New("engine: Samples, Threads and LogsLimit must not be negative")
	}
	if opts.Metric == "" {
		return nil, errors.New("engine: Options.Metric is empty: give the path of metric.py")
	}
	path, err := filepath.Abs(opts.Metric)
	if err != nil {
		return nil, fmt.Errorf("engine: metric path: %w", err)
	}
	e := &Engine{
		path:       path,
		timeout:    timeout,
		runTimeout: runTimeout,
		samples:    orDefault(opts.Samples, DefaultSamples),
		logsLimit:  orDefault(opts.LogsLimit, DefaultLogs),
		threads:    orDefault(opts.Threads, 1),
		mainThread: opts.MainThread,
		noSpin:     opts.NoSpin,
		adaptProcs: opts.AdaptProcs,
		str:        newInternTable().make,
		scheduler:  newScheduler(),
	}
	e.module = moduleName("metric", path)

	if st, err := os.Stat(path); err != nil || st.IsDir() {
		msg := fmt.Sprintf("%s: no such file", opts.Metric)
		if err == nil {
			msg = fmt.Sprintf("%s is a directory, not a metric file", opts.Metric)
		}
		return nil, &CheckError{Checks: []Check{{Name: CheckLoads, Message: msg}}, Err: err}
	}
	if e.llm = opts.LLM; e.llm == nil {
		if e.llm, err = EnvLLM(); err != nil {
			return nil, fmt.Errorf("engine: %w", err)
		}
	}
	if err := cpython.Initialize(cpython.Config{
		Executable:  opts.PythonExecutable,
		Home:        opts.PythonHome,
		MemoryLimit: opts.PythonMemoryLimit,
		MainThread:  opts.MainThread, // which checks that Open runs on the main thread
		// sys.argv stays CPython's embedded default, [""]: the metric is
		// imported as a module, not run as the script sys.argv[0] names.
	}); err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	e.mode = cpython.Capture
	if opts.Untrusted {
		e.mode |= cpython.Untrusted
		for _, dir := range opts.AllowWrites {
			if err := cpython.AllowWrites(dir); err != nil {
				return nil, fmt.Errorf("engine: %w", err)
			}
		}
	}
	e.py = &pyMetric{}
	var loadErr error
	if err := cpython.WithGIL(func(g *cpython.GIL) {
		if opts.Untrusted { // import-time code is untrusted too
			g.Untrusted(true)
			defer g.Untrusted(false)
		}
		if loadErr = e.load(g, e.py, opts.Metric); loadErr == nil && opts.Program != "" {
			loadErr = e.loadProgram(g, e.py, opts.Program)
		}
	}); err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	if loadErr != nil {
		e.Close()
		return nil, loadErr
	}
	if e.cache, err = cpython.NewArgCache(argCacheBytes); err != nil {
		e.Close()
		return nil, fmt.Errorf("engine: %w", err)
	}
	if e.budget = batchBudget; e.threads == 1 {
		e.budget = soloBudget
	}
	if e.async {
		var driver *cpython.Object
		var derr error
		if err := cpython.WithGIL(func(g *cpython.GIL) { driver, derr = aioDriverOf(g) }); err != nil || derr != nil {
			e.Close()
			return nil, errors.Join(err, derr)
		}
		if err := e.startAio(driver); err != nil {
			if e.aio == nil { // else unload releases it
				cpython.WithGIL(func(g *cpython.GIL) { g.Release(driver) })
			}
			e.Close()
			return nil, err
		}
	}
	for i := 0; i < e.threads && !e.async; i++ {
		if err := e.startWorker(e.mainThread && i == 0); err != nil {
			e.Close()
			return nil, err
		}
	}
	go e.watchdog()
	return e, nil
}

// timeLimit checks a time limit option: 0 means def, and at most MaxTimeout.
func timeLimit(name string, d, def time.Duration) (time.Duration, error) {
	switch {
	case d < 0:
		return 0, fmt.Errorf("engine: %s must be positive, got %s", name, d)
	case d == 0:
		return def, nil
	case d > MaxTimeout:
		return 0, fmt.Errorf("engine: %s %s exceeds the maximum of %s", name, d, MaxTimeout)
	}
	return d, nil
}

func orDefault(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// load imports the metric and makes the load-time checks. Runs with the GIL.
func (e *Engine) load(th *cpython.GIL, py *pyMetric, shown string) error {
	var err error
	if py.loader, err = loaderModule.get(th); err != nil {
		return err
	}
	if e.mainThread {
		// Before the import: import-time code may set a handler too.
		if _, err := e.loaderCall(th, py, "watch_signals", e.path); err != nil {
			return fmt.Errorf("engine: %w", err)
		}
		e.module = e.stemName(th, py, e.path, e.module)
	}
	if py.mod, err = e.importFile(th, py, e.path, e.module, shown, CheckLoads); err != nil {
		return err
	}
	n, err := e.signature(th, py, "arity", py.mod, CheckSignature)
	if err != nil {
		return err
	}
	e.nargs = n
	if py.score, err = th.Attr(py.mod, "score"); err != nil {
		return err
	}
	async, err := e.loaderCall(th, py, "is_async", py.mod)
	if err != nil {
		return err
	}
	e.async = async == true

	has, err := e.loaderCall(th, py, "has", py.mod, "REWARD_SPEC")
	if err != nil {
		return err
	}
	if has == true {
		raw, err := e.loaderCall(th, py, "get", py.mod, "REWARD_SPEC")
		if err != nil {
			return err
		}
		spec, perr := reward.Parse(cpython.Plain(raw))
		if perr != nil {
			msg := perr.Error()
			if se, ok := errors.AsType[*reward.SpecError](perr); ok {
				msg = se.Detail() // the check's name already says REWARD_SPEC
			}
			return e.fail(Check{Name: CheckRewardSpec, Message: msg})
		}
		e.spec = spec
		e.loadChecks = append(e.loadChecks, Check{Name: CheckRewardSpec, OK: true, Message: "valid"})
	}
	return nil
}

// embeddedModule is a module of this package's Python, run once in the
// process's interpreter and shared by engines.
type embeddedModule struct {
	name, file, source, what string
	mu                       sync.Mutex
	mod                      *cpython.Object
	err                      error
}

var loaderModule = &embeddedModule{name: "_skynet_loader", file: "<skynet loader>", source: loaderSource, what: "the metric loader"}

// get returns the module, running it the first time. Runs with the GIL.
func (m *embeddedModule) get(g *cpython.GIL) (*cpython.Object, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mod == nil && m.err == nil {
		if m.mod, m.err = g.ExecModule(m.name, m.file, m.source); m.err != nil {
			m.err = fmt.Errorf("engine: starting %s: %w", m.what, m.err)
		}
	}
	return m.mod, m.err
}

// stemName is the name `import metric` would give path ("metric" for
// metric.py) when a MainThread engine, the one metric of its process, can
// take it: no module has it and it finds no other file. Then code that
// refers to the metric's module by name works as under python3 script.py:
// multiprocessing's spawn children import it, pickle finds its classes.
// Else fallback, a name of its own.
func (e *Engine) stemName(g *cpython.GIL, py *pyMetric, path, fallback string) string {
	v, err := e.loaderCall(g, py, "stem_name", path)
	if s, ok := v.(string); err == nil && ok && s != "" {
		return s
	}
	return fallback
}

// loadFile loads a file as module name.
func (e *Engine) loadFile(g *cpython.GIL, py *pyMetric, path, name string) (*cpython.Object, error) {
	loadFn, err := g.Attr(py.loader, "load")
	if err != nil {
		return nil, err
	}
	defer g.Release(loadFn)
	return g.CallObject(loadFn, path, name)
}

// importFile loads a file as module name and records the check: ok, or
// failed with the error and its traceback (returned as a *CheckError).
func (e *Engine) importFile(g *cpython.GIL, py *pyMetric, path, name, shown, check string) (*cpython.Object, error) {
	mod, err := e.loadFile(g, py, path, name)
	if err != nil {
		c := Check{Name: check, Message: fmt.Sprintf("%s: %v", shown, err)}
		if pe, ok := cpython.AsError(err); ok {
			c.Detail = pe.Traceback
		}
		return nil, e.fail(c)
	}
	e.loadChecks = append(e.loadChecks, Check{Name: check, OK: true, Message: "loaded " + shown})
	return mod, nil
}

// signature asks the loader's arity function (arity or run_arity) how mod's
// function is called and records the check; 0 arguments is a failed check.
func (e *Engine) signature(g *cpython.GIL, py *pyMetric, arity string, mod *cpython.Object, check string) (int, error) {
	v, err := e.loaderCall(g, py, arity, mod)
	if err != nil {
		return 0, err
	}
	pair, _ := v.([]any)
	if len(pair) != 2 {
		return 0, fmt.Errorf("engine: loader returned %v", v)
	}
	n, _ := pair[0].(int64)
	desc, _ := pair[1].(string)
	if n == 0 {
		return 0, e.fail(Check{Name: check, Message: desc})
	}
	e.loadChecks = append(e.loadChecks, Check{Name: check, OK: true, Message: desc})
	return int(n), nil
}

// fail records a failed load-time check and returns the *CheckError.
func (e *Engine) fail(c Check) error {
	e.loadChecks = append(e.loadChecks, c)
	return &CheckError{Checks: e.loadChecks}
}

func (e *Engine) loaderCall(th *cpython.GIL, py *pyMetric, name string, args ...any) (any, error) {
	fn, err := th.Attr(py.loader, name)
	if err != nil {
		return nil, err
	}
	defer th.Release(fn)
	objs := make([]any, 0, len(args))
	var mod *cpython.Object
	for _, a := range args {
		if o, ok := a.(*cpython.Object); ok {
			mod = o
			continue
		}
		objs = append(objs, a)
	}
	if mod == nil {
		return th.CallValue(fn, objs...)
	}
	return th.CallValueWith(fn, mod, objs...)
}

func (e *Engine) workerCount() int {
	e.poolMu.Lock()
	defer e.poolMu.Unlock()
	return len(e.pool)
}

// pythonThreads is how many Python threads score: Options.Threads, or 1
// for an `async def score`, whose cases (Threads of them at once) share
// one event loop on one thread.
func (e *Engine) pythonThreads() int {
	if e.async {
		return 1
	}
	return e.threads
}

// Async reports whether score is `async def`.
func (e *Engine) Async() bool { return e.async }

// Arity is how many arguments score is called with: 2 or 3.
func (e *Engine) Arity() int { return e.nargs }

// RewardSpec is the metric's validated REWARD_SPEC, or nil.
func (e *Engine) RewardSpec() *reward.Spec { return e.spec }

// ErrClosed is why a case scored on (or while) closing its Engine has a
// canceled Result: errors.Is(r.Err, ErrClosed).
var ErrClosed = errors.New("engine is closed")

// Close stops the workers and unloads the metric; cases in flight get
// canceled Results (errors.Is(r.Err, ErrClosed)). It is idempotent. It waits
// at most 2 s for calls in flight to return: a call blocked outside Python
// bytecode (a sleep, a socket read, C code) keeps its worker's goroutine and
// thread until it returns, and the one goroutine that owns the interpreter
// stays for the life of the process. With MainThread, the main thread is
// free again once its worker has returned (and the wait includes a worker
// the process never served).
func (e *Engine) Close() error {
	e.closing.Do(func() {
		e.closed.Store(true)
		close(e.quit)
		if e.aio != nil {
			e.aio.shutdown()
		}
		e.freeSpare()
		done := make(chan struct{})
		go func() {
			e.workers.Wait()
			// Taking the GIL waits behind C code that never releases it; the
			// select below bounds how long Close waits for that.
			if e.cache != nil {
				e.cache.Close()
			}
			e.unload()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(2 * time.Second):
		}
	})
	return nil
}

// unload releases what the engine loaded.
func (e *Engine) unload() {
	py := e.py
	if py == nil || py.loader == nil {
		return
	}
	cpython.WithGIL(func(g *cpython.GIL) {
		g.Release(py.score)
		g.Release(py.run)
		if e.aio != nil {
			g.Release(e.aio.driver)
		}
		for name, mod := range map[string]*cpython.Object{e.module: py.mod, e.program: py.pmod} {
			if mod != nil {
				g.Release(mod)
				e.loaderCall(g, py, "unload", name)
			}
		}
		if e.mainThread {
			e.loaderCall(g, py, "unwatch_signals", e.path, e.programPath)
		}
	})
}
