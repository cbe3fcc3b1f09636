# check: case t1: metric's return value: must return a pair (score, side info), got tuple of 3 items
def score(input, output, expected=None):
    return (1.0, {"feedback": "OK"}, "extra")
