# fault: score an int too long for str() (10**100000; Python 3.11+ converts at most 4300 digits)
# kind: contract
# result: a contract result: "score must be a finite number, got an int of 100001 digits (too large for a float)"
def score(input, output, expected=None):
    return 10**100000, {"feedback": "x"}
