"""DSPy's own callers of a metric, run for real (DSPy from the pinned test
venv, build/python-test.lock), for both DSPy adapters: skynet_client's
dspy_metric (scored by skynet serve; clients/python/test_peers.py) and the
skynet module's dspy_metric (scored in the process; skynetmod's
TestDSPyMetric). drive(metric) runs each caller on a small program whose
LM is DSPy's own DummyLM and returns what DSPy got from the metric; both
tests assert the same things of it.

The metric scored is clients/python/testdata/metric.py: exact match on
expected["label"] with named scores "exact" and "length"; output "keys?"
gets expected's keys as its feedback.
"""

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch of litellm's price map at import

import dspy  # noqa: E402
from dspy.teleprompt.gepa.gepa_flex_utils import code_reflective_records, evaluate_with_trace  # noqa: E402
from dspy.teleprompt.gepa.gepa_utils import _extract_score_and_objective_scores  # noqa: E402
from dspy.utils.dummies import DummyLM  # noqa: E402

QUESTIONS = [f"ticket {i}" for i in range(8)]
LABELS = ["bug" if i % 2 else "feature" for i in range(8)]
ANSWERS = {q: {"label": "bug" if i % 3 else "feature"} for i, q in enumerate(QUESTIONS)}  # 5 of 8 right
ANSWERS["ticket keys"] = {"label": "keys?"}

_MISSING = object()


def devset():
    # dspy_uuid and dspy_split as dspy.datasets adds them to every example
    return [
        dspy.Example(question=q, label=label, dspy_uuid=f"u{i}", dspy_split="dev").with_inputs("question")
        for i, (q, label) in enumerate(zip(QUESTIONS, LABELS))
    ]


def recording(metric, calls):
    """metric with GEPA's signature, recording each call's form (which
    arguments came, None or not) and what it returned."""

    def wrapped(gold, pred, trace=_MISSING, pred_name=_MISSING, pred_trace=_MISSING, program_trace=_MISSING):
        given = {n: v for n, v in (("trace", trace), ("pred_name", pred_name), ("pred_trace", pred_trace), ("program_trace", program_trace)) if v is not _MISSING}
        out = metric(gold, pred, **given)
        form = ", ".join(["gold", "pred"] + [f"{n}=None" if v is None else n for n, v in given.items()])
        calls.append((form, out))
        return out

    return wrapped


def answer(out):
    """What DSPy reads of a metric's answer."""
    score, objectives = _extract_score_and_objective_scores(out)
    return {
        "type": type(out).__name__,
        "score": float(score),
        "truth": bool(out),
        "feedback": out.get("feedback") if hasattr(out, "get") else None,
        "objective_scores": objectives,
    }


def drive(metric):
    # dspy.context, not dspy.configure: DSPy lets only the thread that first
    # configured it configure again, and a process may drive this twice from
    # different threads (go test -count=2 of skynetmod's in-process test).
    with dspy.context(lm=DummyLM(ANSWERS)):
        return _drive(metric)


def _drive(metric):
    program = dspy.Predict("question -> label")
    dev = devset()
    got = {}

    # dspy/evaluate/evaluate.py, Evaluate.__call__: metric(example, prediction), 8 threads
    result = dspy.Evaluate(devset=dev, metric=metric, num_threads=8, display_progress=False)(program)
    got["evaluate_score"] = result.score
    got["evaluate"] = [answer(r[2]) for r in result.results]

    # dspy/teleprompt/bootstrap.py, BootstrapFewShot._bootstrap_one_example:
    # success = metric(example, prediction, trace) without a threshold
    compiled = dspy.BootstrapFewShot(metric=metric, max_bootstrapped_demos=8, max_labeled_demos=0, max_rounds=1).compile(program.deepcopy(), trainset=dev)
    got["bootstrap_demos"] = sorted(d["question"] for d in compiled.demos)

    # dspy.GEPA: its Evaluate, bootstrap_trace_data and feedback_fn calls
    calls = []
    reflection = DummyLM([{"new_instruction": "Label a ticket bug when its number is odd, else feature."}] * 64, adapter=dspy.JSONAdapter())
    gepa = dspy.GEPA(metric=recording(metric, calls), reflection_lm=reflection, max_metric_calls=40, track_stats=True, num_threads=2, seed=0)
    optimized = gepa.compile(program.deepcopy(), trainset=dev[:4], valset=dev[4:])
    got["gepa_subscores"] = [dict(s) for s in optimized.detailed_results.val_aggregate_subscores]
    got["reflection_prompts"] = ["\n".join(m["content"] for m in h["messages"]) if h.get("messages") else h["prompt"] for h in reflection.history]

    # dspy/teleprompt/gepa/gepa_flex_utils.py, evaluate_with_trace: the call
    # DSPy's GEPA makes for a program with a dspy.Flex component, then
    # code_reflective_records, which reads its feedback
    batch = evaluate_with_trace(program, dev[:3], metric_fn=recording(metric, calls), num_threads=1, failure_score=0.0, callback_metadata=None, capture_traces=True)
    got["flex_feedback"] = [r["Feedback"] for r in code_reflective_records(batch)]
    got["flex_objectives"] = batch.objective_scores

    got["forms"] = {}
    for form, out in calls:
        got["forms"].setdefault(form, []).append(answer(out))

    keys_example = dspy.Example(question="ticket keys", label="x", dspy_uuid="u", dspy_split="train").with_inputs("question")
    got["expected_keys"] = answer(metric(keys_example, program(question="ticket keys")))["feedback"]
    return got


