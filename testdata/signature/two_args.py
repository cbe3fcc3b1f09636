# arity: 2
def score(input, output):
    return 1.0, {"feedback": f"two: {output}"}
