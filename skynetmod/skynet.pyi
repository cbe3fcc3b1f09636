"""Type stub for Skynet's native `skynet` module (registered by the host, so
there is no .py file for editors to read). Point your editor at the folder
holding this file: pyright/pylance `"stubPath"`, mypy `MYPYPATH`, or run
`skynet stub DIR` to write a copy into DIR.
"""

from typing import Any, Mapping, Optional, Tuple, TypedDict

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

def llm(instructions: str, input: Any = ..., *, temperature: Optional[float] = ..., max_tokens: Optional[int] = ...) -> str:
    """One chat call; returns the model's text. From score it goes to the
    metric model (the reflection model when none is set); from run code to
    the task model. Raises RuntimeError when no model is configured."""

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
