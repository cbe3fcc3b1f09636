# arity: 3
def score(input, output, expected):
    return 1.0, {"feedback": f"three: {expected}"}
