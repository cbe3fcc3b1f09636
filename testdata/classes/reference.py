"""The plain script a user would write to score a metric over a case file.

    python3 reference.py METRIC.py CASES.jsonl > out.jsonl

It puts the metric's folder first on sys.path and imports the metric by its
file stem (importlib.import_module("metric"), what `from metric import score`
does), so multiprocessing's spawn children can re-import the target's module by
name. For each case line it calls score(input, output, expected), or
score(input, output) when score has exactly two positional parameters, and
writes one JSON line per case, in input order (an `async def score` is awaited
case by case on one event loop):

    {"id": ..., "score": <float>, "feedback": <str>}

A case whose score raises (an Exception) gets
{"id": ..., "score": 0, "feedback": null, "error": "Type: message"}, with
"Type" the exception's qualified name ("module.Name" outside builtins) and
": message" left off when str(exception) is empty, as the engine reports it.
Each line is flushed as it is written, so a metric that kills the process
leaves the lines of the cases before it.

The main block is guarded: spawn children import this file as __mp_main__.
"""

import importlib
import inspect
import json
import os
import sys


def load_score(metric_path):
    folder = os.path.dirname(os.path.abspath(metric_path))
    stem = os.path.splitext(os.path.basename(metric_path))[0]
    sys.path.insert(0, folder)
    module = importlib.import_module(stem)
    return module.score


def two_positional(fn):
    """True when fn takes exactly two positional parameters (and no *args)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    kinds = [p.kind for p in params]
    if inspect.Parameter.VAR_POSITIONAL in kinds:
        return False
    positional = [k for k in kinds if k in (inspect.Parameter.POSITIONAL_ONLY,
                                            inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    return len(positional) == 2


def error_text(exc):
    t = type(exc)
    name = t.__qualname__
    if t.__module__ not in (None, "builtins"):
        name = f"{t.__module__}.{name}"
    msg = str(exc)
    return f"{name}: {msg}" if msg else name


def main(argv):
    if len(argv) != 3:
        sys.stderr.write("usage: python3 reference.py METRIC.py CASES.jsonl > out.jsonl\n")
        return 2
    score = load_score(argv[1])
    two = two_positional(score)
    if inspect.iscoroutinefunction(score):
        # An async score: each case on one event loop, as a script that
        # awaits score case by case does.
        import asyncio

        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        coroutine = score
        score = lambda *args: loop.run_until_complete(coroutine(*args))  # noqa: E731
    out = sys.stdout
    with open(argv[2], encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            case = json.loads(line)
            cid = case.get("id", str(n))
            try:
                if two:
                    value, side = score(case.get("input"), case.get("output"))
                else:
                    value, side = score(case.get("input"), case.get("output"), case.get("expected"))
                row = {"id": cid, "score": float(value), "feedback": side["feedback"]}
            except Exception as exc:
                row = {"id": cid, "score": 0, "feedback": None, "error": error_text(exc)}
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
            out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
