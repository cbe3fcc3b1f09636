# check: case t1: metric's return value: score must be a finite number, got float nan
def score(input, output, expected=None):
    return (float("nan"), {"feedback": "OK"})
