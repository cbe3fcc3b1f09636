# check: case t1: metric's return value: score must be a number, got str '0.8'
def score(input, output, expected=None):
    return ("0.8", {"feedback": "OK"})
