# signature: the metric defines no `score` function (it defines `scorer`: did you mean `score`?)
def scorer(input, output, expected=None):
    return 1.0, {"feedback": "?"}
