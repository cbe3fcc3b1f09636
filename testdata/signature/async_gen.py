# signature: `score` is an async generator (`async def` with `yield`); it must return (score, side info)
async def score(input, output, expected=None):
    yield 1.0
