# The Python side of make bench-latency (internal/benchserve --latency): the
# two ways a Python user calls a metric in another process one case at a
# time, timed here, in the parent, with time.perf_counter_ns:
#
#   socketpair: a worker forked once, answering JSON lines over a socketpair,
#     one case at a time (json.dumps, sendall, readline, json.loads);
#   pool: multiprocessing.Pool(1).apply(score, (input, output, expected)).
#
#   python latency.py METRIC
# then, on stdin, one command a line: "socketpair START N" or "pool START N"
# makes N calls on cases numbered START.. (every case new: the number is in
# its prompt, completion and label) and writes one line: a JSON list of the
# calls' nanoseconds. Each reply's score must be 1.0 (the case's completion is
# its label): otherwise it exits 1, saying so.
import importlib.util
import json
import multiprocessing
import os
import socket
import sys
import time

score = None


def load(path):
    global score
    spec = importlib.util.spec_from_file_location("metric", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    score = module.score


def call(input, output, expected):
    return score(input, output, expected)


def case(k):
    answer = f"4 (ref {k:010d})"
    return {"input": {"prompt": f"Question {k:010d}: what is 2 + 2? Answer: "}, "output": answer,
            "expected": {"label": answer}}


def serve(sock):
    """The forked worker: a JSON case a line in, a JSON result a line out."""
    cases = sock.makefile("rb")
    for line in cases:
        c = json.loads(line)
        value, side = score(c["input"], c["output"], c["expected"])
        sock.sendall((json.dumps({"score": value, "feedback": side["feedback"],
                                  "scores": side.get("scores", {})}) + "\n").encode())
    os._exit(0)


def want(k, value):
    if value != 1.0:
        sys.exit(f"latency.py: case {k}: score {value!r}, want 1.0")


def main():
    load(sys.argv[1])
    parent, child = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        parent.close()
        serve(child)
    child.close()
    replies = parent.makefile("rb")
    pool = multiprocessing.Pool(1, initializer=load, initargs=(sys.argv[1],))
    now = time.perf_counter_ns
    for line in sys.stdin:
        what, start, n = line.split()
        start, n = int(start), int(n)
        cases = [case(k) for k in range(start, start + n)]
        took = []
        if what == "socketpair":
            for k, c in enumerate(cases, start):
                t0 = now()
                parent.sendall((json.dumps(c) + "\n").encode())
                r = json.loads(replies.readline())
                took.append(now() - t0)
                want(k, r["score"])
        elif what == "pool":
            for k, c in enumerate(cases, start):
                t0 = now()
                value, _side = pool.apply(call, (c["input"], c["output"], c["expected"]))
                took.append(now() - t0)
                want(k, value)
        else:
            sys.exit(f"latency.py: unknown command {line!r}")
        sys.stdout.write(json.dumps(took) + "\n")
        sys.stdout.flush()
    pool.close()
    pool.join()
    parent.close()
    os.waitpid(pid, 0)


if __name__ == "__main__":
    main()
