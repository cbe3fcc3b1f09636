# signature: `score` is a float, not a function
score = 0.5
