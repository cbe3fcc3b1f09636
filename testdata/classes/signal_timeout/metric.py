# A maths-answer grader that bounds its own work with SIGALRM, the way
# HuggingFace Math-Verify does (math_verify/utils.py `timeout`, grader.py
# `verify`): the decorator installs a handler, arms the timer, and in `finally`
# cancels the timer and puts the old handler back; the caller catches the
# timeout and counts the answer as wrong.
#
# Two decorators, the two spellings real code uses:
#   alarm_timeout(1)   old = signal.signal(...) + signal.alarm(whole seconds)
#   timeout(0.5)       old = signal.getsignal(...) + signal.setitimer(ITIMER_REAL)
# Both restore with signal.signal(SIGALRM, old), which raises TypeError when
# `old` is None (a handler Python did not install reads back as None).
#
# The answer is pulled out of the response (\boxed{...}, "answer is ...", else
# the last number), normalised (LaTeX fractions, thousands separators, %, units,
# $...$) and compared exactly as a Fraction, else as a normalised string.
#
# input["stall"] = {"stage": "parse"|"compare", "how": "busy"|"sleep"} stands in
# for a pathological answer that makes a real checker hang: "busy" spins in
# Python forever, "sleep" blocks in time.sleep(30). Those cases always time out.
import functools
import re
import signal
import time
from fractions import Fraction

PARSE_TIMEOUT_S = 1       # signal.alarm takes whole seconds
COMPARE_TIMEOUT_S = 0.5   # setitimer takes float seconds


class TimeoutException(BaseException):
    """BaseException, as in Math-Verify, so `except Exception` in the checked
    code cannot swallow it."""


def alarm_timeout(seconds):
    def decorator(func):
        def handler(signum, frame):
            raise TimeoutException(f"{func.__name__} timed out after {seconds} s")

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            old = signal.signal(signal.SIGALRM, handler)
            signal.alarm(seconds)
            try:
                return func(*args, **kwargs)
            finally:
                signal.alarm(0)
                signal.signal(signal.SIGALRM, old)

        return wrapper

    return decorator


def timeout(seconds):
    def decorator(func):
        def handler(signum, frame):
            raise TimeoutException(f"{func.__name__} timed out after {seconds} s")

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            old_handler = signal.getsignal(signal.SIGALRM)
            signal.signal(signal.SIGALRM, handler)
            signal.setitimer(signal.ITIMER_REAL, seconds)
            try:
                return func(*args, **kwargs)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, old_handler)

        return wrapper

    return decorator


def _stall(stall, stage):
    if not stall or stall.get("stage") != stage:
        return
    if stall.get("how") == "sleep":
        time.sleep(30)
    else:
        n = 0
        while True:  # a checker stuck in pure Python
            n = (n * 31 + 7) % 1000003


_BOXED = re.compile(r"\\boxed\s*\{")
_ANSWER_IS = re.compile(r"(?:final answer|answer)\s*(?:is|:|=)\s*([^\n]+)", re.IGNORECASE)
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?(?:/\d+)?%?|-?\.\d+%?")
_FRAC = re.compile(r"\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}")
_TEXT = re.compile(r"\\(?:text|mathrm|textbf|mbox)\s*\{([^{}]*)\}")
_UNITS = re.compile(r"\s*(?:dollars?|cents?|units?|meters?|metres?|cm|km|kg|g|m|s|seconds?|hours?|degrees?|\^\\circ|°)\.?\s*$",
                    re.IGNORECASE)


def extract_answer(text):
    """The final answer in a model response: the last \\boxed{...}, else what
    follows "answer is", else the last number; None when there is none."""
    starts = [m.end() for m in _BOXED.finditer(text)]
    if starts:
        i, depth = starts[-1], 1
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        if depth == 0:
            return text[starts[-1]:i - 1]
    m = None
    for m in _ANSWER_IS.finditer(text):
        pass
    if m:
        return m.group(1).strip().rstrip(".")
    nums = _NUMBER.findall(text)
    return nums[-1] if nums else None


