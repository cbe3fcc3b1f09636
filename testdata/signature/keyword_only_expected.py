# signature: found score(input, output, *, expected=None): `expected` is keyword-only, so it would never be passed; make it the third positional parameter: def score(input, output, expected=None)
def score(input, output, *, expected=None):
    return 1.0, {"feedback": "expected is always None here"}
