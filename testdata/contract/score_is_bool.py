# check: case t1: metric's return value: score must be a number, got bool True (bool is not a number here)
def score(input, output, expected=None):
    return (True, {"feedback": "OK"})
