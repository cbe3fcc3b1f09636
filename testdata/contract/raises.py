# check: case t1: score raised KeyError: 'labels'
def score(input, output, expected=None):
    return 1.0 if output == expected["labels"] else 0.0, {"feedback": ""}
