# fault: the metric closes every file descriptor of its process
# kind: crash
# process: child
# result: skynet score/eval: the worker process can no longer answer and ends (exit code 199 when it finds its channel gone, or 2 when Go's runtime fails first on its closed epoll descriptor); the case gets a crash result; the other cases are scored
import os
def score(input, output, expected=None):
    if output == "fault":
        os.closerange(0, 4096)
    return 1.0, {"feedback": "ok"}
