package cpython

import (
	"encoding/json"
	"math"
	"math/big"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(mainThreadEnv); dir != "" {
		os.Exit(mainThreadChild(dir))
	}
	// faulthandler must stay off whatever the environment says (EMBEDDING.md #3).
	os.Setenv("PYTHONFAULTHANDLER", "1")
	if err := Initialize(Config{argv: []string{"metric.py"}}); err != nil {
		panic(err)
	}
	// Before any test's call can import it.
	if err := WithGIL(func(g *GIL) {
		mod, err := g.ExecModule("threading_at_init", "<test>", "import sys\nloaded = 'threading' in sys.modules\n")
		if err != nil {
			panic(err)
		}
		v, _ := g.Attr(mod, "loaded")
		threadingAtInit, _ = g.value(v)
		g.Release(v)
		g.Release(mod)
	}); err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}

var threadingAtInit any // whether threading was imported when Initialize returned

// TestThreadingMainThread: threading's main thread is the one that
// initialised the runtime, the one signal.signal accepts, not the first
// thread whose call imports threading: code that checks current_thread()
// is main_thread() before signal.signal (DSPy's parallel executor,
// timeout helpers) must take its other path on a call's thread.
func TestThreadingMainThread(t *testing.T) {
	assert.Equal(t, true, threadingAtInit, "Initialize imports threading on the initialising thread")
	withThread(t, func(th *GIL) {
		fn := module(t, th, "f", `
import signal, threading
def f():
    main = threading.current_thread() is threading.main_thread()
    try:
        signal.signal(signal.SIGUSR2, signal.getsignal(signal.SIGUSR2))
        works = True
    except ValueError:
        works = False
    return [main, works]
`)
		v, err := th.CallValue(fn)
		require.NoError(t, err)
		assert.Equal(t, []any{false, false}, v, "[current_thread() is main_thread(), signal.signal works] on a call's thread")
	})
}

// withThread runs fn with the GIL held (setup-style calls).
func withThread(t *testing.T, fn func(th *GIL)) {
	t.Helper()
	require.NoError(t, WithGIL(fn))
}

// module runs source as a fresh module and returns its attribute name.
func module(t *testing.T, th *GIL, name, source string) *Object {
	mod, err := th.ExecModule("test_"+strings.ReplaceAll(t.Name(), "/", "_"), "<test>", source)
	require.NoError(t, err)
	fn, err := th.Attr(mod, name)
	require.NoError(t, err)
	th.Release(mod)
	return fn
}

// function returns a module-level function, made with the GIL, for Caller use.
func function(t testing.TB, name, source string) *Object {
	var fn *Object
	require.NoError(t, WithGIL(func(g *GIL) {
		mod, err := g.ExecModule("test_"+strings.NewReplacer("/", "_", "#", "_").Replace(t.Name()), "<test>", source)
		require.NoError(t, err)
		fn, err = g.Attr(mod, name)
		require.NoError(t, err)
		g.Release(mod)
	}))
	return fn
}

func release(objs ...*Object) {
	WithGIL(func(g *GIL) {
		for _, o := range objs {
			g.Release(o)
		}
	})
}

