# check: case t1: metric's return value: side info has no "feedback" string
def score(input, output, expected=None):
    return (0.8, {})
