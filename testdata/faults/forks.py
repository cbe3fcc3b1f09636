# fault: os.fork() in score, the forked child returns from score too
# kind: ok
# process: child
# result: the forked copy exits at once when it would return into Go (it never writes a result); the case is scored once
import os
def score(input, output, expected=None):
    if output == "fault":
        pid = os.fork()
        if pid == 0:
            return 0.5, {"feedback": "from the forked child"}
        os.waitpid(pid, 0)
    return 1.0, {"feedback": "ok"}
