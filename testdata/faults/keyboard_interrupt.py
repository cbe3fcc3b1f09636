# fault: raises KeyboardInterrupt
# kind: exception
def score(input, output, expected=None):
    raise KeyboardInterrupt
