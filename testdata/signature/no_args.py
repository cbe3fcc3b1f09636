# signature: found score(): 0 required parameter(s); score must take (input, output) or (input, output, expected=None)
def score():
    return 1.0, {"feedback": "?"}
