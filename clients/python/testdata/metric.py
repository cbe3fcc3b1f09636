# The metric the client tests score with (test_skynet_client.py and
# test_peers.py; cmd/skynet/pyclient_test.go serves it with `skynet serve`,
# skynetmod's TestDSPyMetric calls it in-process): exact match on
# expected["label"], two named scores, a ValueError when output is "boom",
# and, when output is "keys?", expected's keys as the feedback.
def score(input, output, expected=None):
    if output == "boom":
        raise ValueError("boom requested")
    if output == "keys?":
        return 0.0, {"feedback": "expected keys: " + ",".join(sorted(expected or {}))}
    want = (expected or {}).get("label")
    ok = output == want
    return (1.0 if ok else 0.0), {
        "feedback": "Correct." if ok else f"Expected {want!r}, got {output!r}.",
        "scores": {"exact": 1.0 if ok else 0.0, "length": float(len(str(output)))},
    }
