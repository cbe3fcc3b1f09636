# A maths-answer checker that evaluates each answer in a separate process
# (multiprocessing context "spawn") so a pathological answer cannot hang the
# trainer: the verdict comes back through a Pipe, the parent waits with a
# timeout and terminates a child that is still working (e.g. 9**9**9, whose
# big-int power runs in C, where no signal-based timeout can interrupt it).
#
# The child's target, _evaluate, is a module-level function of this file, so a
# spawn child must import this module by name ("metric") to find it.
#
# output: an arithmetic expression (or "... = <expression>"); expected["value"]:
# the exact answer as a string ("3/4", "-2", "0.125"). Evaluated exactly with
# fractions over + - * / ** and parentheses, through the ast module (no eval).
import ast
import multiprocessing
from fractions import Fraction

CONTEXT = "spawn"
TIME_LIMIT_S = 2.0  # spawn start-up is 50-100 ms; leave room on a loaded machine

_BINOPS = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.Pow: lambda a, b: a ** b,
}


def _exact(node):
    if isinstance(node, ast.Expression):
        return _exact(node.body)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return Fraction(str(node.value)) if isinstance(node.value, float) else Fraction(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _exact(node.operand)
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left, right = _exact(node.left), _exact(node.right)
        if isinstance(node.op, ast.Pow) and right.denominator != 1:
            raise ValueError("only whole-number powers are exact")
        return _BINOPS[type(node.op)](left, right)
    raise ValueError(f"unsupported syntax: {type(node).__name__}")


def _evaluate(conn, text):
    """Child process: send ("ok", numerator, denominator) or ("error", message)."""
    try:
        expr = text.split("=")[-1].strip().replace("^", "**")
        value = _exact(ast.parse(expr, mode="eval"))
        conn.send(("ok", value.numerator, value.denominator))
    except ZeroDivisionError:
        conn.send(("error", "division by zero"))
    except SyntaxError:
        conn.send(("error", f"cannot parse {expr!r}"))
    except Exception as e:
        conn.send(("error", str(e)))
    finally:
        conn.close()


def evaluate_with_limit(text):
    ctx = multiprocessing.get_context(CONTEXT)
    recv, send = ctx.Pipe(duplex=False)
    p = ctx.Process(target=_evaluate, args=(send, text), daemon=True)
    p.start()
    send.close()  # the child holds its own copy; EOF when it exits
    try:
        if recv.poll(TIME_LIMIT_S):
            try:
                return recv.recv()
            except EOFError:
                return ("error", "the checker process exited without a verdict")
        return ("timeout", f"no verdict within {TIME_LIMIT_S:g} s")
    finally:
        recv.close()
        p.join(0.5)
        if p.is_alive():
            p.terminate()
            p.join()


def score(input, output, expected=None):
    want = Fraction(expected["value"])
    text = output if isinstance(output, str) else str(output)
    verdict = evaluate_with_limit(text)
    if verdict[0] == "timeout":
        return 0.0, {"feedback": f"The answer {text!r} took too long to evaluate ({verdict[1]}); simplify it."}
    if verdict[0] == "error":
        return 0.0, {"feedback": f"The answer {text!r} could not be evaluated: {verdict[1]}."}
    got = Fraction(verdict[1], verdict[2])
    if got == want:
        return 1.0, {"feedback": f"Correct: {text} = {want}."}
    # partial credit for the right magnitude: relative error under 1%
    if want != 0 and abs(got - want) / abs(want) < Fraction(1, 100):
        return 0.5, {"feedback": f"Close: {text} = {float(got):.6g}, the exact answer is {want}."}
    return 0.0, {"feedback": f"Wrong: {text} = {float(got):.6g}, expected {want}."}
