# signature: found score(input): 1 required parameter(s); score must take (input, output) or (input, output, expected=None)
def score(input):
    return 1.0, {"feedback": "?"}
