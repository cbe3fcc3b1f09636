# A symbolic maths-answer verifier in the style of Math-Verify: parse both
# answers with sympy's parse_expr (implicit multiplication, ^ for powers), call
# them equal when sympy.simplify(answer - gold) == 0, every sympy step bounded
# by a SIGALRM timeout (setitimer, 1 s and then every 0.5 s until cleared, old
# handler restored in `finally`); when parsing fails or a step times out, fall back to comparing
# the normalised strings, as Math-Verify falls back to string comparison.
#
# Case se14 compares tan(x+y+z)^6 with (sin(x+y+z)/cos(x+y+z))^6: simplify
# runs well over 20 s (interruptible pure Python), so the 1 s timeout always
# fires and the string fallback decides (score 0).
import re
import signal

import sympy
from sympy.parsing.sympy_parser import (convert_xor, implicit_multiplication_application, parse_expr,
                                        standard_transformations)

TIMEOUT_S = 1
TRANSFORMS = standard_transformations + (implicit_multiplication_application, convert_xor)


class TimeoutException(BaseException):
    pass


def timeout(seconds):
    def decorator(func):
        def handler(signum, frame):
            raise TimeoutException(f"{func.__name__} timed out")

        def wrapper(*args, **kwargs):
            old_handler = signal.getsignal(signal.SIGALRM)
            signal.signal(signal.SIGALRM, handler)
            # Fires again every 0.5 s until cleared: an exception raised while
            # Python runs a __del__ or a weakref callback is printed and
            # dropped ("Exception ignored in"), and a one-shot alarm lost
            # that way left simplify running for minutes.
            signal.setitimer(signal.ITIMER_REAL, seconds, 0.5)
            try:
                return func(*args, **kwargs)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, old_handler)

        return wrapper

    return decorator


def normalise(s):
    s = s.strip().strip("$").replace("\\left", "").replace("\\right", "").replace("\\cdot", "*")
    s = re.sub(r"\\[dt]?frac\{([^{}]*)\}\{([^{}]*)\}", r"(\1)/(\2)", s)
    s = s.replace("\\", "").replace("{", "(").replace("}", ")").replace("**", "^")
    return re.sub(r"\s+", "", s).lower()


@timeout(TIMEOUT_S)
def parse(s):
    return parse_expr(normalise(s), transformations=TRANSFORMS, evaluate=True)


@timeout(TIMEOUT_S)
def symbolic_equal(a, b):
    if a == b:
        return True
    return sympy.simplify(a - b) == 0


def verify(answer, gold):
    """(equal, how)."""
    try:
        a, b = parse(answer), parse(gold)
    except TimeoutException:
        return normalise(answer) == normalise(gold), "parse timed out; string comparison"
    except Exception as e:
        return normalise(answer) == normalise(gold), f"unparsable ({type(e).__name__}); string comparison"
    try:
        return bool(symbolic_equal(a, b)), f"symbolic: {sympy.sstr(a)} vs {sympy.sstr(b)}"
    except TimeoutException:
        return normalise(answer) == normalise(gold), "simplify timed out; string comparison"
    except Exception as e:
        return normalise(answer) == normalise(gold), f"sympy failed ({type(e).__name__}); string comparison"


# Warm up at import, outside any timeout: the first parse and simplify import
# and compile sympy's lazily loaded modules (~0.25 s cold on a Python without
# cached bytecode), which must not count against a case's 1 s budget.
sympy.simplify(parse_expr("(x+1)^2", transformations=TRANSFORMS) - parse_expr("x^2 + 2x + 1", transformations=TRANSFORMS))


def score(input, output, expected=None):
    answer = output if isinstance(output, str) else str(output)
    gold = expected["answer"]
    ok, how = verify(answer, gold)
    if ok:
        return 1.0, {"feedback": f"Equivalent to {gold} ({how})."}
    return 0.0, {"feedback": f"Not equivalent to {gold} ({how})."}
