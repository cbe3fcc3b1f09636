# check: case t1: metric's return value: must return a pair (score, side info), got float 0.8: no side info
def score(input, output, expected=None):
    return 0.8
