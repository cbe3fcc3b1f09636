# fault: returns a bare number (every invalid shape: testdata/contract/)
# kind: contract
def score(input, output, expected=None):
    return 0.8
