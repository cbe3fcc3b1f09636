# signature: found score(input, output, *, expected): keyword-only parameter(s) expected have no default; score must take (input, output) or (input, output, expected=None)
def score(input, output, *, expected):
    return 1.0, {"feedback": "?"}
