# check: case t1: metric's return value: named score "a" must be a number, got str 'high'
def score(input, output, expected=None):
    return (0.8, {"feedback": "OK", "scores": {"a": "high"}})
