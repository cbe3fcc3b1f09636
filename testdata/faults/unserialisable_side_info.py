# fault: side info with values JSON cannot hold (a set, an object)
# kind: ok
# result: the keys are dropped with a warning naming each; the score stands
def score(input, output, expected=None):
    return 1.0, {"feedback": "ok", "seen": {1, 2}, "model": object()}