// newCaller is a Caller closed when the test ends.
func newCaller(t *testing.T) *Caller {
	t.Helper()
	c, err := NewCaller(64 << 10)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

func TestRoundTrip(t *testing.T) {
	withThread(t, func(th *GIL) {
		ident := module(t, th, "f", "def f(x):\n    return x\n")
		defer th.Release(ident)
		big1, _ := new(big.Int).SetString("123456789012345678901234567890", 10)
		cases := []struct {
			in, want any
		}{
			{nil, nil},
			{true, true},
			{false, false},
			{42, int64(42)},
			{int64(math.MinInt64), int64(math.MinInt64)},
			{uint64(math.MaxUint64), new(big.Int).SetUint64(math.MaxUint64)},
			{big1, big1},
			{1.5, 1.5},
			{"héllo ✓", "héllo ✓"},
			{[]byte{0, 1, 2}, []byte{0, 1, 2}},
			{[]any{1, "a", nil}, []any{int64(1), "a", nil}},
			{Tuple{1, 2}, Tuple{int64(1), int64(2)}},
			{map[string]any{"b": 1, "a": 2}, &Dict{Keys: []any{"a", "b"}, Values: []any{int64(2), int64(1)}}},
			{[]string{"x"}, []any{"x"}},
			{map[string]int{"k": 3}, &Dict{Keys: []any{"k"}, Values: []any{int64(3)}}},
			{json.RawMessage(`{"z": 1, "a": [true, 2.5, "\ud83d\ude00"]}`),
				&Dict{Keys: []any{"z", "a"}, Values: []any{int64(1), []any{true, 2.5, "😀"}}}},
		}
		for _, c := range cases {
			got, err := th.CallValue(ident, c.in)
			require.NoError(t, err, "%#v", c.in)
			assert.Equal(t, c.want, got, "%#v", c.in)
		}
	})
}

func TestPythonSideTypes(t *testing.T) {
	withThread(t, func(th *GIL) {
		f := module(t, th, "f", `
import fractions
class Odd:
    def __repr__(self): return "<odd>"
def nest(n):
    v = []
    for _ in range(n):
        v = [v]
    return v
def f(which):
    return {
        "json": __import__("json").loads('{"n": 5, "x": 5.0, "s": "\\ud800", "big": 100000000000000000000}'),
        "set": {1},
        "frac": fractions.Fraction(1, 4),
        "odd": Odd(),
        "lone": "a\udc80b",
        "nested": nest(300),
    }[which]
`)
		defer th.Release(f)
		v, err := th.CallValue(f, "json")
		require.NoError(t, err)
		d := v.(*Dict)
		n, _ := d.Get("n")
		x, _ := d.Get("x")
		assert.Equal(t, int64(5), n, "JSON ints stay ints")
		assert.Equal(t, 5.0, x)
		s, _ := d.Get("s")
		assert.Equal(t, `\ud800`, s, "lone surrogates come back escaped")
		bigv, _ := d.Get("big")
		assert.Equal(t, "100000000000000000000", bigv.(*big.Int).String())

		v, err = th.CallValue(f, "set")
		require.NoError(t, err)
		assert.Equal(t, Foreign{Type: "set", Repr: "{1}"}, v)
		v, err = th.CallValue(f, "frac")
		require.NoError(t, err)
		assert.Equal(t, 0.25, v, "objects with __float__ are numbers")
		v, err = th.CallValue(f, "odd")
		require.NoError(t, err)
		assert.Equal(t, Foreign{Type: "test_TestPythonSideTypes.Odd", Repr: "<odd>"}, v)
		v, err = th.CallValue(f, "lone")
		require.NoError(t, err)
		assert.Equal(t, `a\udc80b`, v)
		v, err = th.CallValue(f, "nested")
		require.NoError(t, err, "deep nesting is reported, not a crash")
		for depth := 0; ; depth++ {
			if l, ok := v.([]any); ok {
				v = l[0]
				continue
			}
			assert.Equal(t, Foreign{Type: "list", Repr: "<nested too deeply>"}, v)
			assert.Equal(t, maxDepth+1, depth)
			break
		}
	})
}

func TestJSONSurrogatesReachPython(t *testing.T) {
	withThread(t, func(th *GIL) {
		f := module(t, th, "f", "def f(x):\n    return [len(x), ord(x[0])]\n")
		defer th.Release(f)
		v, err := th.CallValue(f, json.RawMessage(`"\ud800"`))
		require.NoError(t, err)
		assert.Equal(t, []any{int64(1), int64(0xD800)}, v)
	})
}

func TestExceptionsBecomeErrors(t *testing.T) {
	withThread(t, func(th *GIL) {
		f := module(t, th, "f", `
import sys
class Custom(Exception): pass
def f(kind):
    if kind == "zero": return 1 / 0
    if kind == "exit": sys.exit(3)
    if kind == "kbd": raise KeyboardInterrupt
    if kind == "custom": raise Custom("mine")
    if kind == "recurse": return f(kind)
`)
		defer th.Release(f)
		for kind, want := range map[string]string{
			"zero": "ZeroDivisionError: division by zero", "exit": "SystemExit: 3",
			"kbd": "KeyboardInterrupt", "custom": "test_TestExceptionsBecomeErrors.Custom: mine",
			"recurse": "RecursionError: maximum recursion depth exceeded",
		} {
			_, err := th.CallValue(f, kind)
			pe, ok := AsError(err)
			require.True(t, ok, kind)
			if kind == "recurse" {
				// CPython 3.10 names where the limit was hit: "... exceeded in
				// comparison" here (kind == "zero"), or "while calling a Python object".
				assert.Regexp(t, "^"+regexp.QuoteMeta(want)+"( in comparison| while calling a Python object)?$", pe.Error())
			} else {
				assert.Equal(t, want, pe.Error(), kind)
			}
			assert.Contains(t, pe.Traceback, "Traceback (most recent call last)", kind)
			assert.Contains(t, pe.Traceback, `<test>", line`, kind)
		}
	})
}

func TestInterruptStopsBusyLoopAndDoesNotLeak(t *testing.T) {
	f := function(t, "f", "def f(n):\n    while True:\n        n += 1\n")
	g := function(t, "g", "def g(n):\n    return n\n")
	defer release(f, g)
	c := newCaller(t)
	token := newToken()
	go func() {
		time.Sleep(50 * time.Millisecond)
		Interrupt(token)
	}()
	var e Encoder
	require.NoError(t, e.Value(0))
	start := time.Now()
	_, err := c.Call(f, e.Bytes(), 1, token, false, 0)
	pe, ok := AsError(err)
	require.True(t, ok)
	assert.True(t, pe.interrupted(), pe.Error())
	assert.Less(t, time.Since(start), 5*time.Second)
	// A late interrupt for a finished call must not hit the next call.
	assert.False(t, Interrupt(token))
	v, err := c.Call(g, e.Bytes(), 1, newToken(), false, 0)
	require.NoError(t, err)
	assert.Equal(t, int64(0), v)
}

func TestCaptureIsPerCallAndBounded(t *testing.T) {
	f := function(t, "f", "import sys\ndef f(n):\n    print('x' * n)\n    sys.stderr.write('err\\n')\n    return n\n")
	defer release(f)
	c := newCaller(t)
	var e Encoder
	require.NoError(t, e.Value(3))
	_, err := c.Call(f, e.Bytes(), 1, 0, true, 0)
	require.NoError(t, err)
	logs, cut := c.logs()
	assert.Equal(t, "xxx\nerr\n", logs)
	assert.False(t, cut)
	e.reset()
	require.NoError(t, e.Value(100_000))
	_, err = c.Call(f, e.Bytes(), 1, 0, true, 0)
	require.NoError(t, err)
	logs, cut = c.logs()
	assert.Len(t, logs, 64<<10)
	assert.True(t, cut)
}

func TestInterpreterConfig(t *testing.T) {
	withThread(t, func(th *GIL) {
		f := module(t, th, "f", `
import faulthandler, os, signal, sys, sysconfig
def f():
    return {
        "executable": sys.executable,
        "bindir_python": os.path.join(sysconfig.get_config_var("BINDIR"), "python" + sysconfig.get_config_var("VERSION")),
        "faulthandler": faulthandler.is_enabled(),
        "sigint_python": signal.getsignal(signal.SIGINT) is signal.default_int_handler,
        "sigpipe_ignored": signal.getsignal(signal.SIGPIPE) == signal.SIG_IGN,
        "argv": sys.argv,
        "encoding": sys.stdout.encoding,
    }
`)
		defer th.Release(f)
		v, err := th.CallValue(f)
		require.NoError(t, err)
		d := v.(*Dict)
		for key, want := range map[string]any{
			"faulthandler": false, "sigint_python": false, "sigpipe_ignored": false,
			"argv": []any{"metric.py"}, "encoding": "utf-8",
		} {
			got, _ := d.Get(key)
			assert.Equal(t, want, got, key)
		}
		// sys.executable is the installation's own python (sysconfig's
		// BINDIR/python3.X), whatever sys.argv[0] says, found before
		// the interpreter started.
		exe, _ := d.Get("executable")
		bindir, _ := d.Get("bindir_python")
		assert.Equal(t, bindir, exe)
		assert.Equal(t, installedPython(), exe)
	})
}

func TestNoReferenceLeak(t *testing.T) {
	f := function(t, "f", "def f(i, o, e):\n    return (0.5, {'feedback': 'ok', 'scores': {'a': 1}})\n")
	blocks := function(t, "b", "import sys\ndef b():\n    return sys.getallocatedblocks()\n")
	defer release(f, blocks)
	c := newCaller(t)
	var e Encoder
	require.NoError(t, e.rawJSON([]byte(`{"question": "q", "n": [1, 2, 3]}`)))
	require.NoError(t, e.Value("out"))
	require.NoError(t, e.Value(map[string]any{"label": "x"}))
	run := func(n int) {
		for i := 0; i < n; i++ {
			_, err := c.Call(f, e.Bytes(), 3, newToken(), true, 0)
			require.NoError(t, err)
		}
	}
	count := func() int64 {
		v, err := c.Call(blocks, nil, 0, 0, false, 0)
		require.NoError(t, err)
		return v.(int64)
	}
	run(1000)
	before := count()
	run(50_000)
	after := count()
	assert.InDelta(t, before, after, 50, "allocated blocks grew: a reference leaks per call")
}

func TestConcurrentCallers(t *testing.T) {
	f := function(t, "f", "def f(x):\n    return x * 2\n")
	defer release(f)
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := NewCaller(0)
			require.NoError(t, err)
			defer c.Close()
			for j := 0; j < 2000; j++ {
				var e Encoder
				require.NoError(t, e.Value(j))
				v, err := c.Call(f, e.Bytes(), 1, 0, false, 0)
				require.NoError(t, err)
				require.Equal(t, int64(2*j), v)
			}
		}()
	}
	wg.Wait()
}