def normalise(ans):
    s = ans.strip()
    s = s.strip("$").replace("\\$", "").replace("\\!", "").replace("\\,", "").replace("\\left", "").replace("\\right", "")
    s = _TEXT.sub(r"\1", s)
    s = _FRAC.sub(r"(\1)/(\2)", s)
    s = s.replace("\\%", "%").replace("{", "").replace("}", "")
    s = _UNITS.sub("", s)
    s = re.sub(r"(?<=\d),(?=\d{3}\b)", "", s)
    s = re.sub(r"\s+", "", s)
    if s.startswith("x=") or s.startswith("y="):
        s = s[2:]
    return s.lower()


_SIMPLE = re.compile(r"^\(?(-?[\d.]+(?:e[-+]?\d+)?)\)?(?:/\(?(-?[\d.]+)\)?)?(%?)$")
_POWER = re.compile(r"^(-?\d+)\^\(?(\d{1,3})\)?$")


def to_fraction(s):
    """Exact value of a normalised answer: 12, -3.5, 1e3, (3)/(4), 7/8, 25%, 10^6."""
    p = _POWER.match(s)
    if p:
        return Fraction(int(p.group(1)) ** int(p.group(2)))
    m = _SIMPLE.match(s)
    if not m:
        return None
    try:
        value = Fraction(m.group(1))
        if m.group(2) is not None:
            den = Fraction(m.group(2))
            if den == 0:
                return None
            value /= den
    except (ValueError, ZeroDivisionError):
        return None
    if m.group(3):
        value /= 100
    return value


@alarm_timeout(PARSE_TIMEOUT_S)
def parse(text, stall=None, extract=True):
    """(normalised answer, exact value or None) of a response (extract=True)
    or of a bare gold answer (extract=False)."""
    _stall(stall, "parse")
    raw = extract_answer(text) if extract else text
    if raw is None:
        return None, None
    norm = normalise(raw)
    return norm, to_fraction(norm)


@timeout(COMPARE_TIMEOUT_S)
def compare(pred, gold, stall=None):
    _stall(stall, "compare")
    (p_norm, p_val), (g_norm, g_val) = pred, gold
    if p_val is not None and g_val is not None:
        return p_val == g_val, "numeric"
    return p_norm == g_norm, "string"


def verify(response, gold_answer, stall=None):
    """(correct, how): never raises; a timeout is a wrong answer, as in Math-Verify."""
    try:
        pred = parse(response, stall)
        gold = parse(gold_answer, extract=False)
        if pred[0] is None:
            return False, "no answer found"
        return compare(pred, (gold[0], gold[1]), stall)
    except TimeoutException as e:
        return False, f"timeout ({e})"
    except Exception as e:  # a checker bug counts as wrong, not as an error
        return False, f"checker error {type(e).__name__}"


def score(input, output, expected=None):
    before = signal.getsignal(signal.SIGALRM)
    response = output if isinstance(output, str) else str(output)
    gold = str(expected["answer"])
    ok, how = verify(response, gold, input.get("stall"))
    # The decorators' own hygiene, checked every case: no timer left armed and
    # the caller's SIGALRM handler back in place.
    if signal.getitimer(signal.ITIMER_REAL) != (0.0, 0.0):
        raise RuntimeError("SIGALRM timer still armed after grading")
    if signal.getsignal(signal.SIGALRM) != before:
        raise RuntimeError("SIGALRM handler not restored after grading")
    if ok:
        return 1.0, {"feedback": f"Correct: the final answer equals {gold} ({how} match)."}
    if how.startswith("timeout"):
        return 0.0, {"feedback": f"Could not check the answer in time: {how}. Give a simpler final answer in \\boxed{{}}."}
    if how == "no answer found":
        return 0.0, {"feedback": "No final answer found; put it in \\boxed{}."}
    return 0.0, {"feedback": f"Wrong: expected {gold}, the final answer read as '{extract_answer(response)}' ({how} comparison)."}
