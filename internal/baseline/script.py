# Baseline for `skynet bench --file`: the plain script a user would write to
# score a JSONL file: read a line, json.loads, call score, json.dumps, write.
import importlib.util
import json
import sys

spec = importlib.util.spec_from_file_location("metric", sys.argv[1])
metric = importlib.util.module_from_spec(spec)
spec.loader.exec_module(metric)

with open(sys.argv[2]) as cases, open(sys.argv[3], "w") as results:
    for line in cases:
        case = json.loads(line)
        value, side = metric.score(case["input"], case["output"], case.get("expected"))
        results.write(json.dumps({"id": case.get("id"), "score": value, "feedback": side["feedback"],
                                  "scores": side.get("scores", {})}) + "\n")
