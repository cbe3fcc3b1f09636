# The metric the client tests score with (test_skynet_client.py, and
# cmd/skynet/pyclient_test.go serves it with `skynet serve`): exact match on
# expected["label"], a named score, and a ValueError when output is "boom".
def score(input, output, expected=None):
    if output == "boom":
        raise ValueError("boom requested")
    want = (expected or {}).get("label")
    ok = output == want
    return (1.0 if ok else 0.0), {
        "feedback": "Correct." if ok else f"Expected {want!r}, got {output!r}.",
        "scores": {"exact": 1.0 if ok else 0.0, "length": float(len(str(output)))},
    }
