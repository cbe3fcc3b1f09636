# fault: changes sys.path, os.environ and the working directory, and mutates its globals
# kind: ok
# result: the working directory is restored after the batch (it is the host's too); later cases and other metrics keep working
import os, sys
calls = []
def score(input, output, expected=None):
    calls.append(output)
    sys.path.insert(0, "/nonexistent")
    os.environ["PYTHONPATH"] = "/nonexistent"
    os.chdir("/")
    return float(len(calls) > 0), {"feedback": "ok"}
