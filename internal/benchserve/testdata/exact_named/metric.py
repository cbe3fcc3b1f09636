# make bench-serve's cheap reward (internal/benchserve --rewards): an exact
# match of the completion against the label, with named scores, well under
# a microsecond a call, so the servers' own costs (HTTP, JSON, dispatch)
# are what is measured.
def score(input, output, expected=None):
    if output == expected["label"]:
        return 1.0, {"feedback": "Correct.", "scores": {"exact": 1.0, "answered": 1.0}}
    return 0.0, {"feedback": "Wrong answer.", "scores": {"exact": 0.0, "answered": 1.0 if output else 0.0}}
