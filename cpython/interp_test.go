package cpython

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// subInterps returns n new sub-interpreters, or skips before CPython 3.12.
func subInterps(t *testing.T, n int) []*Interp {
	t.Helper()
	if !SubInterpreters() {
		_, err := NewInterp()
		require.ErrorContains(t, err, "need CPython 3.12 or later")
		require.ErrorContains(t, err, PythonVersion())
		t.Skipf("CPython %s has no per-interpreter GIL", PythonVersion())
	}
	var out []*Interp
	for i := 0; i < n; i++ {
		in, err := NewInterp()
		require.NoError(t, err)
		out = append(out, in)
	}
	return out
}

// functionIn is function for interpreter in.
func functionIn(t *testing.T, in *Interp, name, source string) *Object {
	var fn *Object
	require.NoError(t, in.WithGIL(func(g *GIL) {
		mod, err := g.ExecModule("test_"+strings.ReplaceAll(t.Name(), "/", "_"), "<test>", source)
		require.NoError(t, err)
		fn, err = g.Attr(mod, name)
		require.NoError(t, err)
		g.Release(mod)
	}))
	return fn
}

func TestSubInterpretersAreSeparate(t *testing.T) {
	ins := subInterps(t, 2)
	assert.NotEqual(t, ins[0].id(), ins[1].id())
	assert.NotZero(t, ins[0].Index())
	src := "import sys, threading\nseen = []\ndef f(x):\n    seen.append(x)\n    return [len(seen), threading.get_ident() != 0, type(sys.stdout).__name__]\n"
	fa := functionIn(t, ins[0], "f", src)
	fb := functionIn(t, ins[1], "f", src)
	ca := newCallerIn(t, ins[0], 1<<10)
	cb := newCallerIn(t, ins[1], 1<<10)
	for i := 0; i < 3; i++ {
		v, err := ca.Call(fa, encode(t, i), 1, 0, false, 0)
		require.NoError(t, err)
		assert.Equal(t, []any{int64(i + 1), true, "_CapturedStream"}, v, "each interpreter has its own globals and host streams")
	}
	v, err := cb.Call(fb, encode(t, 9), 1, 0, false, 0)
	require.NoError(t, err)
	assert.Equal(t, []any{int64(1), true, "_CapturedStream"}, v, "the other interpreter's list is untouched")
}

func TestSubInterpreterErrorsAndCapture(t *testing.T) {
	in := subInterps(t, 1)[0]
	fn := functionIn(t, in, "f", "def f(x):\n    print('hello from', x)\n    return 1 / x\n")
	c := newCallerIn(t, in, 1<<10)
	_, err := c.Call(fn, encode(t, 0), 1, 0, true, 0)
	pe, ok := AsError(err)
	require.True(t, ok, "%v", err)
	assert.Equal(t, "ZeroDivisionError", pe.Type)
	assert.Contains(t, pe.Traceback, "line 3, in f", "the traceback is formatted in the sub-interpreter")
	logs, _ := c.logs()
	assert.Equal(t, "hello from 0\n", logs)
}

// Two interpreters run a CPU-bound loop at once: neither waits for the
// other's GIL, so both calls are in Python at the same time.
func TestSubInterpretersRunInParallel(t *testing.T) {
	ins := subInterps(t, 2)
	src := "import time\ndef f(flag):\n    # spin until the other interpreter has started too\n    import _thread\n    t0 = time.monotonic()\n    n = 0\n    while time.monotonic() - t0 < 0.3:\n        n += 1\n    return n\n"
	var wg sync.WaitGroup
	counts := make([]int64, 2)
	start := time.Now()
	for i, in := range ins {
		fn := functionIn(t, in, "f", src)
		c := newCallerIn(t, in, 0)
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := c.Call(fn, encode(t, i), 1, 0, false, 0)
			assert.NoError(t, err)
			counts[i], _ = v.(int64)
		}()
	}
	wg.Wait()
	// Under one shared GIL the two 0.3 s loops would take 0.6 s; with one
	// GIL each they overlap. Generous for a loaded 2-core machine.
	assert.Less(t, time.Since(start), 550*time.Millisecond, "the calls ran one after the other")
	assert.Positive(t, counts[0])
	assert.Positive(t, counts[1])
}

func TestInterruptReachesSubInterpreter(t *testing.T) {
	in := subInterps(t, 1)[0]
	fn := functionIn(t, in, "f", "def f(x):\n    while True:\n        pass\n")
	c := newCallerIn(t, in, 0)
	tok := newToken()
	go func() {
		time.Sleep(50 * time.Millisecond)
		for !Interrupt(tok) {
			time.Sleep(10 * time.Millisecond)
		}
	}()
	_, err := c.Call(fn, encode(t, 1), 1, tok, false, 0)
	pe, ok := AsError(err)
	require.True(t, ok, "%v", err)
	assert.True(t, pe.interrupted(), "got %v", pe)
	// The caller's thread state is clean: the next call runs normally.
	ok2 := functionIn(t, in, "g", "def g(x):\n    return x + 1\n")
	v, err := c.Call(ok2, encode(t, 1), 1, 0, false, 0)
	require.NoError(t, err)
	assert.Equal(t, int64(2), v)
}

func TestSinglePhaseExtensionRefusedInSubInterpreter(t *testing.T) {
	in := subInterps(t, 1)[0]
	fn := functionIn(t, in, "f", "def f(name):\n    import importlib\n    importlib.import_module(name)\n    return True\n")
	c := newCallerIn(t, in, 0)
	// _testsinglephase is CPython's own single-phase-init test module; where
	// this build lacks it there is nothing to check.
	probe := function(t, "probe", "def probe(name):\n    import importlib.util\n    return importlib.util.find_spec(name) is not None\n")
	mc := newCaller(t)
	has, err := mc.Call(probe, encode(t, "_testsinglephase"), 1, 0, false, 0)
	require.NoError(t, err)
	if has != true {
		t.Skip("this CPython has no _testsinglephase module")
	}
	_, err = c.Call(fn, encode(t, "_testsinglephase"), 1, 0, false, 0)
	pe, ok := AsError(err)
	require.True(t, ok, "%v", err)
	assert.Equal(t, "ImportError", pe.Type)
	assert.Contains(t, pe.Message, "subinterpreter")
}

func encode(t *testing.T, vals ...any) []byte {
	t.Helper()
	b, err := encodeArgs(vals)
	require.NoError(t, err)
	return b
}
