# Baseline for `skynet bench --file` with several processes: the script a
# user would write to use every core, multiprocessing.Pool(N) over the file,
# imap in chunks so results keep their order.
import importlib.util
import json
import multiprocessing
import sys

metric = None


def load(path):
    global metric
    spec = importlib.util.spec_from_file_location("metric", path)
    metric = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(metric)


def score(line):
    case = json.loads(line)
    value, side = metric.score(case["input"], case["output"], case.get("expected"))
    return json.dumps({"id": case.get("id"), "score": value, "feedback": side["feedback"],
                       "scores": side.get("scores", {})}) + "\n"


if __name__ == "__main__":
    with open(sys.argv[2]) as cases, open(sys.argv[3], "w") as results, \
            multiprocessing.Pool(int(sys.argv[4]), initializer=load, initargs=(sys.argv[1],)) as pool:
        for out in pool.imap(score, cases, chunksize=64):
            results.write(out)
