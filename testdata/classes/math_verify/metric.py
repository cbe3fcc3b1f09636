# Math-Verify from PyPI, as RL math rewards use it: parse and verify with
# their default timeouts (signal.alarm: 5 s each), and verl's math_metric
# wrapper (verl/utils/reward_score/math_verify.py) on the same answer.
from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify
from math_verify.errors import TimeoutException
from math_verify.metric import math_metric

_verl = math_metric(
    gold_extraction_target=(LatexExtractionConfig(),),
    pred_extraction_target=(ExprExtractionConfig(), LatexExtractionConfig()),
)


def score(input, output, expected=None):
    gold = parse("$" + expected["answer"] + "$")
    pred = parse(output)
    ok = verify(gold, pred)
    try:
        verl_score, _ = _verl(["\\boxed{" + expected["answer"] + "}"], [output])
    except TimeoutException:
        verl_score = 0.0
    return (1.0 if ok else 0.0), {
        "feedback": f"gold {[str(g) for g in gold]}, answer {[str(p) for p in pred]}: {'equivalent' if ok else 'not equivalent'}",
        "scores": {"verify": 1.0 if ok else 0.0, "verl_math_metric": float(verl_score)},
    }
