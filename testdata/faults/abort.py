# fault: os.abort() in score
# kind: crash
# process: child
# result: skynet score/eval: the case gets a crash result naming SIGABRT; the other cases are scored
import os
def score(input, output, expected=None):
    if output == "fault":
        os.abort()
    return 1.0, {"feedback": "ok"}
