# signature: found score(input, output, expected, trace): 4 required parameters; score must take (input, output) or (input, output, expected=None)
def score(input, output, expected, trace):
    return 1.0, {"feedback": "?"}
