# The exact-match metric made lenient, the README's second run for skynet
# compare and skynet report: "other" passes for "bug".
def score(input, output, expected=None):
    want = expected["label"]
    if output == want or (output, want) == ("other", "bug"):
        return 1.0, {"feedback": "Correct."}
    return 0.0, {"feedback": f"Expected {want!r}, got {output!r}."}
