# fault: starts a thread that keeps running and printing
# kind: ok
# result: the thread's output goes to stderr, never into results; cases go on
import threading, time
def spin():
    for _ in range(20):  # bounded, so the test process is not flooded
        print("background thread")
        time.sleep(0.01)
def score(input, output, expected=None):
    threading.Thread(target=spin, daemon=True).start()
    return 1.0, {"feedback": "ok"}
