# Baseline for `skynet bench`: the persistent subprocess worker a user would
# write instead of an embedded engine. One JSON case per stdin line, one JSON
# result per stdout line. --pipelined buffers output after the first reply
# (the fastest a user could go when the parent reads concurrently); otherwise
# every line is flushed, as a lockstep request/reply protocol needs. Either
# way whatever PYTHONUNBUFFERED says: the replies have their own stream.
#
# The protocol has the process's stdin and stdout to itself: before the
# metric is imported they are duplicated for the protocol, file descriptor 1
# is pointed at stderr and 0 at /dev/null. So a metric's print() (or a C
# library writing to fd 1) goes to stderr instead of corrupting the replies,
# and input() cannot swallow a case.
import importlib.util
import inspect
import json
import os
import sys


def protocol_streams():
    reader = open(os.dup(0), "r", encoding="utf-8")
    writer = open(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    sys.stdout = sys.stderr
    return reader, writer


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
    cases, out = protocol_streams()
    call = load(sys.argv[1])
    pipelined = "--pipelined" in sys.argv[2:]

    def reply(line):
        value, side = call(json.loads(line))
        out.write(json.dumps({"score": value, "feedback": side["feedback"], "scores": side.get("scores", {})}) + "\n")

    # The first case is the parent's warm-up: it waits for that reply before
    # sending the rest, so it is flushed in both modes.
    first = cases.readline()
    if first:
        reply(first)
        out.flush()
    for line in cases:
        reply(line)
        if not pipelined:
            out.flush()
    out.flush()


if __name__ == "__main__":
    main()
