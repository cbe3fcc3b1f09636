# fault: catastrophic regex backtracking (stuck in C, holding the GIL)
# kind: timeout
# result: times out on time; Engine.Wedged names the case while the interpreter is held and in-process the engine recovers when the regex returns; skynet score/eval kill the worker process holding it, so the run goes on at once in a new one
import re
def score(input, output, expected=None):
    if output == "fault":
        re.match(r"(a|aa)+$", "a" * 36 + "b")
    return 1.0, {"feedback": "ok"}
