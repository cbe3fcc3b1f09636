# fault: C stack overflow: sys.setrecursionlimit(10**6), then recursion through C (map)
# kind: crash
# process: child
# result: skynet score/eval on CPython 3.10/3.11: a crash result (SIGSEGV); CPython 3.12+ stops the recursion first with RecursionError (kind exception)
import sys
def deeper(n):
    return list(map(deeper, [n + 1]))
def score(input, output, expected=None):
    if output == "fault":
        sys.setrecursionlimit(10**6)
        deeper(0)
    return 1.0, {"feedback": "ok"}
