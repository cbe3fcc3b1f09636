# fault: the metric lowers RLIMIT_CPU below what its process has used, then computes
# kind: crash
# process: child
# result: skynet score/eval: SIGXCPU at the soft limit ends the worker process, as it ends python3 (a worker leaves it at its default action), so the case gets a crash result naming SIGXCPU; the next worker starts with the parent's limits
import resource, time
def score(input, output, expected=None):
    if output == "fault":
        used = max(1, int(time.process_time()))
        resource.setrlimit(resource.RLIMIT_CPU, (used, used + 1))
        while True:
            pass
    return 1.0, {"feedback": "ok"}
