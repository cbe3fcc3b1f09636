# plain.py over a process pool, what a user with several cores might write:
#   python3 pool.py METRIC CASES.jsonl RESULTS.jsonl [PROCESSES]
# PROCESSES defaults to os.cpu_count(). Lines go to the workers 64 at a
# time (imap, chunksize=64) and the results come back in input order.
import importlib.util
import json
import multiprocessing
import os
import sys

metric = None


def load(path):
    global metric
    spec = importlib.util.spec_from_file_location("metric", path)
    metric = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(metric)


def score_line(line):
    case = json.loads(line)
    value, side = metric.score(case["input"], case["output"], case.get("expected"))
    return json.dumps({"id": case.get("id"), "score": value, "feedback": side["feedback"],
                       "scores": side.get("scores", {})}) + "\n"


def main():
    n = int(sys.argv[4]) if len(sys.argv) > 4 else os.cpu_count()
    with multiprocessing.Pool(n, initializer=load, initargs=(sys.argv[1],)) as pool, \
            open(sys.argv[2]) as cases, open(sys.argv[3], "w") as results:
        for out in pool.imap(score_line, cases, chunksize=64):
            results.write(out)


if __name__ == "__main__":
    main()
