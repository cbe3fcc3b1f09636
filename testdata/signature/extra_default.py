# arity: 3
def score(input, output, expected=None, strict=False):
    return 1.0, {"feedback": "four with a default"}
