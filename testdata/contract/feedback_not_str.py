# check: case t1: metric's return value: side info "feedback" must be a str, got None
def score(input, output, expected=None):
    return (1.0, {"feedback": None})
