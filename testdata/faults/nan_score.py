# fault: returns NaN
# kind: contract
def score(input, output, expected=None):
    return float("nan"), {"feedback": "?"}
