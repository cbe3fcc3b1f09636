# fault: sys.setswitchinterval(1000), then a pure-Python loop (the watchdog cannot get the GIL to interrupt it)
# kind: timeout
# process: child
# result: skynet score/eval: the case gets a timeout result within timeout + grace: the worker process reports the wedge and is killed; the run goes on in a new one (in-process, the call cannot be stopped)
import sys
def score(input, output, expected=None):
    if output == "fault":
        sys.setswitchinterval(1000)
        while True:
            pass
    return 1.0, {"feedback": "ok"}
