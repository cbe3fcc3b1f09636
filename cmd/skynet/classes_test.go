package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/skynetml/skynet/internal/testenv"
)

const classesDir = "../../testdata/classes/"

// metricClasses are testdata/classes' folders (its README), the slowest
// first, so the bounded parallel run ends sooner.
var metricClasses = []string{"signal_timeout", "mp_spawn", "sympy_equiv", "mp_fork", "numpy_stats", "math_verify",
	"async_gather", "ctypes_libc", "stdlib_cext", "module_state", "crash_one"}

// classVenv are the classes that import packages of the pinned test venv
// (build/python-test.lock): reference.py runs on its python, skynet with
// VIRTUAL_ENV set to it, as a user of a venv runs both.
var classVenv = map[string]bool{"math_verify": true}

// classSignalVia is, by class, where the warning about a signal handler set
// on a thread names it when the signal.signal call is in a package the
// metric calls: the metric's line, then the package's.
var classSignalVia = map[string]*regexp.Regexp{"math_verify": regexp.MustCompile(`metric\.py:\d+ \(via math_verify/utils\.py:\d+\) sets a signal handler \(signal\.signal\)`)}

// classCrashes names the case that crashes the Python process, per class:
// its reference runs on cases_nocrash.jsonl (the same cases without it).
var classCrashes = map[string]string{"crash_one": "co07"}

// classForks is the metric line that starts a fork-context Process, by
// class: with several threads a process, such a metric is warned about
// (a fork while other threads run can deadlock its child) and its scores
// are not compared.
var classForks = map[string]int{"mp_fork": 52}

// refLine is one line of reference.py's output: feedback is null and error
// "Type: message" when score raised.
type refLine struct {
	ID       string  `json:"id"`
	Score    float64 `json:"score"`
	Feedback *string `json:"feedback"`
	Error    *string `json:"error"`
}

// classesPython is the python executable of the CPython the skynet binary
// embeds: SKYNET_PYTHON (build/pyenv.sh sets it), else pkg-config
// python3-embed's exec_prefix/bin/python3.X (build/static.sh's .pc has only
// prefix), never PATH's python3. Its version must be the one "skynet
// version" names.
func classesPython(t *testing.T) string {
	python := os.Getenv("SKYNET_PYTHON")
	if python == "" {
		pc := func(args ...string) string {
			out, err := exec.Command("pkg-config", append(args, "python3-embed")...).Output()
			require.NoError(t, err, "pkg-config %v python3-embed", args)
			return strings.TrimSpace(string(out))
		}
		prefix := pc("--variable=exec_prefix")
		if prefix == "" {
			prefix = pc("--variable=prefix")
		}
		python = filepath.Join(prefix, "bin", "python"+pc("--modversion"))
	}
	out, err := exec.Command(python, "-c", "import platform; print(platform.python_version())").CombinedOutput()
	require.NoError(t, err, "%s: %s", python, out)
	code, version, errOut := skynetOut(t, "version")
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, version, "\nCPython "+strings.TrimSpace(string(out))+" ",
		"%s is not the CPython skynet embeds", python)
	return python
}

// sympyPath makes sympy importable by python as the classes README says
// when it is not already: a folder of symlinks to Debian's pure-Python sympy
// and mpmath, for PYTHONPATH. It returns "" when python finds both as it
// is, else the folder, or why sympy_equiv must be skipped.
func sympyPath(t *testing.T, python string) (dir, skip string) {
	out, err := exec.Command(python, "-c", `import importlib.util as u; print(all(u.find_spec(m) for m in ("sympy", "mpmath")))`).CombinedOutput()
	require.NoError(t, err, "%s: %s", python, out)
	if strings.TrimSpace(string(out)) == "True" {
		return "", ""
	}
	dir = t.TempDir()
	for _, m := range []string{"sympy", "mpmath"} {
		src := filepath.Join("/usr/lib/python3/dist-packages", m)
		if _, err := os.Stat(src); err != nil {
			return "", fmt.Sprintf("%s cannot import sympy and mpmath, and there is no %s to link to (testdata/classes/README.md)", python, src)
		}
		require.NoError(t, os.Symlink(src, filepath.Join(dir, m)))
	}
	return dir, ""
}

