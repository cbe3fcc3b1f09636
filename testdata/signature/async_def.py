# arity: 3
async def score(input, output, expected=None):
    return 1.0, {"feedback": "?"}
