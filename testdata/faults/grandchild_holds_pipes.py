# fault: the metric forks a child that leaves the process group (os.setsid) and forks a grandchild that sleeps a minute holding the worker's pipes
# kind: ok
# process: child
# result: skynet score/eval: every case is scored; a worker's end waits for its pipes at most 2 s after it exits (what left its group may hold them), so the run ends, and SIGTERM still stops it; the grandchild lives on, out of skynet's reach
import os, time
def score(input, output, expected=None):
    if output == "fault":
        pid = os.fork()
        if pid == 0:
            os.setsid()
            if os.fork() == 0:
                pidfile = os.environ.get("SKYNET_TEST_GRANDCHILD_PIDFILE")
                if pidfile:
                    with open(pidfile, "w") as f:
                        f.write(str(os.getpid()))
                time.sleep(60)
            os._exit(0)
        os.waitpid(pid, 0)
    return 1.0, {"feedback": "ok"}
