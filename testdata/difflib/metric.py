# A CPU-heavy metric for benchmarks: how close the output text is to the
# expected one, by difflib's SequenceMatcher over characters. On the
# 18–26-word texts of make_cases.py a case takes ~200–250 µs, almost all of it
# in pure-Python difflib, so it measures the interpreter, not the engine.
from difflib import SequenceMatcher


def score(input, output, expected=None):
    want = expected["text"]
    ratio = SequenceMatcher(None, output, want).ratio()
    if ratio == 1.0:
        return 1.0, {"feedback": "Exact match."}
    return ratio, {"feedback": f"Similarity {ratio:.3f} to the expected text ({len(output)} vs {len(want)} characters)."}
