# fault: sys.exit(3) inside score
# kind: exception
import sys
def score(input, output, expected=None):
    sys.exit(3)
