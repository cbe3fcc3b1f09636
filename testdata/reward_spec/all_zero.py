# check: weights must not all be 0
from skynet import reward
REWARD_SPEC = {"weights": {"accuracy": 0, "speed": 0, "cost": 0.0}, "accuracy": {}, "speed": {"reference": 2000}, "cost": {"reference": 0.01}}
def score(input, output, expected=None):
    return reward(REWARD_SPEC, 1.0, "ok")
