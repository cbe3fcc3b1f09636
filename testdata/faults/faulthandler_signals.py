# fault: faulthandler.register(SIGTERM) and (SIGINT) at import, then a slow score
# kind: ok
# process: child
# result: skynet score/eval: the signals go to skynet, not to the metric's process; Ctrl-C and SIGTERM still stop the run (exit 130/143)
import faulthandler, signal, time
faulthandler.register(signal.SIGTERM)  # to sys.stderr's fileno(): the process's stderr
faulthandler.register(signal.SIGINT)
def score(input, output, expected=None):
    time.sleep(0.01)
    return 1.0, {"feedback": "ok"}
