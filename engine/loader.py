# Loads a metric file and reads its score signature (package engine).
# Runs only at load time, never on the hot path.
import _thread
import functools
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


def stem_name(path):
    """path's file stem when `import stem` would load path itself, else None."""
    path = os.path.abspath(path)
    stem = os.path.splitext(os.path.basename(path))[0]
    if not stem.isidentifier() or stem in sys.modules:
        return None
    folder = os.path.dirname(path)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    try:
        spec = importlib.util.find_spec(stem)
    except Exception:
        return None
    if spec is None or not spec.origin or os.path.abspath(spec.origin) != path:
        return None
    return stem


def unload(name):
    sys.modules.pop(name, None)


def _did_you_mean(module, name):
    """A hint naming the function the module defines under a near name."""
    import difflib  # only for a metric that lacks the function

    names = [k for k, v in module.__dict__.items() if callable(v) and not k.startswith("__")]
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    if not close:
        close = [k for k in names if k.lower() == name.lower()][:1]
    return f" (it defines `{close[0]}`: did you mean `{name}`?)" if close else ""


def _inspect(module, name, kind, returns):
    """Returns (fn, sig, problem): the callable and its signature, or why not."""
    fn = module.__dict__.get(name)
    if fn is None:
        return None, None, f"the {kind} defines no `{name}` function{_did_you_mean(module, name)}"
    if not callable(fn):
        kind_of = type(fn).__name__
        article = "an" if kind_of[:1] in "aeiou" else "a"
        return None, None, f"`{name}` is {article} {kind_of}, not a function"
    if inspect.isasyncgenfunction(fn):
        return None, None, f"`{name}` is an async generator (`async def` with `yield`); it must return {returns}"
    if inspect.iscoroutinefunction(fn) and name != "score":
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
    form = "async def " if inspect.iscoroutinefunction(fn) else ""
    found = f"found {form}score{sig}"
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
        return [3, f"{form}score{sig}: called with (input, output, expected)"]
    if len(required) < 2:
        return [0, f"{found}: {len(required)} required parameter(s); {want}"]
    if len(positional) == 2:
        return [2, f"{form}score{sig}: called with (input, output)"]
    return [3, f"{form}score{sig}: called with (input, output, expected)"]


def is_async(module):
    """Whether score is `async def` (engine/aio.py runs it)."""
    return inspect.iscoroutinefunction(module.__dict__.get("score"))


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


# Signal handlers (main-thread engines only). signal.signal works on the main
# thread alone; elsewhere it raises ValueError, which graders often swallow
# into a score of 0. The wrapper records where each watched file (a metric or
# program) first set one, so the engine can warn when it scores on several
# threads. It behaves as signal.signal otherwise: same result, same errors.
_watched = {}       # file -> how many engines watch it
_signal_uses = {}   # file (None: no watched file on the stack) -> [where, via, main thread]
_fork_uses = {}     # the same, for os.fork
_main_ident = None  # the main thread, where watch_signals is first called
_stdlib = ()        # the standard library's folders


def watch_signals(path):
    global _main_ident, _stdlib
    _watched[path] = _watched.get(path, 0) + 1
    import signal
    if getattr(signal.signal, "_skynet_watched", False):
        return
    import sysconfig
    _main_ident = _thread.get_ident()
    paths = sysconfig.get_paths()
    _stdlib = tuple({os.path.join(paths[k], "") for k in ("stdlib", "platstdlib") if k in paths})
    original = signal.signal

    @functools.wraps(original)
    def watched(*args, **kwargs):
        try:
            _note_signal(sys._getframe(1))
        except Exception:
            pass  # never at the cost of the call
        return original(*args, **kwargs)

    watched._skynet_watched = True
    signal.signal = watched

    # os.fork too (multiprocessing's fork start method calls it): a child
    # forked from a process with other threads running can deadlock.
    fork = getattr(os, "fork", None)
    if fork is not None:
        @functools.wraps(fork)
        def watched_fork():
            try:
                _note_fork(sys._getframe(1))
            except Exception:
                pass
            return fork()

        os.fork = watched_fork


def unwatch_signals(*paths):
    for path in paths:
        if path in _watched:
            _watched[path] -= 1
            if _watched[path] == 0:
                del _watched[path]
                _signal_uses.pop(path, None)
                _fork_uses.pop(path, None)


def signal_use(*paths):
    """The first signal.signal call of any of paths, else one no watched file made, or None."""
    return _first_use(_signal_uses, paths)


def _first_use(uses, paths):
    for key in [p for p in paths if p] + [None]:
        if key in uses:
            return uses[key]
    return None


def fork_use(*paths):
    """The first os.fork call of any of paths, else one no watched file made, or None."""
    return _first_use(_fork_uses, paths)


def _note_fork(caller):
    _note(_fork_uses, caller, _thread.get_ident() == _main_ident)


def _in_stdlib(path):
    if path.startswith("<"):  # frozen modules
        return True
    return path.startswith(_stdlib) and "-packages" + os.sep not in path


def _where(frame):
    path = frame.f_code.co_filename
    name = os.path.basename(path)
    if path not in _watched:
        # Relative to the sys.path entry it came from: math_verify/utils.py, not utils.py.
        roots = [os.path.join(os.path.abspath(e or "."), "") for e in sys.path if isinstance(e, str)]
        rels = [path[len(r):] for r in roots if path.startswith(r)]
        if rels:
            name = min(rels, key=len)
    return f"{name}:{frame.f_lineno}"


def _note_signal(caller):
    main = _thread.get_ident() == _main_ident
    if main and _in_stdlib(caller.f_code.co_filename):
        return  # the standard library checks the thread first (asyncio.run)
    _note(_signal_uses, caller, main)


def _note(uses, caller, main):
    """Records in uses, once per watched file, where a call from caller came from."""
    frame = caller
    while frame is not None and frame.f_code.co_filename not in _watched:
        frame = frame.f_back
    key = frame.f_code.co_filename if frame is not None else None
    if key in uses:
        return
    via = _where(caller)
    where = _where(frame) if frame is not None else via
    uses[key] = [where, via if via != where else "", main]
