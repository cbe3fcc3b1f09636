# signature: `score` is `async def`; it must be a plain `def` (Skynet calls it directly)
async def score(input, output, expected=None):
    return 1.0, {"feedback": "?"}
