# signature: the metric defines no `score` function (it defines `scor`: did you mean `score`?)
def scor(input, output, expected=None):
    return 1.0, {"feedback": "?"}