func TestSecondInitializeWithOtherConfigFails(t *testing.T) {
	assert.NoError(t, Initialize(Config{}))
	assert.ErrorIs(t, Initialize(Config{Executable: os.Args[0]}), errConfigConflict)
	// Not on the main thread, or the interpreter started off it: either way no.
	assert.ErrorContains(t, Initialize(Config{MainThread: true}), "cpython: MainThread: ")
}

// Without main-thread mode there is no main thread to lend.
func TestNoMainThreadService(t *testing.T) {
	assert.False(t, OnMainThread(func() { t.Error("ran") }))
	assert.ErrorContains(t, ServeMainThread(make(chan struct{})), "not initialised with MainThread")
}

// A JSON error names the character where it stopped as that character, not
// as its first byte read as Latin-1 (U+00A0 was reported as 'Â').
func TestJSONErrorNamesTheCharacter(t *testing.T) {
	for src, want := range map[string]string{
		"\u00a0":            "unexpected U+00A0",
		"é":                 "unexpected 'é' (U+00E9)",
		"x":                 "unexpected 'x'",
		"\xc2":              "unexpected byte 0xC2 (not UTF-8)",
		"{\"a\": 1 \u00a0}": "unexpected U+00A0, expected ',' or '}'",
		"1 \u00a0":          "unexpected U+00A0 after the JSON value",
	} {
		_, err := AppendJSON(nil, []byte(src))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("AppendJSON(%q) = %v, want %q", src, err, want)
		}
	}
	_, err := SplitObject([]byte("{\"a\": 1\u00a0}"), nil)
	if err == nil || !strings.Contains(err.Error(), "unexpected U+00A0") {
		t.Errorf("SplitObject: %v", err)
	}
}
