# A numpy grader with two kinds of case (input["kind"]):
#   "text":    bag-of-words cosine similarity between the output and
#              expected["text"] (term-count vectors over their joint vocabulary).
#   "numbers": the output is a list of numbers; the score is the fraction of
#              entries within np.isclose(rtol=1e-3, atol=1e-6) of
#              expected["values"], 1.0 only when np.allclose holds, with the
#              mean absolute error in the feedback.
# The score is returned as a plain float (float(...)), never np.float64.
import re

import numpy as np

_TOKEN = re.compile(r"[a-z0-9]+")


def bow_cosine(a, b):
    ta, tb = _TOKEN.findall(a.lower()), _TOKEN.findall(b.lower())
    vocab = {w: i for i, w in enumerate(sorted(set(ta) | set(tb)))}
    va = np.zeros(len(vocab), dtype=np.float64)
    vb = np.zeros(len(vocab), dtype=np.float64)
    for w in ta:
        va[vocab[w]] += 1.0
    for w in tb:
        vb[vocab[w]] += 1.0
    na, nb = np.linalg.norm(va), np.linalg.norm(vb)
    if na == 0.0 or nb == 0.0:
        return 0.0, vocab, va, vb
    return float(np.dot(va, vb) / (na * nb)), vocab, va, vb


def score_text(output, expected):
    text = output if isinstance(output, str) else " ".join(map(str, output)) if isinstance(output, list) else str(output)
    cos, vocab, va, vb = bow_cosine(text, expected["text"])
    words = sorted(vocab, key=vocab.get)
    missing = [words[i] for i in np.flatnonzero((vb > 0) & (va == 0))]
    fb = f"Cosine similarity {cos:.4f} to the reference."
    if missing:
        fb += f" Missing terms: {', '.join(missing[:8])}."
    return cos, {"feedback": fb}


def score_numbers(output, expected):
    want = np.asarray(expected["values"], dtype=np.float64)
    try:
        got = np.asarray(output, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        return 0.0, {"feedback": f"Expected a list of {want.size} numbers, got {type(output).__name__}."}
    if got.shape != want.shape:
        return 0.0, {"feedback": f"Expected {want.size} numbers, got {got.size}."}
    close = np.isclose(got, want, rtol=1e-3, atol=1e-6)
    mae = float(np.mean(np.abs(got - want))) if want.size else 0.0
    if np.allclose(got, want, rtol=1e-3, atol=1e-6):
        return 1.0, {"feedback": f"All {want.size} values within tolerance (MAE {mae:.3g})."}
    bad = np.flatnonzero(~close)
    frac = float(np.count_nonzero(close)) / want.size
    return frac, {"feedback": f"{int(close.sum())}/{want.size} values within tolerance; first off at index {int(bad[0])}: "
                              f"got {got[bad[0]]:.6g}, expected {want[bad[0]]:.6g} (MAE {mae:.3g})."}


def score(input, output, expected=None):
    if input.get("kind") == "numbers":
        s, side = score_numbers(output, expected)
    else:
        s, side = score_text(output, expected)
    return float(s), side
