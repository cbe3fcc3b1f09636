# fault: the metric sends SIGTERM to its parent process (os.getppid()) and SIGINT to its parent's process group
# kind: exception
# process: child
# result: skynet score/eval: in a worker process os.kill and os.killpg refuse to signal skynet (the parent), its process group or every process (-1): the case gets an exception result (PermissionError) and the run goes on; a kill command or ctypes would not be seen
import os, signal
def score(input, output, expected=None):
    if output == "fault":
        try:
            os.killpg(os.getpgid(os.getppid()), signal.SIGINT)
        except PermissionError:
            pass
        os.kill(os.getppid(), signal.SIGTERM)
    return 1.0, {"feedback": "ok"}
