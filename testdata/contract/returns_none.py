# check: case t1: metric's return value: must return a pair (score, side info), got None
def score(input, output, expected=None):
    print("forgot to return")
