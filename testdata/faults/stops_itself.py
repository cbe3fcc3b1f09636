# fault: the metric stops its own process (SIGSTOP)
# kind: crash
# process: child
# result: skynet score/eval: a worker silent for three pings (1.5 s) and stopped (state T) is killed, whatever --timeout is: the case gets a crash result naming SIGSTOP, scored alone; the other cases are scored
import os, signal
def score(input, output, expected=None):
    if output == "fault":
        os.kill(os.getpid(), signal.SIGSTOP)
    return 1.0, {"feedback": "ok"}
