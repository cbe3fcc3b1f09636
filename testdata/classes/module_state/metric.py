# A keyword-coverage grader that keeps state in module globals the way real
# graders do, none of which may change a result:
#   - a resource built lazily on the first call: the stop words and synonym
#     table read from stopwords.txt / synonyms.tsv beside this file (found
#     through __file__), and a table of compiled regexes;
#   - a memo cache: functools.lru_cache on the per-token normaliser.
# Results must not depend on which process scores a case, nor in what order:
# the feedback reports only case-independent facts about the state (the
# vocabulary's size and checksum), and every call checks that the lazy load
# ran exactly once in this module and that the cache agrees with a fresh
# computation.
#
# Score: F1 between the output's and expected["answer"]'s canonical content
# terms (lower-cased, stop words dropped, synonyms mapped, plural -s folded),
# minus 0.25 when the output breaks input["max_words"].
import functools
import hashlib
import os
import re
import threading

_HERE = os.path.dirname(os.path.abspath(__file__))
_VOCAB = None          # (stopwords frozenset, synonyms dict, checksum), built on first use
_PATTERNS = {}         # name -> compiled regex, built on first use
_LOADS = 0             # how many times the vocabulary was read in this module
_LOCK = threading.Lock()  # a lazy load that scoring threads may race to


def _vocab():
    global _VOCAB
    with _LOCK:
        if _VOCAB is None:
            _VOCAB = _load()
    return _VOCAB


def _load():
    """Reads the vocabulary; _vocab holds the lock."""
    global _LOADS
    _LOADS += 1
    h = hashlib.sha1()
    stop, syn = set(), {}
    with open(os.path.join(_HERE, "stopwords.txt"), encoding="utf-8") as f:
        for line in f:
            h.update(line.encode())
            w = line.strip()
            if w and not w.startswith("#"):
                stop.add(w)
    with open(os.path.join(_HERE, "synonyms.tsv"), encoding="utf-8") as f:
        for line in f:
            h.update(line.encode())
            if line.strip() and not line.startswith("#"):
                variant, canonical = line.rstrip("\n").split("\t")
                syn[variant] = canonical
    return (frozenset(stop), syn, h.hexdigest()[:10])


def _pattern(name):
    if not _PATTERNS:
        _PATTERNS.update({
            "token": re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*"),
            "space": re.compile(r"\s+"),
            "plural": re.compile(r"(?<=[a-z]{3})s$"),
        })
    return _PATTERNS[name]


def _canonical(token):
    stop, syn, _ = _vocab()
    if token in stop:
        return None
    if token in syn:
        return syn[token]
    singular = _pattern("plural").sub("", token)
    return syn.get(singular, singular)


canonical = functools.lru_cache(maxsize=256)(_canonical)


def terms(text):
    out = set()
    for tok in _pattern("token").findall(text.lower()):
        c = canonical(tok)
        if c is not None:
            if c != _canonical(tok):
                raise RuntimeError(f"memo cache disagrees for {tok!r}")
            out.add(c)
    return out


def score(input, output, expected=None):
    stop, syn, checksum = _vocab()
    if _LOADS != 1:
        raise RuntimeError(f"vocabulary loaded {_LOADS} times in one module")
    text = output if isinstance(output, str) else str(output)
    got, want = terms(text), terms(expected["answer"])
    hit = got & want
    p = len(hit) / len(got) if got else 0.0
    r = len(hit) / len(want) if want else 1.0
    f1 = 2 * p * r / (p + r) if p + r else 0.0
    penalty = ""
    limit = input.get("max_words")
    n_words = len(_pattern("space").split(text.strip())) if text.strip() else 0
    if limit is not None and n_words > limit:
        f1 = max(0.0, f1 - 0.25)
        penalty = f" {n_words} words, over the {limit}-word limit (-0.25)."
    missing = sorted(want - got)
    fb = f"Key-term F1 {f1:.3f} (precision {p:.2f}, recall {r:.2f})."
    if missing:
        fb += f" Missing: {', '.join(missing)}."
    fb += penalty
    fb += f" [vocabulary {checksum}: {len(stop)} stop words, {len(syn)} synonyms]"
    return f1, {"feedback": fb}
