# fault: pure-Python infinite loop
# kind: timeout
def score(input, output, expected=None):
    while True:
        pass
