# fault: unbounded recursion
# kind: exception
def score(input, output, expected=None):
    return score(input, output, expected)
