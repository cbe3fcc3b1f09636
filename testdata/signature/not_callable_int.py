# signature: `score` is an int, not a function
score = 3
