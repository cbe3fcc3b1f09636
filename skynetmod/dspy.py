# skynet.dspy_metric: one score function serves DSPy's metric calls.
def dspy_metric(score):
    """Adapts score(input, output[, expected]) to DSPy's metric calls.

    Returns metric(gold, pred, trace=None, pred_name=None, pred_trace=None,
    program_trace=None), DSPy's GEPA metric signature, and answers every call
    form with dspy.Prediction(score=..., feedback=..., objective_scores=...)
    (objective_scores when score returns named scores). DSPy reads it in each
    caller: dspy.Evaluate's metric(gold, pred) and bootstrapping's
    metric(gold, pred, trace) through its number behaviour (float(), +,
    comparisons; its truth is its score's, so a 0 is no success), dspy.GEPA
    takes objective_scores from those calls and feedback from its
    five-argument calls and its calls with trace, pred_name and pred_trace
    all None (dspy.Flex programs).

    input is gold.inputs(), expected gold.labels() (None when empty), and
    output the prediction's single output field (a dict when several);
    DSPy's internal dspy_* fields are left out. GEPA calls again for each
    predictor on the same gold and prediction: the result is remembered for
    the adapter's lifetime (one run), so a judge metric is not paid for
    twice. The same mapping as skynet_client.dspy_metric, which scores over
    skynet serve."""
    import inspect

    params = [p for p in inspect.signature(score).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    two = len(params) == 2 and not any(
        p.kind == p.VAR_POSITIONAL for p in inspect.signature(score).parameters.values())
    memo = {}
    keep = []  # the memo holds its keys' objects so their ids stay theirs

    def fields(obj):
        # Example.items() leaves out dspy_* fields; filtered again for other mappings.
        items = obj.items() if hasattr(obj, "items") else obj.toDict().items()
        return {k: v for k, v in items if not (isinstance(k, str) and k.startswith("dspy_"))}

    def judge(gold, pred):
        key = (id(gold), id(pred))
        if key in memo:
            return memo[key]
        input = fields(gold.inputs())
        expected = fields(gold.labels()) or None
        out = fields(pred)
        output = next(iter(out.values())) if len(out) == 1 else out
        result = score(input, output) if two else score(input, output, expected)
        if not isinstance(result, (tuple, list)) or len(result) != 2 or not isinstance(result[1], dict) \
                or not isinstance(result[1].get("feedback"), str):
            raise ValueError(f"metric's return value: must return (score, {{'feedback': str}}), got {result!r}")
        if len(memo) >= 4096:
            memo.clear()
            keep.clear()
        keep.append((gold, pred))
        memo[key] = (float(result[0]), result[1])
        return memo[key]

    def metric(gold, pred, trace=None, pred_name=None, pred_trace=None, program_trace=None):
        value, side = judge(gold, pred)
        extra = {}
        if isinstance(side.get("scores"), dict) and side["scores"]:
            extra["objective_scores"] = {k: float(v) for k, v in side["scores"].items()}
        return _prediction_class()(score=value, feedback=side["feedback"], **extra)

    metric.__name__ = getattr(score, "__name__", "metric")
    metric.__doc__ = score.__doc__
    return metric


_PREDICTION = None


def _prediction_class():
    """dspy.Prediction as true as its score, made once DSPy is imported (only
    when a DSPy caller runs)."""
    global _PREDICTION
    if _PREDICTION is None:
        import dspy

        class DSPyScore(dspy.Prediction):
            def __bool__(self):
                return bool(float(self))

        _PREDICTION = DSPyScore
    return _PREDICTION
