# fault: the metric makes every file descriptor from 3 up non-blocking and reads all it can from each
# kind: ok
# process: child
# result: skynet score/eval: the bytes taken from the worker's channel show as a torn frame, cases taken whole in the parent's ping check, the worker reads its own pipes non-blocking through Go's poller anyway: a worker that lost its channel ends, and the cases it held are scored again alone; no case is cancelled or lost
import os
def score(input, output, expected=None):
    if output == "fault":
        for fd in range(3, 64):
            try:
                os.set_blocking(fd, False)
                while os.read(fd, 1 << 16):
                    pass
            except OSError:
                pass
    return 1.0, {"feedback": "ok"}
