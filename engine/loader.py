# Loads a metric file and reads its score signature (package engine).
# Runs only at load time, never on the hot path.
import importlib.util
import inspect
import os
import sys


def load(path, name):
    path = os.path.abspath(path)
    folder = os.path.dirname(path)
    # Modules beside metric.py are importable from it, as when run as a script.
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def unload(name):
    sys.modules.pop(name, None)


def _inspect(module, name, kind, returns):
    """Returns (fn, sig, problem): the callable and its signature, or why not."""
    fn = module.__dict__.get(name)
    if fn is None:
        return None, None, f"the {kind} defines no `{name}` function"
    if not callable(fn):
        kind_of = type(fn).__name__
        article = "an" if kind_of[:1] in "aeiou" else "a"
        return None, None, f"`{name}` is {article} {kind_of}, not a function"
    if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):
        return None, None, f"`{name}` is `async def`; it must be a plain `def` (Skynet calls it directly)"
    if inspect.isgeneratorfunction(fn):
        return None, None, f"`{name}` is a generator function (it uses `yield`); it must return {returns}"
    try:
        return fn, inspect.signature(fn), None
    except (TypeError, ValueError) as exc:
        return None, None, f"cannot read the signature of `{name}`: {exc}"


def _shape(sig):
    """Returns (positional, required, var_positional, required keyword-only names)."""
    params = list(sig.parameters.values())
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    var_positional = any(p.kind == p.VAR_POSITIONAL for p in params)
    kw_required = [p.name for p in params if p.kind == p.KEYWORD_ONLY and p.default is p.empty]
    return positional, required, var_positional, kw_required


def arity(module):
    """Returns [nargs, description]; nargs 0 means the signature is unusable
    and the description says what was found."""
    fn, sig, problem = _inspect(module, "score", "metric", "(score, side info)")
    if problem:
        return [0, problem]
    positional, required, var_positional, kw_required = _shape(sig)
    found = f"found score{sig}"
    want = "score must take (input, output) or (input, output, expected=None)"
    if kw_required:
        return [0, f"{found}: keyword-only parameter(s) {', '.join(kw_required)} have no default; {want}"]
    kw_expected = sig.parameters.get("expected")
    if kw_expected is not None and kw_expected.kind == kw_expected.KEYWORD_ONLY and not var_positional and len(positional) == 2:
        # Skynet passes expected by position: a keyword-only one would always be its default.
        return [0, f"{found}: `expected` is keyword-only, so it would never be passed; "
                   "make it the third positional parameter: def score(input, output, expected=None)"]
    if len(required) > 3:
        return [0, f"{found}: {len(required)} required parameters; {want}"]
    if var_positional:
        return [3, f"score{sig}: called with (input, output, expected)"]
    if len(required) < 2:
        return [0, f"{found}: {len(required)} required parameter(s); {want}"]
    if len(positional) == 2:
        return [2, f"score{sig}: called with (input, output)"]
    return [3, f"score{sig}: called with (input, output, expected)"]


def get(module, name):
    return module.__dict__.get(name)


def has(module, name):
    return name in module.__dict__


def run_arity(module):
    """Checks run(artifact, input): returns [2, description] or [0, problem]."""
    fn, sig, problem = _inspect(module, "run", "program", "its output")
    if problem:
        return [0, problem]
    positional, required, var_positional, kw_required = _shape(sig)
    if kw_required or len(required) > 2 or (len(positional) < 2 and not var_positional):
        return [0, f"found run{sig}: run must take (artifact, input)"]
    return [2, f"run{sig}: called with (artifact, input)"]
