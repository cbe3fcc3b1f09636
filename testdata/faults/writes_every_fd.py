# fault: the metric writes garbage to every open file descriptor
# kind: crash
# process: child
# result: skynet score/eval: results are written by the parent only, so no result line is touched; the corrupted channel is found by its checksums and the case gets a crash result
import os
def score(input, output, expected=None):
    if output == "fault":
        for fd in range(0, 256):
            try:
                os.write(fd, b"\n{garbage}\n" * 100)
            except OSError:
                pass
    return 1.0, {"feedback": "ok"}
