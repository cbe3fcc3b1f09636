# A cheap grader written as QA metrics are (DSPy's evaluate/metrics.py
# normalize_text and em_score, after SQuAD's): Unicode NFD, lower-case, no
# punctuation, no articles, whitespace collapsed; a match against any
# reference answer. About 15 us a case in python3.
import re
import string
import unicodedata


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


def em_score(prediction, ground_truth):
    return normalize_text(prediction) == normalize_text(ground_truth)


def score(input, output, expected=None):
    answers = expected["answers"]
    if any(em_score(output, a) for a in answers):
        return 1.0, {"feedback": "Matches a reference answer."}
    return 0.0, {"feedback": f"{output!r} matches none of the {len(answers)} reference answer(s)."}
