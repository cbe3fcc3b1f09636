"""Type stub for Skynet's native `skynet` module (registered by the host, so
there is no .py file for editors to read). Point your editor at the folder
holding this file: pyright/pylance `"stubPath"`, mypy `MYPYPATH`, or run
`skynet stub DIR` to write a copy into DIR.
"""

from typing import Any, Callable, Mapping, Optional, Tuple, TypedDict

class Observation(TypedDict):
    run_ms: Optional[float]
    cost_usd: Optional[float]
    model_calls: Optional[int]
    input_tokens: Optional[int]
    output_tokens: Optional[int]

class _Scores(TypedDict):
    accuracy: float
    speed: float
    cost: float

class _RewardSideInfo(TypedDict):
    feedback: str
    scores: _Scores

class LLMError(RuntimeError):
    """A model call failed after its retries, or was cut short by the
    case's time limit."""

def llm(instructions: str, input: Any = None, *, temperature: Optional[float] = None, max_tokens: Optional[int] = None) -> str:
    """One chat call; returns the model's text. `input` is sent as the user
    message (a non-str value as JSON). From score it goes to the metric
    model (the reflection model when none is set); from run code to the
    task model. The GIL is released while the host waits on the network.
    Raises LLMError when the call fails after retries, RuntimeError when no
    model is configured."""

def allm(instructions: str, input: Any = None, *, temperature: Optional[float] = None, max_tokens: Optional[int] = None) -> Awaitable[str]:
    """llm() for `async def score`: `await skynet.allm(...)`. The host makes
    the call while the event loop runs other cases; the same models,
    limits and errors as llm(). Only from a case of an `async def score`."""

def reward(spec: Mapping[str, Any], accuracy: float, feedback: str) -> Tuple[float, _RewardSideInfo]:
    """Combines accuracy with the measured run time and cost of the current
    case per REWARD_SPEC; returns a valid (score, side info) pair with
    scores {"accuracy", "speed", "cost"}. Raises ValueError on a bad
    accuracy (outside [0, 1] without accuracy.reference)."""

def observation() -> Observation:
    """What was measured for the current case (None = not measured). A fresh
    dict each call; changing it changes nothing the host computes."""

def service_cost() -> Optional[float]:
    """Measured USD cost of the current case's model calls made by run, or None."""

def dspy_metric(score: Callable[..., Tuple[float, Mapping[str, Any]]]) -> Callable[..., Any]:
    """Adapts score to DSPy's metric calls: metric(gold, pred) and
    metric(gold, pred, trace) return a float; metric(gold, pred, trace,
    pred_name, pred_trace) (GEPA) returns dspy.Prediction(score=...,
    feedback=...[, objective_scores=...]). Results are remembered per
    (gold, pred) for the adapter's lifetime."""
