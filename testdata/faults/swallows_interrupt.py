# fault: infinite loop that catches every Exception
# kind: timeout
def score(input, output, expected=None):
    while True:
        try:
            while True:
                pass
        except Exception:
            pass
