# case: ValueError: reward: accuracy must be a score in [0, 1] (REWARD_SPEC has no accuracy.reference), got 1.5
# The spec is valid; the accuracy handed to reward() is not.
from skynet import reward
REWARD_SPEC = {"weights": {"accuracy": 0.7, "speed": 0.2, "cost": 0.1}, "accuracy": {}, "speed": {"reference": 2000}, "cost": {"reference": 0.01}}
def score(input, output, expected=None):
    return reward(REWARD_SPEC, 1.5, "too good")
