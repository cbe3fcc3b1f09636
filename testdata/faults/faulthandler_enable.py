# fault: faulthandler.enable() at import (its tracebacks go to sys.stderr's file descriptor)
# kind: ok
# process: child
# result: skynet score/eval: sys.stdout and sys.stderr in a worker have fileno() (the process's stderr, fd 2), so the metric loads and scores as under python3; a crash then prints Python's traceback on skynet's stderr
import faulthandler, sys
faulthandler.enable()
def score(input, output, expected=None):
    return 1.0, {"feedback": f"faulthandler on, stderr fd {sys.stderr.fileno()}, stdout fd {sys.stdout.fileno()}"}