# What both adapters must give DSPy: each check raises AssertionError
# naming what DSPy got instead. reference(cases) scores case-file dicts
# the plain way (skynet score, or the metric called directly) and returns
# their results ({"score", "feedback", "scores", "error"}) in order.

FEEDBACK = ("Correct.", "Expected 'feature', got 'bug'.", "Expected 'bug', got 'feature'.")

FORMS = [
    "gold, pred",  # Evaluate: on GEPA's valset, and dspy.Evaluate
    "gold, pred, trace=None",  # bootstrap_trace_data's wrapped_metric
    "gold, pred, trace, pred_name, pred_trace",  # GEPA's feedback_fn, per predictor
    "gold, pred, trace=None, pred_name=None, pred_trace=None, program_trace",  # evaluate_with_trace (dspy.Flex)
]


def expect(ok, message):
    if not ok:
        raise AssertionError(message)


def check_evaluate(got, reference):
    cases = [
        # input: the example's inputs; expected: its labels, without
        # dspy_uuid and dspy_split; output: the prediction's one field
        {"id": str(i), "input": {"question": q}, "output": ANSWERS[q]["label"], "expected": {"label": label}}
        for i, (q, label) in enumerate(zip(QUESTIONS, LABELS))
    ]
    want = reference(cases)
    expect(len(got["evaluate"]) == len(cases), f"Evaluate: {len(got['evaluate'])} results for {len(cases)} examples")
    for i, (a, ref) in enumerate(zip(got["evaluate"], want)):
        ref_scores = {k: float(v) for k, v in ref["scores"].items()}
        expect(a["type"] == "DSPyScore", f"Evaluate, example {i}: DSPy got a {a['type']}")
        expect((a["score"], a["feedback"], a["objective_scores"]) == (float(ref["score"]), ref["feedback"], ref_scores),
               f"Evaluate, example {i}: DSPy got {a}, the reference scores {ref}")
    mean = round(100 * sum(float(r["score"]) for r in want) / len(want), 2)
    expect(got["evaluate_score"] == mean, f"Evaluate's score {got['evaluate_score']}, the reference's mean {mean}")


def check_bootstrap(got):
    # BootstrapFewShot keeps a demo when the metric's answer is true: a
    # score of 0 must not be (a dspy.Prediction with fields always is)
    right = sorted(q for q, label in zip(QUESTIONS, LABELS) if ANSWERS[q]["label"] == label)
    expect(got["bootstrap_demos"] == right, f"BootstrapFewShot kept {got['bootstrap_demos']}, the examples scored 1 are {right}")


def check_gepa(got):
    forms = got["forms"]
    expect(sorted(forms) == sorted(FORMS), f"GEPA's call forms: {sorted(forms)}, want {sorted(FORMS)}")
    for form, answers in forms.items():
        for a in answers:
            expect(a["type"] == "DSPyScore", f"metric({form}) answered a {a['type']}")
            expect(a["feedback"] in FEEDBACK, f"metric({form}): feedback {a['feedback']!r} is not the metric's")
            expect(set(a["objective_scores"]) == {"exact", "length"} and a["objective_scores"]["exact"] == a["score"],
                   f"metric({form}): objective_scores {a['objective_scores']} for score {a['score']}")
            expect(a["truth"] == (a["score"] != 0), f"metric({form}): bool() is {a['truth']} for score {a['score']}")
    expect(got["gepa_subscores"][0] == {"exact": 0.75, "length": 4.0}, f"GEPA's objectives: {got['gepa_subscores']}")
    prompts = "".join(got["reflection_prompts"])
    expect("Expected 'feature', got 'bug'." in prompts, "the metric's feedback did not reach GEPA's reflection LM")
    expect("This trajectory got a score" not in prompts, "GEPA replaced the metric's feedback with its own")


def check_flex(got):
    want = ["Correct.", "Correct.", "Expected 'feature', got 'bug'."]
    expect(got["flex_feedback"] == want, f"code_reflective_records read feedback {got['flex_feedback']}, want {want}")
    expect([o["exact"] for o in got["flex_objectives"]] == [1.0, 1.0, 0.0], f"evaluate_with_trace's objectives: {got['flex_objectives']}")


def check_expected_keys(got):
    expect(got["expected_keys"] == "expected keys: label", f"expected held DSPy's own fields: {got['expected_keys']!r}")


def check_all(got, reference):
    """Every check; the failures' messages (empty when all pass)."""
    failed = []
    for check in (lambda: check_evaluate(got, reference), lambda: check_bootstrap(got), lambda: check_gepa(got),
                  lambda: check_flex(got), lambda: check_expected_keys(got)):
        try:
            check()
        except AssertionError as e:
            failed.append(str(e))
    return failed
