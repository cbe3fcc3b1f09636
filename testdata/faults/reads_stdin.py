# fault: the metric reads standard input (a stray breakpoint() or os.read(0, ...))
# kind: ok
# process: child
# result: skynet score/eval: the metric's stdin is /dev/null, so with --data - it cannot eat case lines; every case is scored
import os
def score(input, output, expected=None):
    if output == "fault":
        data = os.read(0, 1 << 16)
        return 1.0, {"feedback": f"read {len(data)} bytes from stdin"}
    return 1.0, {"feedback": "ok"}
