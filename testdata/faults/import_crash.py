# fault: metric.py segfaults at import
# kind: load
# process: child
# result: skynet score/eval/check: check "metric loads" fails naming SIGSEGV, exit code 1
import ctypes
ctypes.string_at(0)
def score(input, output, expected=None):
    return 1.0
