# A cheap grader written as QA metrics are (DSPy's evaluate/metrics.py
# f1_score, after SQuAD's): normalise as for exact match, split into
# tokens, F1 of the overlap, the best over the reference answers. About
# 35 us a case in python3.
import re
import string
import unicodedata
from collections import Counter


def normalize_text(s):
    s = unicodedata.normalize("NFD", s)

    def remove_articles(text):
        return re.sub(r"\b(a|an|the)\b", " ", text)

    def white_space_fix(text):
        return " ".join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    return white_space_fix(remove_articles(remove_punc(s.lower())))


def f1_score(prediction, ground_truth):
    prediction_tokens = normalize_text(prediction).split()
    ground_truth_tokens = normalize_text(ground_truth).split()
    common = Counter(prediction_tokens) & Counter(ground_truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0.0
    precision = num_same / len(prediction_tokens)
    recall = num_same / len(ground_truth_tokens)
    return 2 * precision * recall / (precision + recall)


def score(input, output, expected=None):
    best = max(f1_score(output, a) for a in expected["answers"])
    return best, {"feedback": f"Token F1 {best:.3f} against the best reference answer.", "scores": {"f1": best}}
