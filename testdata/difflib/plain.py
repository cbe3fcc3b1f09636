# The plain script a user would write to score a case file with
# metric.py, the baseline `skynet score` is held to:
#   python3 plain.py METRIC CASES.jsonl RESULTS.jsonl
# It reads a line, json.loads, calls score, json.dumps, writes. With
# SKYNET_PLAIN_TIMES set it prints to stderr how long the import and the
# scoring loop took, so start-up can be told apart from scoring.
import importlib.util
import json
import os
import sys
import time

t0 = time.perf_counter()
spec = importlib.util.spec_from_file_location("metric", sys.argv[1])
metric = importlib.util.module_from_spec(spec)
spec.loader.exec_module(metric)
t1 = time.perf_counter()

with open(sys.argv[2]) as cases, open(sys.argv[3], "w") as results:
    for line in cases:
        case = json.loads(line)
        value, side = metric.score(case["input"], case["output"], case.get("expected"))
        results.write(json.dumps({"id": case.get("id"), "score": value, "feedback": side["feedback"],
                                  "scores": side.get("scores", {})}) + "\n")
t2 = time.perf_counter()
if os.environ.get("SKYNET_PLAIN_TIMES"):
    print(f"import {1e3 * (t1 - t0):.1f} ms, scoring {1e3 * (t2 - t1):.1f} ms", file=sys.stderr)
