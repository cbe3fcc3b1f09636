# Runs `async def score` (package engine, aio.go): one event loop on the
# thread that calls serve, up to `limit` cases in flight as tasks. Go queues
# cases and model replies and writes a byte to `efd` when there are some;
# aio_poll takes them, aio_done hands a case's result back. Each task's
# context holds its AioCase (_skynet_host.case): print() output and the
# skynet module's calls find their case through it.
import asyncio
import os
import time

import _skynet_host

_case = _skynet_host.case
_VALUE, _RAISED, _TIMEOUT, _RUN_RAISED = 0, 1, 2, 3


class AioCase:
    __slots__ = ("token", "in_run", "run_ns", "logs", "size", "cut", "limit", "timed_out")

    def __init__(self, token, limit):
        self.token = token
        self.in_run = False
        self.run_ns = -1
        self.logs = []
        self.size = 0
        self.cut = False
        self.limit = limit
        self.timed_out = False

    # write is what sys.stdout/sys.stderr (host.py) call while this case's
    # task runs: its output, cut at the logs limit on a character boundary.
    def write(self, s):
        if not isinstance(s, str):
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        b = s.encode("utf-8", "backslashreplace")
        room = self.limit - self.size
        if len(b) > room:
            self.cut = True
            b = b[: max(room, 0)].decode("utf-8", "ignore").encode("utf-8")
        if b:
            self.logs.append(b)
            self.size += len(b)


def _own_frames_off(exc):
    """The traceback from the metric's frame on, as a plain call gives it."""
    tb = exc.__traceback__
    if tb is not None and tb.tb_frame.f_code in _OWN_CODES:
        exc.__traceback__ = tb.tb_next
    return exc


def serve(score, run, efd, limit, timeout, run_timeout, logs_limit):
    import skynet

    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    calls = {}  # model call id -> its future
    tasks = set()
    state = {"call": 0, "running": 0, "pulling": False}
    stop = loop.create_future()

    def new_call():
        state["call"] += 1
        fut = loop.create_future()
        calls[state["call"]] = fut
        return state["call"], fut

    def pull():
        state["pulling"] = False
        while True:
            room = limit - state["running"]
            replies, cases, stopping = _skynet_host.aio_poll(room)
            for cid, ok, text, no_model in replies:
                fut = calls.pop(cid, None)
                if fut is None or fut.done():
                    continue
                if ok:
                    fut.set_result(text)
                else:
                    fut.set_exception((RuntimeError if no_model else skynet.LLMError)(text))
            for token, args in cases:
                state["running"] += 1
                t = loop.create_task(one(token, args))
                tasks.add(t)
                t.add_done_callback(tasks.discard)
            if stopping and not stop.done():
                stop.set_result(None)
            if not replies and len(cases) < room or room <= 0 or stopping:
                return

    def on_ready():
        try:
            os.read(efd, 4096)
        except BlockingIOError:
            pass
        pull()

    def expire(case, task):
        case.timed_out = True
        task.cancel()

    async def one(token, args):
        case = AioCase(token, logs_limit)
        _case.set(case)
        task = asyncio.current_task()
        start = time.monotonic_ns()
        status, value, output, run_ns = _VALUE, None, None, -1
        try:
            if run is not None:
                # run(artifact, input) is a plain function: it runs as
                # python3 would call it, holding the loop until it returns.
                case.in_run = True
                try:
                    output = run(args[0], args[1])
                except BaseException as exc:
                    status, value = _RUN_RAISED, _own_frames_off(exc)
                finally:
                    case.in_run = False
                    case.run_ns = run_ns = time.monotonic_ns() - start
                args = (args[1], output) + tuple(args[2:])
            if status == _VALUE:
                timer = loop.call_later(timeout, expire, case, task)
                try:
                    value = await score(*args)
                except asyncio.CancelledError as exc:
                    if case.timed_out:
                        status = _TIMEOUT
                    elif stop.done():
                        return  # the engine is closing: Go has answered the case
                    else:
                        status, value = _RAISED, _own_frames_off(exc)
                except BaseException as exc:
                    status, value = _RAISED, _own_frames_off(exc)
                finally:
                    timer.cancel()
        finally:
            state["running"] -= 1
            if not state["pulling"] and not stop.done():
                state["pulling"] = True
                loop.call_soon(pull)
        elapsed = time.monotonic_ns() - start
        _skynet_host.aio_done(token, status, value, output, elapsed, run_ns, b"".join(case.logs), case.cut)

    _OWN_CODES.add(one.__code__)
    _skynet_host.aio_hook(new_call)
    loop.add_reader(efd, on_ready)
    try:
        loop.call_soon(pull)
        loop.run_until_complete(stop)
        for t in list(tasks):
            t.cancel()
        if tasks:
            loop.run_until_complete(asyncio.wait(list(tasks), timeout=2))
    finally:
        loop.remove_reader(efd)
        _skynet_host.aio_hook(None)
        asyncio.set_event_loop(None)
        loop.close()


_OWN_CODES = set()
