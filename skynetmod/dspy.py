# skynet.dspy_metric: one score function serves DSPy's metric calls.
def dspy_metric(score):
    """Adapts score(input, output[, expected]) to DSPy's metric calls:

      metric(gold, pred)                                  -> float  (Evaluate)
      metric(gold, pred, trace)                           -> float  (bootstrapping)
      metric(gold, pred, trace, pred_name, pred_trace)    -> dspy.Prediction(score, feedback)  (GEPA)

    input is gold.inputs(), expected gold.labels() (None when empty), and
    output the prediction's single output field (a dict when several). GEPA
    calls again for each predictor on the same gold and prediction: the
    result is remembered for the adapter's lifetime (one run), so a judge
    metric is not paid for twice."""
    import inspect

    params = [p for p in inspect.signature(score).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    two = len(params) == 2 and not any(
        p.kind == p.VAR_POSITIONAL for p in inspect.signature(score).parameters.values())
    memo = {}
    keep = []  # the memo holds its keys' objects so their ids stay theirs

    def as_dict(example):
        if hasattr(example, "toDict"):
            return dict(example.toDict())
        return dict(example.items())

    def judge(gold, pred):
        key = (id(gold), id(pred))
        if key in memo:
            return memo[key]
        input = as_dict(gold.inputs())
        expected = as_dict(gold.labels()) or None
        fields = as_dict(pred)
        output = next(iter(fields.values())) if len(fields) == 1 else fields
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

    def metric(gold, pred, trace=None, pred_name=None, pred_trace=None):
        value, side = judge(gold, pred)
        if pred_name is None and pred_trace is None:
            return value
        import dspy  # imported only when DSPy asks for feedback

        extra = {}
        if isinstance(side.get("scores"), dict):
            extra["objective_scores"] = dict(side["scores"])
        return dspy.Prediction(score=value, feedback=side["feedback"], **extra)

    metric.__name__ = getattr(score, "__name__", "metric")
    metric.__doc__ = score.__doc__
    return metric
