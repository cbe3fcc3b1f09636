# Baseline for `skynet bench`: the persistent subprocess worker a user would
# write instead of an embedded engine. One JSON case per stdin line, one JSON
# result per stdout line. --pipelined buffers output (the fastest a user could
# go when the parent reads concurrently); otherwise every line is flushed, as
# a lockstep request/reply protocol needs.
import importlib.util
import inspect
import json
import sys


def load(path):
    spec = importlib.util.spec_from_file_location("metric", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    score = module.score
    params = [p for p in inspect.signature(score).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    two = len(params) == 2 and not any(p.kind == p.VAR_POSITIONAL for p in inspect.signature(score).parameters.values())
    if two:
        return lambda c: score(c["input"], c["output"])
    return lambda c: score(c["input"], c["output"], c.get("expected"))


def main():
    call = load(sys.argv[1])
    pipelined = "--pipelined" in sys.argv[2:]
    out = sys.stdout
    for line in sys.stdin:
        value, side = call(json.loads(line))
        out.write(json.dumps({"score": value, "feedback": side["feedback"], "scores": side.get("scores", {})}) + "\n")
        if not pipelined:
            out.flush()
    out.flush()


if __name__ == "__main__":
    main()
