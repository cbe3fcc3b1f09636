# fault: feedback with a lone surrogate (not valid UTF-8)
# kind: ok
# result: the surrogate is written backslash-escaped (\udc80)
def score(input, output, expected=None):
    return 1.0, {"feedback": "bad \udc80 text"}
