# fault: catastrophic regex backtracking (stuck in C, holding the GIL)
# kind: timeout
# result: times out on time; Engine.Wedged names the case while the interpreter is held (the CLI warns on stderr); it recovers when the regex returns
import re
def score(input, output, expected=None):
    if output == "fault":
        re.match(r"(a|aa)+$", "a" * 36 + "b")
    return 1.0, {"feedback": "ok"}
