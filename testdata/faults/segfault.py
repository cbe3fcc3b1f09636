# fault: a segfault in C (ctypes.string_at(0))
# kind: crash
# process: child
# result: skynet score/eval: the case gets a crash result naming SIGSEGV and the metric's last output; the other cases are scored
import ctypes, os
def score(input, output, expected=None):
    if output == "fault":
        os.write(2, b"about to read address 0\n")  # C-level output reaches the crash message
        ctypes.string_at(0)
    return 1.0, {"feedback": "ok"}
