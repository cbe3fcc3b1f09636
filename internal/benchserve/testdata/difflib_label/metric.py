# make bench-serve's CPU-heavy reward (internal/benchserve --rewards): how
# close the completion is to the label, by difflib's SequenceMatcher over
# characters. On the texts the bench sends (a label of 22 words and the same
# text with two words changed and one dropped, about 110 characters each) a
# call takes about 0.2 ms (0.20-0.21 ms in a plain python3.11 loop on this
# project's VM), almost all of it pure-Python difflib.
from difflib import SequenceMatcher


def score(input, output, expected=None):
    ratio = SequenceMatcher(None, output, expected["label"]).ratio()
    return ratio, {"feedback": f"Similarity {ratio:.3f} to the label.", "scores": {"similarity": ratio}}
