# signature: the metric defines no `score` function
def scorer(input, output, expected=None):
    return 1.0, {"feedback": "?"}
