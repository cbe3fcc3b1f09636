# fault: time.sleep(3600) (blocks with the GIL released)
# kind: timeout
# result: times out on time; the worker is replaced so the next case runs; the late result is discarded
import time
def score(input, output, expected=None):
    if output == "fault":
        time.sleep(3600)
    return 1.0, {"feedback": "ok"}
