# check: case t1: metric's return value: score must be a finite number, got float -inf
def score(input, output, expected=None):
    return [float("-inf"), {"feedback": "OK"}]
