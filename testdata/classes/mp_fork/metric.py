# A code-execution reward, the way RL reward code time-limits untrusted
# solutions: the model's Python source runs against the expected test cases in
# a multiprocessing.Process (context "fork"), the verdict comes back through a
# Queue, and the parent joins with a timeout and terminates a child that is
# still running (an infinite loop in the solution). The child's target,
# _run_tests, is a module-level function of this file.
#
# output: Python source defining the function named by input["entry_point"].
# expected["tests"]: [[args, result], ...]. Score: the fraction of tests passed.
import contextlib
import io
import multiprocessing
import queue

CONTEXT = "fork"
TIME_LIMIT_S = 1.0


def _run_tests(q, source, entry_point, tests):
    """Child process: exec the solution, run the tests, put one verdict."""
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            namespace = {"__name__": "solution"}
            exec(compile(source, "<solution>", "exec"), namespace)
            fn = namespace.get(entry_point)
            if not callable(fn):
                q.put(("error", f"no function named {entry_point!r}", 0, []))
                return
            passed, failures = 0, []
            for i, (args, want) in enumerate(tests):
                try:
                    got = fn(*args)
                except Exception as e:
                    failures.append(f"test {i}: raised {type(e).__name__}: {e}"[:200])
                    continue
                if got == want:
                    passed += 1
                else:
                    failures.append(f"test {i}: {entry_point}({', '.join(map(repr, args))}) returned {got!r}, expected {want!r}"[:200])
        q.put(("ok", "", passed, failures[:3]))  # small: a verdict must fit the pipe
    except SyntaxError as e:
        q.put(("error", f"SyntaxError: {e.msg} (line {e.lineno})", 0, []))
    except Exception as e:
        q.put(("error", f"{type(e).__name__}: {e}", 0, []))


def run_in_process(source, entry_point, tests):
    ctx = multiprocessing.get_context(CONTEXT)
    q = ctx.Queue()
    p = ctx.Process(target=_run_tests, args=(q, source, entry_point, tests), daemon=True)
    p.start()
    p.join(TIME_LIMIT_S)
    try:
        if p.is_alive():
            p.terminate()
            p.join()
            return ("timeout", f"no result within {TIME_LIMIT_S:g} s", 0, [])
        if p.exitcode != 0:
            return ("error", f"the solution process exited with status {p.exitcode}", 0, [])
        try:
            return q.get(timeout=TIME_LIMIT_S)
        except queue.Empty:
            return ("error", "the solution process exited without a verdict", 0, [])
    finally:
        q.close()
        q.join_thread()


def score(input, output, expected=None):
    tests = expected["tests"]
    entry = input["entry_point"]
    if not isinstance(output, str) or not output.strip():
        return 0.0, {"feedback": f"No code: the answer must be Python source defining {entry}()."}
    status, message, passed, failures = run_in_process(output, entry, tests)
    n = len(tests)
    if status == "timeout":
        return 0.0, {"feedback": f"Time limit exceeded: {message}. Check {entry}() for infinite loops."}
    if status == "error":
        return 0.0, {"feedback": f"The code failed before any test ran: {message}."}
    fb = f"Passed {passed}/{n} tests."
    if failures:
        fb += " First failure: " + failures[0] + "."
    return passed / n, {"feedback": fb}