// signalLine is the line of the first signal.signal( call in a metric file
// (comments left out), or 0 when it has none.
func signalLine(t *testing.T, path string) int {
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		code, _, _ := strings.Cut(sc.Text(), "#")
		if strings.Contains(code, "signal.signal(") {
			return n
		}
	}
	require.NoError(t, sc.Err())
	return 0
}

// reference runs reference.py under the embedded CPython.
func reference(t *testing.T, python, metric, cases string) []refLine {
	// Every class's timeouts are a few seconds: a run this long is stuck.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, classesDir+"reference.py", metric, cases)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	require.NoError(t, cmd.Run(), "reference.py %s %s: %s", metric, cases, errb.String())
	t.Logf("reference.py: %.1fs", time.Since(start).Seconds())
	return jsonLines[refLine](t, out.String())
}

// outcome is what is compared for one case.
type outcome struct {
	Score    float64
	Feedback string
	Error    string
}

func caseError(e *errorField) string {
	if e == nil {
		return "no error"
	}
	return fmt.Sprintf("%s error %q", e.Kind, e.Message)
}

// refOutcome is the result skynet must give for r: an exception is a case
// error of kind exception whose message, and feedback, is reference.py's
// "Type: message".
func refOutcome(r refLine) outcome {
	if r.Error != nil {
		return outcome{r.Score, *r.Error, caseError(&errorField{Kind: "exception", Message: *r.Error})}
	}
	o := outcome{Score: r.Score, Error: caseError(nil)}
	if r.Feedback != nil {
		o.Feedback = *r.Feedback
	}
	return o
}

