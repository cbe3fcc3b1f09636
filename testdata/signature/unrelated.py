# signature: the metric defines no `score` function
def judge(input, output, expected=None):
    return 1.0, {"feedback": "?"}
