# arity: 3
def score(*args):
    return float(len(args)), {"feedback": "varargs"}