// TestMetricClasses scores each of testdata/classes' real-world metrics
// with skynet, by default and with --workers 4, and compares every case
// with what reference.py gives under the same CPython: the same ids in
// order, the same score (exactly), feedback and exception ("Type:
// message"). A case that crashes the process must be a crash result, the
// others unchanged. A metric that sets a signal handler cannot run on
// threads: with --workers 4, stderr must say where it does and that only
// the main thread can, and its scores are not compared.
func TestMetricClasses(t *testing.T) {
	skynetBin(t)
	python := classesPython(t)
	dir, sympySkip := sympyPath(t, python)
	if dir != "" {
		if p := os.Getenv("PYTHONPATH"); p != "" {
			dir += string(os.PathListSeparator) + p
		}
		t.Setenv("PYTHONPATH", dir) // for reference.py and skynet alike
	}
	// --workers is K scoring threads per worker process (it may print a
	// notice that it is now called --threads).
	modes := []struct {
		name    string
		args    []string
		threads bool
	}{{"default", nil, false}, {"workers=4", []string{"--workers", "4"}, true}}

	// The metrics' timeouts (0.5-2 s) are wall-clock: too many runs at once
	// on few CPUs could make a case that never times out do so.
	slots := make(chan struct{}, min(max(runtime.NumCPU(), 2), 4))
	for _, class := range metricClasses {
		t.Run(class, func(t *testing.T) {
			t.Parallel()
			metric, cases := classesDir+class+"/metric.py", classesDir+class+"/cases.jsonl"
			switch class {
			case "numpy_stats":
				if out, err := exec.Command(python, "-c", "import numpy").CombinedOutput(); err != nil {
					lines := strings.Split(strings.TrimSpace(string(out)), "\n")
					t.Skipf("%s cannot import numpy (%s); testdata/classes/README.md: numpy_stats needs python3-numpy, Debian's 3.11 only", python, lines[len(lines)-1])
				}
			case "sympy_equiv":
				if sympySkip != "" {
					t.Skip(sympySkip)
				}
			}
			refPython, env := python, []string(nil)
			if classVenv[class] {
				venv := testVenv(t, python)
				refPython, env = filepath.Join(venv, "bin", "python"), []string{"VIRTUAL_ENV=" + venv}
			}
			slots <- struct{}{}
			defer func() { <-slots }()

			crashID := classCrashes[class]
			refCases := cases
			if crashID != "" {
				refCases = classesDir + class + "/cases_nocrash.jsonl"
			}
			var ids []string
			for _, c := range jsonFile[struct {
				ID string `json:"id"`
			}](t, cases) {
				ids = append(ids, c.ID)
			}
			ref := reference(t, refPython, metric, refCases)
			refByID := map[string]refLine{}
			var refIDs []string
			for _, r := range ref {
				refByID[r.ID] = r
				refIDs = append(refIDs, r.ID)
			}
			var wantRefIDs []string
			for _, id := range ids {
				if id != crashID {
					wantRefIDs = append(wantRefIDs, id)
				}
			}
			require.Equal(t, wantRefIDs, refIDs, "%s: reference.py on %s gives one line per case, in order", class, refCases)
			sigLine := signalLine(t, metric)

			for _, mode := range modes {
				args := append([]string{"score", "--metric", metric, "--data", cases, "--timeout", "30s"}, mode.args...)
				code, lines, stderr, took := runCLIEnv(t, env, nil, args...)
				t.Logf("skynet %s: exit %d in %.1fs", mode.name, code, took.Seconds())
				var got []string
				for _, r := range lines {
					got = append(got, r.ID)
				}
				if !assert.Equal(t, ids, got, "%s [%s]: one result per case, in input order\nstderr: %s", class, mode.name, stderr) {
					continue
				}
				wantCode := exitOK
				if crashID != "" {
					wantCode = exitCheck // README, exit codes: a case crashed the Python process
				}
				assert.Equal(t, wantCode, code, "%s [%s]: exit code\nstderr: %s", class, mode.name, stderr)
				if via := classSignalVia[class]; via != nil && mode.threads {
					assert.Regexp(t, via, stderr, "%s [%s]: stderr should warn where the metric sets a signal handler on a thread", class, mode.name)
					continue
				}
				if sigLine > 0 && mode.threads {
					where := fmt.Sprintf("metric.py:%d", sigLine)
					for _, s := range []string{where, "signal.signal", "main thread"} {
						if !strings.Contains(stderr, s) {
							assert.Fail(t, "no warning", "%s [%s]: stderr should warn that %s sets a signal handler (signal.signal), which only the main thread can; it lacks %q\nstderr: %s",
								class, mode.name, where, s, stderr)
							break
						}
					}
					continue
				}
				if forkLine := classForks[class]; forkLine > 0 && mode.threads {
					// A fork while other threads run may deadlock the child:
					// not comparable, but said.
					where := fmt.Sprintf("metric.py:%d", forkLine)
					for _, s := range []string{where, "forks (os.fork", "1 thread a process"} {
						if !strings.Contains(stderr, s) {
							assert.Fail(t, "no warning", "%s [%s]: stderr should warn that %s forks while cases run on several threads; it lacks %q\nstderr: %s",
								class, mode.name, where, s, stderr)
							break
						}
					}
					continue
				}
				for _, r := range lines {
					at := fmt.Sprintf("%s [%s] case %s", class, mode.name, r.ID)
					if r.ID == crashID {
						if r.Error == nil || r.Error.Kind != "crash" {
							assert.Fail(t, "not a crash result", "%s: want a crash result; got score %v, feedback %q, %s", at, r.Score, r.Feedback, caseError(r.Error))
						}
						continue
					}
					assert.Equal(t, refOutcome(refByID[r.ID]), outcome{r.Score, r.Feedback, caseError(r.Error)}, "%s: reference.py (expected) and skynet (actual)", at)
				}
			}
		})
	}
}

// testVenv is the pinned test venv (testenv.Venv) of python, the CPython
// skynet embeds.
func testVenv(t *testing.T, python string) string {
	out, err := exec.Command(python, "-c", "import platform; print(platform.python_version())").CombinedOutput()
	require.NoError(t, err, "%s: %s", python, out)
	return testenv.Venv(t, strings.TrimSpace(string(out)))
}
