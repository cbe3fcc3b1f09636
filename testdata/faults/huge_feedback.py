# fault: 100 MB feedback string
# kind: ok
# result: feedback cut to 1 MiB with a "[skynet: truncated, N more bytes]" marker
def score(input, output, expected=None):
    return 1.0, {"feedback": "x" * 100_000_000}
