# check: weights.cost is missing
from skynet import reward
REWARD_SPEC = {"weights": {"accuracy": 0.7, "speed": 0.3}, "accuracy": {}, "speed": {"reference": 2000}, "cost": {"reference": 0.01}}
def score(input, output, expected=None):
    return reward(REWARD_SPEC, 1.0, "ok")
