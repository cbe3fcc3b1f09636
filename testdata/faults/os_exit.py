# fault: os._exit(7) in score (the process ends without unwinding)
# kind: crash
# process: child
# result: skynet score/eval: the case gets a crash result naming exit code 7; the other cases are scored (in-process, the Go API's process exits)
import os
def score(input, output, expected=None):
    if output == "fault":
        os._exit(7)
    return 1.0, {"feedback": "ok"}
