# A grader that forks once a case, as reward code that isolates a check does
# (a bare os.fork, the child ending at once, the parent reaping it): what a
# fork costs from a worker against one from python3, case by case
# (make bench-cpu: plain script ÷ skynet score --processes 1). It imports
# multiprocessing, as such graders do, so its at-fork hooks run in each child
# under both.
import multiprocessing  # noqa: F401
import os


def score(input, output, expected=None):
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    ok = os.waitstatus_to_exitcode(status) == 0
    return (1.0 if ok else 0.0), {"feedback": "the child exited 0" if ok else f"child status {status}"}
