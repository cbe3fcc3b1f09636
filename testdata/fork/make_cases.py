# Writes N cases for testdata/fork/metric.py as JSONL on stdout:
# python3 make_cases.py N > cases.jsonl. Same N, same bytes.
import json
import sys

n = int(sys.argv[1])
for i in range(n):
    print(json.dumps({"id": f"f{i}", "input": {"question": f"check {i}"}, "output": f"answer {i}"}))
