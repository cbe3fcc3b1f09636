# check: case t1: metric's return value: side info must be a dict, got str 'Close.'
def score(input, output, expected=None):
    return (0.8, "Close.")
