# fault: the metric lowers RLIMIT_CPU below what its process has used, then computes
# kind: crash
# process: child
# result: skynet score/eval: the kernel kills the process at the hard limit (Go ignores SIGXCPU), so the case gets a crash result naming SIGKILL; the next child starts with the parent's limits
import resource, time
def score(input, output, expected=None):
    if output == "fault":
        used = max(1, int(time.process_time()))
        resource.setrlimit(resource.RLIMIT_CPU, (used, used + 1))
        while True:
            pass
    return 1.0, {"feedback": "ok"}
