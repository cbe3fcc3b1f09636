# fault: the metric sends SIGKILL to its own process
# kind: crash
# process: child
# result: skynet score/eval: the case gets a crash result naming SIGKILL; the other cases are scored
import os, signal
def score(input, output, expected=None):
    if output == "fault":
        os.kill(os.getpid(), signal.SIGKILL)
    return 1.0, {"feedback": "ok"}
