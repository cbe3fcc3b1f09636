# Run once when the interpreter starts (package cpython). It routes sys.stdout
# and sys.stderr through _skynet_host.capture so that output written during a
# call lands in that call's logs; anything written outside a call (imports,
# threads a metric started) goes to the process's stderr, never to stdout,
# which may carry a result stream.
import io
import sys

import _skynet_host

_case = _skynet_host.case


class _CapturedStream(io.TextIOBase):
    def __init__(self, name, fallback):
        self._name = name
        self._fallback = fallback

    @property
    def name(self):
        return self._name

    @property
    def encoding(self):
        return "utf-8"

    @property
    def errors(self):
        return "backslashreplace"

    def writable(self):
        return True

    def isatty(self):
        return False

    def fileno(self):
        # The process's stderr, for code that needs a real descriptor
        # (faulthandler.enable(), a subprocess given sys.stdout): what is
        # written through it bypasses the capture, as python3's would bypass
        # its buffer, and never reaches stdout, which may carry results.
        if self._fallback is None:
            raise io.UnsupportedOperation("fileno: the process has no stderr")
        return self._fallback.fileno()

    def write(self, s):
        case = _case.get(None)  # an `async def score` task's case (engine/aio.py)
        if case is not None:
            case.write(s)
            return len(s)
        if not _skynet_host.capture(s) and self._fallback is not None:
            self._fallback.write(s)
            self._fallback.flush()
        return len(s)

    def flush(self):
        pass


_stderr = sys.__stderr__
sys.stdout = _CapturedStream("<stdout>", _stderr)
sys.stderr = _CapturedStream("<stderr>", _stderr)
