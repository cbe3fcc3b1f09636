"""Client for ``skynet serve``: score cases over HTTP, from Python 3.9+, stdlib only.

Install it (``pip install ./clients/python``, or from the repository URL with
``#subdirectory=clients/python``), or copy this one file next to your code as
``skynet_client.py``: it imports nothing outside the standard library.

    from skynet_client import Client
    c = Client("http://127.0.0.1:8765")          # token=..., or env SKYNET_TOKEN / SKYNET_SERVE_TOKEN
    c.wait_ready(30)
    results = c.score([{"input": {"q": "2+2"}, "output": "4", "expected": {"label": "4"}}])
    results[0]["score"], results[0]["feedback"]

``Client`` (threads) and ``AsyncClient`` (asyncio) speak the server's API:
``POST /v1/score`` (JSON, or NDJSON streamed), ``POST /v1/rewards`` (OpenRLHF's
remote reward shape), ``GET /healthz``, ``GET /metrics``. Adapters plug a
server into the peers' own calls: DSPy (:func:`dspy_metric`), GEPA's
``optimize_anything`` (:func:`gepa_evaluator`, :func:`gepa_batch_evaluator`),
verl (:func:`verl_compute_score`) and TRL (:func:`trl_reward_func`); OpenRLHF
needs no adapter, only the URL of ``/v1/rewards``. See README.md in
clients/python.
"""

from __future__ import annotations

import asyncio
import email.utils
import http.client
import json
import math
import os
import socket
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from typing import Any, AsyncIterator, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

__all__ = [
    "Client",
    "AsyncClient",
    "SkynetError",
    "ScoreWithFeedback",
    "dspy_metric",
    "gepa_evaluator",
    "gepa_batch_evaluator",
    "verl_compute_score",
    "trl_reward_func",
]

__version__ = "0.2.0"

DEFAULT_CHUNK = 500  # cases per request
DEFAULT_RETRIES = 5  # 429/503 answers retried per request
MAX_WAIT = 30.0  # longest Retry-After honoured, seconds
_CASE_KEYS = ("id", "input", "output", "expected", "observation")

Case = Dict[str, Any]
"""A case: a case-file line as a dict (``input``, ``output``, optional ``id``, ``expected``, ``observation``)."""
Result = Dict[str, Any]
"""A result: the results-file line of a case (``id``, ``score``, ``feedback``, ``scores``, ``error``, ``ms``...)."""


class SkynetError(Exception):
    """The server answered with an error status, or could not be reached.

    ``status`` is the HTTP status (``None`` when no answer came), ``message``
    the server's own message (from its JSON ``error``/``message``, else the
    body's text), ``body`` the raw reply text, ``retry_after`` seconds from a
    ``Retry-After`` header (429/503) or ``None``, ``url`` the request's URL.
    """

    def __init__(self, message: str, status: Optional[int] = None, body: str = "", url: str = "", retry_after: Optional[float] = None) -> None:
        self.status = status
        self.message = message
        self.body = body
        self.url = url
        self.retry_after = retry_after
        where = f" ({url})" if url else ""
        head = f"HTTP {status}: " if status is not None else ""
        super().__init__(f"skynet: {head}{message}{where}")


class _ScoreNumber:
    """Number behaviour from a ``score`` field, as ``dspy.Prediction`` has it
    (float(), +, /, comparisons), plus truth: a score of 0 is false, so
    ``if metric(gold, pred, trace):`` (DSPy's bootstrapping without a
    threshold) keeps only the demos that scored."""

    def _score(self) -> float:
        return float(self["score"])

    def __float__(self) -> float:
        return self._score()

    def __bool__(self) -> bool:
        return bool(self._score())

    def __add__(self, other):
        return self._score() + float(other)

    def __radd__(self, other):
        return float(other) + self._score()

    def __truediv__(self, other):
        return self._score() / float(other)

    def __rtruediv__(self, other):
        return float(other) / self._score()

    def __lt__(self, other):
        return self._score() < float(other)

    def __le__(self, other):
        return self._score() <= float(other)

    def __gt__(self, other):
        return self._score() > float(other)

    def __ge__(self, other):
        return self._score() >= float(other)


class ScoreWithFeedback(_ScoreNumber, dict):
    """What :func:`dspy_metric` returns where DSPy is not importable: a dict
    with ``score``, ``feedback`` and, when the metric gave named scores,
    ``objective_scores``; readable as ``o.score`` or ``o["score"]``, and
    usable as a number (``float(o)``, ``sum``, comparisons, truth). With DSPy
    importable a ``dspy.Prediction`` with the same fields and behaviour is
    returned instead."""

    def __getattr__(self, key: str) -> Any:
        try:
            return self[key]
        except KeyError:
            raise AttributeError(key) from None


_DSPY_PREDICTION = None  # the dspy.Prediction subclass, made once DSPy is imported


def _dspy_prediction_class():
    """DSPyScore: dspy.Prediction with the truth of its score (see
    _ScoreNumber), made on first use so that DSPy is imported only when a
    DSPy caller runs. It is this module's DSPyScore (module __getattr__), so
    it pickles."""
    global _DSPY_PREDICTION
    if _DSPY_PREDICTION is None:
        import dspy

        class DSPyScore(dspy.Prediction):
            __doc__ = "dspy.Prediction(score=..., feedback=..., objective_scores=...) that is as true as its score."

            def __bool__(self) -> bool:
                return bool(float(self))

        DSPyScore.__module__, DSPyScore.__qualname__ = __name__, "DSPyScore"
        _DSPY_PREDICTION = DSPyScore
    return _DSPY_PREDICTION


def __getattr__(name: str) -> Any:
    if name == "DSPyScore":
        return _dspy_prediction_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ---------------------------------------------------------------- helpers


def _base_url(url):
    """Normalises a server URL: scheme, host and port (and any path prefix
    before /v1/...). Accepts "host:port" and URLs ending in /v1/score,
    /v1/rewards, /healthz."""
    if not isinstance(url, str) or not url:
        raise ValueError(f"skynet: a server URL is required, got {url!r}")
    if "://" not in url:
        url = "http://" + url
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"skynet: not an http(s) URL: {url!r}")
    path = parts.path.rstrip("/")
    for tail in ("/v1/score", "/v1/rewards", "/healthz", "/metrics"):
        if path.endswith(tail):
            path = path[: -len(tail)]
            break
    return parts.scheme, parts.hostname, parts.port, path


def _jsonable(value: Any) -> Any:
    """json.dumps' default: DSPy/pydantic objects become dicts, numpy arrays
    and scalars lists and numbers, sets lists, bytes text; anything else its
    str()."""
    for name in ("toDict", "model_dump", "to_dict", "tolist"):
        fn = getattr(value, name, None)
        if callable(fn):
            try:
                return fn()
            except TypeError:
                pass
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if isinstance(value, (bytes, bytearray)):
        return value.decode("utf-8", "replace")
    return str(value)


def _dumps(value, what="request"):
    try:
        return json.dumps(value, default=_jsonable, allow_nan=False, ensure_ascii=False)
    except ValueError as e:  # NaN/inf: not JSON, the server would refuse the whole request
        raise ValueError(f"skynet: {what} holds a value JSON cannot carry ({e}); replace NaN/inf first") from None


def _prepare(cases):
    """Copies cases into plain dicts with string ids. A case without "id"
    gets its 1-based position in the list ("1", "2", ...), as `skynet score`
    numbers lines; an id given twice, or a default that collides with a
    given id, is a ValueError (the server refuses repeated ids)."""
    if isinstance(cases, dict):
        raise TypeError("skynet: score() takes a list of cases; wrap a single case in [ ]")
    out = []
    for i, case in enumerate(cases):
        if not isinstance(case, dict):
            raise TypeError(f"skynet: case {i + 1} must be a dict, got {type(case).__name__}")
        extra = [k for k in case if k not in _CASE_KEYS]
        if extra:
            raise ValueError(f"skynet: case {i + 1}: unknown field {extra[0]!r} (a case has {', '.join(_CASE_KEYS)})")
        c = dict(case)
        if c.get("id") is None:
            c["id"] = str(i + 1)
            c["_default_id"] = True
        else:
            c["id"] = str(c["id"])
        out.append(c)
    seen = {}
    for i, c in enumerate(out):
        prev = seen.get(c["id"])
        if prev is not None:
            why = " (its default id, the 1-based position)" if c.get("_default_id") or out[prev].get("_default_id") else ""
            raise ValueError(f"skynet: cases {prev + 1} and {i + 1} have the same id {c['id']!r}{why}")
        seen[c["id"]] = i
    for c in out:
        c.pop("_default_id", None)
    return out


class _Chunks:
    """Chunks of items, size at a time, each for one request. A request
    refused with 413 (over the server's --max-body or --max-inflight) is
    reported with refused(): its chunk comes again halved, down to one case,
    and the rest follow at the size that passed.

        chunks = _Chunks(items, size)
        for chunk in chunks:
            try:
                send(chunk)
            except SkynetError as e:
                chunks.refused(e, chunk)
    """

    def __init__(self, items, size):
        if size is None or size < 1:
            raise ValueError(f"skynet: chunk_size must be >= 1, got {size!r}")
        self.items, self.size, self.i, self.again = items, size, 0, False

    def __iter__(self):
        while self.i < len(self.items):
            chunk = self.items[self.i : self.i + self.size]
            self.again = False
            yield chunk
            if not self.again:
                self.i += len(chunk)

    def refused(self, err, chunk):
        """Halves the size after a 413 so that chunk is sent again smaller;
        raises err when it is no 413 or chunk is one case."""
        if err.status != 413 or len(chunk) <= 1:
            raise err
        self.size, self.again = max(1, len(chunk) // 2), True


def _float_scores(result):
    """A result with its score and named scores as floats: the server's JSON
    writes a whole score as 1, which Python reads as an int, and an int
    reward breaks torch code (an int64 tensor has no std())."""
    if isinstance(result, dict):
        v = result.get("score")
        if isinstance(v, int) and not isinstance(v, bool):
            result["score"] = float(v)
        named = result.get("scores")
        if isinstance(named, dict):
            for k, v in named.items():
                if isinstance(v, int) and not isinstance(v, bool):
                    named[k] = float(v)
    return result


def _retry_after(value):
    """Seconds from a Retry-After header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
        return max(0.0, when.timestamp() - time.time())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def _server_message(body, status):
    text = body.strip()
    try:
        doc = json.loads(text)
    except ValueError:
        doc = None
    if isinstance(doc, dict):
        err = doc.get("error", doc.get("message"))
        if isinstance(err, dict):
            err = err.get("message") or err.get("kind")
        if isinstance(err, str) and err:
            return err
    if text:
        return text[:2000]
    return http.client.responses.get(status, "error")


def _check_results(results, chunk, url):
    if not isinstance(results, list) or len(results) != len(chunk):
        n = len(results) if isinstance(results, list) else type(results).__name__
        raise SkynetError(f"the server returned {n} result(s) for {len(chunk)} case(s)", url=url)
    for case, res in zip(chunk, results):
        if not isinstance(res, dict):
            raise SkynetError(f"a result is not an object: {res!r}", url=url)
        if "id" in res and str(res["id"]) != case["id"]:
            raise SkynetError(f"results out of order: case {case['id']!r} got result {res['id']!r}", url=url)


# ---------------------------------------------------------------- sync client


class _Server:
    """One ``skynet serve`` of a Client: its address, each thread's
    keep-alive connection to it, and what the client has in flight there."""

    def __init__(self, url):
        self.scheme, self.host, self.port, self.prefix = _base_url(url)
        self.url = f"{self.scheme}://{self.host}{':' + str(self.port) if self.port else ''}{self.prefix}"
        self.local = threading.local()
        self.conns = []
        self.lock = threading.Lock()
        self.outstanding = 0  # requests in flight (under Client._pick_lock)
        self.down_until = 0.0  # time.monotonic() before which it is tried last

    def __repr__(self):
        return self.url


def _server_urls(url):
    """The URLs a Client was given: one, a comma-separated list (OpenRLHF's
    form), or a list."""
    if isinstance(url, str):
        urls = [u.strip() for u in url.split(",")] if "," in url else [url]
    elif isinstance(url, (list, tuple)):
        urls = [u.strip() if isinstance(u, str) else u for u in url]
    else:
        raise ValueError(f"skynet: a server URL is required, got {url!r}")
    if not urls or any(not u for u in urls):
        raise ValueError(f"skynet: an empty server URL in {url!r}")
    return urls


# A server that refused a connection, reset it or cut a reply short is
# tried after the others for this long.
_DOWN_FOR = 5.0


class _Lost(SkynetError):
    """The request may not have reached the server, or its reply was lost
    (refused, reset, cut short): with several servers, it goes to another."""


class Client:
    """A client of one ``skynet serve``, or of several. Thread-safe: each
    thread keeps its own keep-alive connection to each server.

    ``url``: ``http://host:port`` (``host:port`` and URLs ending in
    ``/v1/score`` or ``/v1/rewards`` also do); several servers as a list or a
    comma-separated string (OpenRLHF's form). With several, each request goes
    to the server with the fewest of this client's requests in flight;
    ``score`` sends its chunks to all of them at once; a request whose server
    refuses the connection, resets it, cuts the reply short or answers
    429/503 goes to another, so no case is lost, and each result comes from
    one reply only. ``token``: sent as ``Authorization: Bearer``; ``None``
    reads env ``SKYNET_TOKEN``, else ``SKYNET_SERVE_TOKEN`` (the server's own
    variable). ``timeout``: seconds a socket operation may wait (connecting,
    or the gap between bytes of a reply); ``None`` waits as long as scoring
    takes. ``chunk_size``: cases per request (a 413 halves it for that
    request). ``retries``: how many times a request answered 429/503 by
    every server is retried, each after the server's ``Retry-After`` (capped
    at ``max_wait`` seconds; 1 s when absent).
    """

    def __init__(
        self,
        url: Union[str, Sequence[str]],
        token: Optional[str] = None,
        timeout: Optional[float] = None,
        *,
        chunk_size: int = DEFAULT_CHUNK,
        retries: int = DEFAULT_RETRIES,
        max_wait: float = MAX_WAIT,
    ) -> None:
        self._servers = [_Server(u) for u in _server_urls(url)]
        first = self._servers[0]
        self.scheme, self.host, self.port, self.prefix = first.scheme, first.host, first.port, first.prefix
        self.urls = [s.url for s in self._servers]
        self.url = ",".join(self.urls)
        if token is None:  # the client's variable, else the one skynet serve reads
            token = os.environ.get("SKYNET_TOKEN") or os.environ.get("SKYNET_SERVE_TOKEN") or None
        self.token = token
        self.timeout = timeout
        self.chunk_size = chunk_size
        self.retries = retries
        self.max_wait = max_wait
        self._pick_lock = threading.Lock()
        self._turn = 0

    def __repr__(self):
        return f"Client({self.url!r})"

    # -- servers and connections

    def _pick(self, tried):
        """The server for the next request: of those not in tried, the one
        not down with the fewest requests in flight (in turn among equals);
        None when every server was tried. Counts the request as in flight."""
        with self._pick_lock:
            now = time.monotonic()
            n = len(self._servers)
            best = None
            for k in range(n):
                s = self._servers[(self._turn + k) % n]
                if s in tried:
                    continue
                key = (s.down_until > now, s.outstanding)
                if best is None or key < best[0]:
                    best = (key, s)
            if best is None:
                return None
            self._turn += 1
            best[1].outstanding += 1
            return best[1]

    def _done(self, server, lost=False):
        with self._pick_lock:
            server.outstanding -= 1
            if lost:
                server.down_until = time.monotonic() + _DOWN_FOR

    def _conn(self, server):
        conn = getattr(server.local, "conn", None)
        if conn is None:
            cls = http.client.HTTPSConnection if server.scheme == "https" else http.client.HTTPConnection
            conn = cls(server.host, server.port, timeout=self.timeout)
            server.local.conn = conn
            with server.lock:
                server.conns.append(conn)
        return conn

    def _drop(self, server, conn=None):
        """Closes conn (default: this thread's connection to server) and forgets it."""
        if conn is None or getattr(server.local, "conn", None) is conn:
            conn = getattr(server.local, "conn", None)
            server.local.conn = None
        if conn is not None:
            conn.close()
            with server.lock:
                if conn in server.conns:
                    server.conns.remove(conn)

    def close(self) -> None:
        """Closes every connection this client opened (any thread's)."""
        for server in self._servers:
            with server.lock:
                conns, server.conns = server.conns, []
            for conn in conns:
                conn.close()
            server.local = threading.local()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _headers(self, content_type=None, accept="application/json"):
        h = {"Accept": accept, "User-Agent": f"skynet-client-python/{__version__}"}
        if content_type:
            h["Content-Type"] = content_type
        if self.token:
            h["Authorization"] = f"Bearer {self.token}"
        return h

    def _open(self, server, method, path, body=None, headers=None):
        """Sends one request to server and returns the live response
        (headers read). A kept-alive connection the server has closed
        meanwhile is reopened once; a refused or lost connection is _Lost."""
        url = server.url + path
        data = body.encode("utf-8") if isinstance(body, str) else body
        unread = getattr(server.local, "streaming", None)
        if unread is not None:
            server.local.streaming = None
            if not unread.isclosed():  # an iter_score left unfinished: give its connection up
                self._drop(server, unread.skynet_conn)
        for attempt in (0, 1):
            conn = self._conn(server)
            reused = conn.sock is not None
            try:
                try:
                    conn.request(method, server.prefix + path, body=data, headers=headers or self._headers())
                except (BrokenPipeError, ConnectionResetError):
                    # The server answered before reading the whole body (a
                    # 413 past --max-body) and closed: its reply is still
                    # there to read, and it is what the caller needs.
                    resp = self._early_reply(conn)
                    if resp is None:
                        raise
                else:
                    resp = conn.getresponse()
                resp.skynet_conn = conn
                return resp
            except http.client.ImproperConnectionState:
                # this thread left a reply unread (an iter_score not run to
                # its end): that connection is given up, a new one opened
                self._drop(server)
                if attempt == 0:
                    continue
                raise
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, http.client.BadStatusLine) as e:
                self._drop(server)
                if reused and attempt == 0:
                    continue
                raise _Lost(f"connection lost: {e}", url=url) from e
            except socket.timeout as e:
                self._drop(server)
                raise SkynetError(f"no answer within {self.timeout}s", url=url) from e
            except OSError as e:
                self._drop(server)
                raise _Lost(f"cannot reach the server: {e}", url=url) from e
            except BaseException:
                self._drop(server)
                raise
        raise AssertionError("unreachable")

    @staticmethod
    def _early_reply(conn):
        """The reply a server sent before it stopped reading our request, or
        None when there is none to read."""
        if conn.sock is None:  # the connection itself failed (a server killed mid-request): nothing to read
            return None
        try:
            resp = conn.getresponse()
        except (OSError, http.client.HTTPException):
            return None
        resp.will_close = True  # the server closes this connection
        return resp

    def _read(self, server, resp, url):
        try:
            body = resp.read()
        except (OSError, http.client.HTTPException) as e:
            self._drop(server, resp.skynet_conn)
            raise _Lost(f"reply cut short: {e}", status=resp.status, url=url) from e
        if resp.will_close:
            self._drop(server, resp.skynet_conn)
        return body.decode("utf-8", "replace")

    def _error(self, server, status, headers, text, path):
        return SkynetError(
            _server_message(text, status), status=status, body=text, url=server.url + path, retry_after=_retry_after(headers.get("Retry-After"))
        )

    def _wait(self, err):
        """Seconds to wait before retrying err, or None when it is final."""
        if err.status not in (429, 503):
            return None
        wait = err.retry_after if err.retry_after is not None else 1.0
        return min(wait, self.max_wait)

    def _request(self, method, path, body=None, headers=None, retries=None, read=True):
        """One request with the failover and retry policy: it goes to a
        server (see _pick); refused, lost or answered 429/503 there, to the
        next; once every server was tried, a 429/503 is retried after its
        Retry-After (retries times) and a lost connection raised. Returns
        (server, status, headers, text) of the first other answer, with the
        text read when read is set; else (server, response) of a 200, the
        reply unread."""
        retries = self.retries if retries is None else retries
        for attempt in range(retries + 1):
            tried, busy, lost = set(), None, None
            while True:
                server = self._pick(tried)
                if server is None:
                    break
                tried.add(server)
                gone = False
                try:
                    resp = self._open(server, method, path, body, headers)
                    if not read and resp.status == 200:
                        return server, resp
                    text = self._read(server, resp, server.url + path)
                except _Lost as e:
                    lost, gone = e, True
                    continue
                finally:
                    self._done(server, lost=gone)
                if resp.status in (429, 503):
                    busy = self._error(server, resp.status, resp.headers, text, path)
                    continue
                if read:
                    return server, resp.status, resp.headers, text
                raise self._error(server, resp.status, resp.headers, text, path)
            if busy is None:  # every server lost the request
                raise lost
            wait = self._wait(busy)
            if attempt == retries:
                raise busy
            time.sleep(wait)
        raise AssertionError("unreachable")

    def _call(self, method, path, body=None, headers=None, ok=(200,)):
        """A request with the failover and retry policy; returns (server, reply text)."""
        server, status, hdrs, text = self._request(method, path, body, headers)
        if status not in ok:
            raise self._error(server, status, hdrs, text, path)
        return server, text

    def _json(self, server, text, path):
        try:
            return json.loads(text)
        except ValueError as e:
            raise SkynetError(f"the reply is not JSON ({e}): {text[:200]!r}", url=server.url + path) from None

    # -- API

    def score(self, cases: Iterable[Case], *, chunk_size: Optional[int] = None) -> List[Result]:
        """Scores cases (dicts with "input", "output", optional "id",
        "expected", "observation") and returns one result dict per case, in
        order: {"id", "score", "feedback", "scores", "error", "ms", ...},
        "score" and the named "scores" as floats. A case whose metric failed
        is a result with "error" set, not an exception; SkynetError is for
        the request itself (4xx/5xx, no server). Sent as JSON, chunk_size
        cases a request; a 413 halves the chunk until the server takes it,
        and the rest of the call goes at that size. With several servers,
        two chunks a server are in flight at once."""
        prepared = _prepare(cases)
        size = chunk_size or self.chunk_size
        chunks = _Chunks(prepared, size)
        if len(self._servers) > 1 and len(prepared) > size:
            return self._score_spread(chunks)
        out: List[Result] = []
        for chunk in chunks:
            try:
                out.extend(self._score_chunk(chunk))
            except SkynetError as e:
                chunks.refused(e, chunk)
        return out

    def _score_spread(self, chunks):
        """score's chunks on several servers at once, results in order."""
        parts = [chunk for chunk in chunks]  # checks the size
        with ThreadPoolExecutor(max_workers=min(len(parts), 2 * len(self._servers)), thread_name_prefix="skynet-spread") as ex:
            done = list(ex.map(self._score_fitting, parts))
        return [r for part in done for r in part]

    def _score_fitting(self, chunk):
        """chunk's results; a 413 splits it in halves, down to one case."""
        try:
            return self._score_chunk(chunk)
        except SkynetError as e:
            if e.status != 413 or len(chunk) <= 1:
                raise
            half = len(chunk) // 2
            return self._score_fitting(chunk[:half]) + self._score_fitting(chunk[half:])

    def _score_chunk(self, chunk):
        path = "/v1/score"
        server, text = self._call("POST", path, _dumps({"cases": chunk}, "a case"), self._headers("application/json"))
        doc = self._json(server, text, path)
        results = doc.get("results") if isinstance(doc, dict) else None
        _check_results(results, chunk, server.url + path)
        for res in results:
            _float_scores(res)
        return results

    def iter_score(self, cases: Iterable[Case], *, chunk_size: Optional[int] = None) -> Iterator[Result]:
        """Like score(), but sends NDJSON and yields each result as its line
        arrives (the server streams them in case order). With several
        servers, a stream cut short goes on from its next case on another."""
        prepared = _prepare(cases)
        yield from self._stream(prepared, chunk_size or self.chunk_size)

    def _stream(self, prepared, size, retries=None):
        chunks = _Chunks(prepared, size)
        for chunk in chunks:
            rest = chunk
            while rest:
                try:
                    server, resp = self._stream_open(rest, retries)
                except SkynetError as e:
                    chunks.refused(e, chunk)
                    break
                n = 0
                try:
                    for res in self._stream_read(server, resp, rest):
                        n += 1
                        yield res
                    rest = []
                except _Lost:
                    if len(self._servers) == 1:
                        raise
                    with self._pick_lock:
                        server.down_until = time.monotonic() + _DOWN_FOR
                    rest = rest[n:]  # the cases not answered, to another server

    def _stream_open(self, chunk, retries=None):
        """Sends chunk as NDJSON and returns (server, reply) once it is a
        200, with the failover and retry policy; a 413 is raised for _Chunks
        to halve."""
        body = "".join(_dumps(c, "a case") + "\n" for c in chunk)
        headers = self._headers("application/x-ndjson", accept="application/x-ndjson")
        return self._request("POST", "/v1/score", body, headers, retries=retries, read=False)

    def _stream_read(self, server, resp, chunk):
        """The results of chunk as their lines stream in."""
        url = server.url + "/v1/score"
        n = 0
        conn = resp.skynet_conn
        server.local.streaming = resp
        try:
            while True:
                try:
                    line = resp.readline()
                except (OSError, http.client.HTTPException) as e:
                    self._drop(server, conn)
                    raise _Lost(f"stream cut after {n} of {len(chunk)} result(s): {e}", status=200, url=url) from e
                if not line:
                    break
                line = line.strip()
                if not line:
                    continue
                try:
                    res = json.loads(line)
                except ValueError:
                    raise SkynetError(f"a streamed line is not JSON: {line[:200]!r}", status=200, url=url) from None
                if n >= len(chunk):
                    raise SkynetError(f"the server streamed more than {len(chunk)} result(s)", status=200, url=url)
                _check_results([res], chunk[n : n + 1], url)
                n += 1
                yield _float_scores(res)
        except BaseException:
            self._drop(server, conn)  # the reply was not read to its end
            raise
        if resp.will_close:
            self._drop(server, conn)
        if n != len(chunk):
            raise _Lost(f"the stream ended after {n} of {len(chunk)} result(s)", status=200, url=url)

    def rewards(self, queries: Iterable[str], prompts: Optional[Iterable[str]] = None, labels: Optional[Iterable[Any]] = None) -> Dict[str, Any]:
        """OpenRLHF's remote reward call: POST /v1/rewards with
        {"query", "prompts", "labels"} (prompts or labels left out when None:
        the server then scores each query whole, without expected), returning the server's reply dict ({"rewards", "scores",
        "extra_logs", ...})."""
        queries = list(queries)
        body = {"query": queries}
        for name, values in (("prompts", prompts), ("labels", labels)):
            if values is None:
                continue
            values = list(values)
            if len(values) != len(queries):
                raise ValueError(f"skynet: {len(values)} {name} for {len(queries)} queries")
            body[name] = values
        path = "/v1/rewards"
        server, text = self._call("POST", path, _dumps(body), self._headers("application/json"))
        doc = self._json(server, text, path)
        if not isinstance(doc, dict) or not isinstance(doc.get("rewards"), list) or len(doc["rewards"]) != len(queries):
            raise SkynetError(f"the reply has no {len(queries)} rewards: {str(doc)[:200]}", url=server.url + path)
        return doc

    def _health(self, server):
        try:
            resp = self._open(server, "GET", "/healthz", headers=self._headers(accept="*/*"))
            return resp.status, self._read(server, resp, server.url + "/healthz")
        except SkynetError as e:
            return None, str(e)

    def health(self) -> Tuple[Optional[int], str]:
        """GET /healthz: (status, text); status None when unreachable. With
        several servers, (200, text) when every one answers 200, else the
        first other answer, its text starting with the server's URL."""
        if len(self._servers) == 1:
            return self._health(self._servers[0])
        answers = [(s, self._health(s)) for s in self._servers]
        for s, (status, text) in answers:
            if status != 200:
                return status, f"{s.url}: {text}"
        return 200, answers[0][1][1]

    def healthy(self) -> bool:
        """True when /healthz answers 200 (loaded, not draining), on every server."""
        return self.health()[0] == 200

    def wait_ready(self, timeout: float = 60.0, interval: float = 0.1) -> bool:
        """Polls /healthz until it answers 200 (on every server), through
        503 "loading" (the metric still importing) and a refused connection
        (the server still starting); SkynetError after timeout seconds,
        naming the last answer."""
        deadline = time.monotonic() + timeout
        while True:
            status, text = self.health()
            if status == 200:
                return True
            if time.monotonic() >= deadline:
                raise SkynetError(f"not ready after {timeout}s: last /healthz: {status if status is not None else ''} {text.strip()[:200]}".replace("  ", " "), status=status, url=self.url + "/healthz")
            time.sleep(min(interval, max(0.0, deadline - time.monotonic())))

    def metrics(self) -> str:
        """GET /metrics: the Prometheus text (with several servers, each
        server's after a comment line naming it)."""
        headers = self._headers(accept="text/plain")
        if len(self._servers) == 1:
            return self._call("GET", "/metrics", headers=headers)[1]
        parts = []
        for s in self._servers:
            resp = self._open(s, "GET", "/metrics", headers=headers)
            text = self._read(s, resp, s.url + "/metrics")
            if resp.status != 200:
                raise self._error(s, resp.status, resp.headers, text, "/metrics")
            parts.append(f"# skynet server {s.url}\n{text}")
        return "".join(parts)


# ---------------------------------------------------------------- async client


class AsyncClient:
    """The asyncio twin of Client: ``await c.score(cases)`` etc.

    It runs the sync Client's requests in a thread pool (``run_in_executor``)
    rather than speaking HTTP over ``asyncio.open_connection``: one HTTP
    implementation (http.client's keep-alive, chunked NDJSON streaming, TLS)
    serves both clients, and a scoring request is a batch whose time is spent
    in the server, so a few threads carry many cases. Retry waits (429/503)
    are ``asyncio.sleep``, so they hold no thread. The cost: at most
    ``max_workers`` requests are in flight at once, and cancelling an await
    stops waiting but lets that HTTP request finish in its thread.
    """

    def __init__(
        self,
        url: str,
        token: Optional[str] = None,
        timeout: Optional[float] = None,
        *,
        chunk_size: int = DEFAULT_CHUNK,
        retries: int = DEFAULT_RETRIES,
        max_wait: float = MAX_WAIT,
        max_workers: int = 16,
    ) -> None:
        self.sync = Client(url, token, timeout, chunk_size=chunk_size, retries=0, max_wait=max_wait)
        self.url = self.sync.url
        self.retries = retries
        self.max_wait = max_wait
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="skynet-client")

    def __repr__(self):
        return f"AsyncClient({self.url!r})"

    async def _run(self, fn, *args):
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    async def _retrying(self, fn, *args):
        for attempt in range(self.retries + 1):
            try:
                return await self._run(fn, *args)
            except SkynetError as e:
                wait = self.sync._wait(e)
                if wait is None or attempt == self.retries:
                    raise
                await asyncio.sleep(wait)
        raise AssertionError("unreachable")

    async def score(self, cases: Iterable[Case], *, chunk_size: Optional[int] = None) -> List[Result]:
        """As Client.score; chunks go one after another."""
        prepared = _prepare(cases)
        out: List[Result] = []
        chunks = _Chunks(prepared, chunk_size or self.sync.chunk_size)
        for chunk in chunks:
            try:
                out.extend(await self._retrying(self.sync._score_chunk, chunk))
            except SkynetError as e:
                chunks.refused(e, chunk)
        return out

    async def iter_score(self, cases: Iterable[Case], *, chunk_size: Optional[int] = None) -> AsyncIterator[Result]:
        """As Client.iter_score, an async generator of results."""
        prepared = _prepare(cases)
        loop = asyncio.get_running_loop()
        queue = asyncio.Queue()
        done = object()
        stop = threading.Event()

        def put(item):
            try:
                loop.call_soon_threadsafe(queue.put_nowait, item)
            except RuntimeError:  # the loop is closed: nobody is waiting
                stop.set()

        def pump():
            try:
                # retried here with blocking waits: this thread is the stream's
                for res in self.sync._stream(prepared, chunk_size or self.sync.chunk_size, retries=self.retries):
                    if stop.is_set():
                        return
                    put((res, None))
            except BaseException as e:  # handed to the awaiting side
                put((done, e))
                return
            put((done, None))

        loop.run_in_executor(self._pool, pump)
        try:
            while True:
                item, err = await queue.get()
                if item is done:
                    if err is not None:
                        raise err
                    break
                yield item
        finally:
            stop.set()  # the pump stops at its next result and closes that connection

    async def rewards(self, queries: Iterable[str], prompts: Optional[Iterable[str]] = None, labels: Optional[Iterable[Any]] = None) -> Dict[str, Any]:
        return await self._retrying(self.sync.rewards, queries, prompts, labels)

    async def health(self) -> Tuple[Optional[int], str]:
        return await self._run(self.sync.health)

    async def healthy(self) -> bool:
        return await self._run(self.sync.healthy)

    async def wait_ready(self, timeout: float = 60.0, interval: float = 0.1) -> bool:
        deadline = time.monotonic() + timeout
        while True:
            status, text = await self.health()
            if status == 200:
                return True
            if time.monotonic() >= deadline:
                raise SkynetError(f"not ready after {timeout}s: last /healthz: {status} {text.strip()[:200]}", status=status, url=self.url + "/healthz")
            await asyncio.sleep(min(interval, max(0.0, deadline - time.monotonic())))

    async def metrics(self) -> str:
        return await self._retrying(self.sync.metrics)

    async def aclose(self) -> None:
        self._pool.shutdown(wait=False)
        self.sync.close()

    def close(self) -> None:
        self._pool.shutdown(wait=False)
        self.sync.close()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


# ---------------------------------------------------------------- adapters


def _client(client_or_url: Union[str, "Client", "AsyncClient"], token: Optional[str] = None, timeout: Optional[float] = None) -> Client:
    if isinstance(client_or_url, Client):
        return client_or_url
    if isinstance(client_or_url, AsyncClient):
        return client_or_url.sync
    return Client(client_or_url, token=token, timeout=timeout)


def _async_client(client_or_url: Union[str, "Client", "AsyncClient"], token: Optional[str] = None, timeout: Optional[float] = None) -> AsyncClient:
    if isinstance(client_or_url, AsyncClient):
        return client_or_url
    if isinstance(client_or_url, Client):
        c = client_or_url
        return AsyncClient(c.url, c.token, c.timeout, chunk_size=c.chunk_size, retries=c.retries, max_wait=c.max_wait)
    return AsyncClient(client_or_url, token=token, timeout=timeout)


def _adapter(
    client_or_url: Union[str, "Client", "AsyncClient"],
    asynchronous: bool,
    token: Optional[str],
    timeout: Optional[float],
    prepare: Callable[..., Any],
    name: str,
) -> Callable[..., Any]:
    """A trainer's reward function named name: prepare(*args, **kwargs)
    gives the cases to score and the function of their results it returns.
    With asynchronous it is an ``async def`` (the trainers await those
    beside each other, one request each), else a plain function; either
    carries its client as ``.client``."""
    if asynchronous:
        aclient = _async_client(client_or_url, token, timeout)

        async def adapter_async(*args: Any, **kwargs: Any) -> Any:
            cases, finish = prepare(*args, **kwargs)
            return finish(await aclient.score(cases))

        adapter_async.__name__ = adapter_async.__qualname__ = name
        adapter_async.client = aclient  # type: ignore[attr-defined]
        return adapter_async
    client = _client(client_or_url, token, timeout)

    def adapter(*args: Any, **kwargs: Any) -> Any:
        cases, finish = prepare(*args, **kwargs)
        return finish(client.score(cases))

    adapter.__name__ = adapter.__qualname__ = name
    adapter.client = client  # type: ignore[attr-defined]
    return adapter


def _fields(obj: Any) -> Dict[str, Any]:
    """A plain dict of an Example, Prediction or mapping, without DSPy's
    internal fields ("dspy_uuid", "dspy_split": dspy.datasets adds them to
    every example, and Example.keys() leaves them out too)."""
    if obj is None:
        return {}
    if hasattr(obj, "items"):
        items = obj.items()
    elif hasattr(obj, "toDict"):
        items = obj.toDict().items()
    else:
        items = dict(obj).items()
    return {k: v for k, v in items if not (isinstance(k, str) and k.startswith("dspy_"))}


def _outcome(result: Result, failure_score: Any) -> Tuple[Any, str, Dict[str, float], Optional[str]]:
    """(score, feedback, named scores, error text or None) of one result. A
    failed case (error set) scores failure_score; its feedback is the
    server's, else "kind: message"."""
    err = result.get("error")
    score = result.get("score")
    if err or not isinstance(score, (int, float)) or isinstance(score, bool) or not math.isfinite(score):
        score = failure_score
    elif score is not None:
        score = float(score)
    feedback = result.get("feedback")
    feedback = feedback if isinstance(feedback, str) else ""
    message = None
    if err:
        if isinstance(err, dict):
            kind, text = err.get("kind"), err.get("message")
            message = f"{kind}: {text}" if kind and text else (text or kind or "error")
        else:
            message = str(err)
        feedback = feedback or message
    scores = result.get("scores") if isinstance(result.get("scores"), dict) else {}
    return score, feedback, {k: float(v) for k, v in scores.items()}, message


def _dspy_case(gold: Any, pred: Any) -> Case:
    """The case of a DSPy metric call, as skynet.dspy_metric builds it in a
    worker: input = gold.inputs(), expected = gold.labels() (None when
    empty), output = the prediction's one field, or a dict of its fields."""
    output = _fields(pred)
    if len(output) == 1:
        output = next(iter(output.values()))
    return {"input": _fields(gold.inputs()), "output": output, "expected": _fields(gold.labels()) or None}


def dspy_metric(
    client_or_url: Union[str, Client, AsyncClient],
    *,
    token: Optional[str] = None,
    timeout: Optional[float] = None,
    failure_score: float = 0.0,
    raise_errors: bool = False,
    objective_scores: bool = True,
) -> Callable[..., Any]:
    """A DSPy metric scored by the server (DSPy itself is not needed to build it).

    Returns ``metric(gold, pred, trace=None, pred_name=None, pred_trace=None,
    program_trace=None)``, DSPy's GEPA metric signature, and answers every
    call form the same way: a ``dspy.Prediction`` with ``score`` (a float),
    ``feedback`` and, when the metric gave named scores and
    ``objective_scores`` is true, ``objective_scores``. DSPy reads it in each
    of its callers: ``dspy.Evaluate`` (``metric(example, prediction)``) and
    bootstrapping (``metric(example, prediction, trace)``) through its
    number behaviour (``float()``, ``+``, comparisons; its truth is its
    score's, so a 0 is no success); ``dspy.GEPA`` takes ``objective_scores``
    from those same calls (``_extract_score_and_objective_scores``) and
    ``feedback`` from its five-argument calls and from calls with
    ``trace``, ``pred_name`` and ``pred_trace`` all None (``dspy.Flex``
    programs). Where ``dspy`` does not import, a :class:`ScoreWithFeedback`
    with the same fields and behaviour.

    The case sent is the one ``skynet.dspy_metric`` builds in a worker:
    ``input`` = ``gold.inputs()``, ``expected`` = ``gold.labels()`` (None
    when empty), ``output`` = the prediction's one output field, or a dict of
    its fields when it has several; DSPy's internal ``dspy_*`` fields are
    left out. A case whose metric failed scores ``failure_score`` with the
    error as feedback (``raise_errors=True`` raises SkynetError instead).
    GEPA asks again for each predictor on the same gold and prediction: the
    result is remembered (by object identity, up to 4096 pairs) so the
    server scores each pair once.
    """
    client = _client(client_or_url, token, timeout)
    memo: Dict[Tuple[int, int], Any] = {}
    keep: List[Any] = []  # the memo holds its keys' objects so their ids stay theirs
    lock = threading.Lock()

    def judge(gold, pred):
        key = (id(gold), id(pred))
        with lock:
            hit = memo.get(key)
        if hit is not None:
            return hit
        outcome = _outcome(client.score([_dspy_case(gold, pred)])[0], failure_score)
        if outcome[3] is not None and raise_errors:
            raise SkynetError(f"the metric failed: {outcome[3]}", url=client.url + "/v1/score")
        with lock:
            if len(memo) >= 4096:
                memo.clear()
                keep.clear()
            keep.append((gold, pred))
            memo[key] = outcome
        return outcome

    def metric(gold, pred, trace=None, pred_name=None, pred_trace=None, program_trace=None):
        score, feedback, scores, _ = judge(gold, pred)
        fields = {"score": score, "feedback": feedback}
        if scores and objective_scores:
            fields["objective_scores"] = scores
        try:
            prediction = _dspy_prediction_class()
        except ImportError:
            return ScoreWithFeedback(fields)
        return prediction(**fields)

    metric.__name__ = "skynet_metric"
    metric.client = client
    return metric


def _gepa_case(candidate, example, run, to_case):
    if run is None:
        output = candidate  # the candidate is the solution (single-task search)
    elif example is None:
        output = run(candidate)
    else:
        output = run(candidate, example)
    if to_case is not None:
        case = dict(to_case(candidate, example, output))
        case.setdefault("output", output)
        return case, output
    if example is None:
        return {"input": {}, "output": output}, output
    if isinstance(example, dict) and "input" in example:
        case = {"input": example["input"], "output": output, "expected": example.get("expected")}
        if example.get("observation") is not None:
            case["observation"] = example["observation"]
        return case, output
    if isinstance(example, dict):
        return {"input": dict(example), "output": output}, output
    return {"input": {"example": example}, "output": output}, output


def _side_info(result, output, show_output, failure_score):
    score, feedback, scores, error = _outcome(result, failure_score)
    info = {"Feedback": feedback}
    if scores:
        info["scores"] = scores
    if error is not None:
        info["Error"] = error
    if show_output:
        info["Output"] = output
    return score, info


def gepa_evaluator(
    client_or_url: Union[str, Client, AsyncClient],
    run: Optional[Callable[..., Any]] = None,
    *,
    to_case: Optional[Callable[..., Case]] = None,
    token: Optional[str] = None,
    timeout: Optional[float] = None,
    failure_score: float = 0.0,
    show_output: Optional[bool] = None,
) -> Callable[..., Tuple[float, Dict[str, Any]]]:
    """A GEPA ``optimize_anything`` evaluator scored by the server.

    Returns ``evaluate(candidate, example=None) -> (score, side_info)``, the
    ``Evaluator`` shape of gepa (``gepa.optimize_anything(seed_candidate,
    evaluator=..., dataset=...)``): called as ``evaluate(candidate)`` in
    single-task search and ``evaluate(candidate, example)`` with a dataset.

    ``output`` is ``run(candidate, example)`` (``run(candidate)`` without an
    example), or the candidate itself when ``run`` is None (the candidate is
    the solution). An example that is a case-shaped dict ({"input": ...,
    "expected": ..., optional "observation"}) gives input and expected; any
    other dict is the input (expected None); anything else is
    ``{"example": example}``. ``to_case(candidate, example, output)`` returning
    a case dict overrides this mapping.

    side_info is GEPA's ASI: ``{"Feedback": ..., "scores": {named scores},
    "Error": "kind: message" (failed cases, which score failure_score),
    "Output": output (when run is given, or show_output=True)}``; ``expected``
    is never copied into it (the reflection model sees only what the metric
    put into its feedback).
    """
    client = _client(client_or_url, token, timeout)
    show = (run is not None) if show_output is None else show_output

    def evaluate(candidate, example=None):
        case, output = _gepa_case(candidate, example, run, to_case)
        return _side_info(client.score([case])[0], output, show, failure_score)

    evaluate.client = client
    return evaluate


def gepa_batch_evaluator(
    client_or_url: Union[str, Client, AsyncClient],
    run: Optional[Callable[..., Any]] = None,
    *,
    to_case: Optional[Callable[..., Case]] = None,
    token: Optional[str] = None,
    timeout: Optional[float] = None,
    failure_score: float = 0.0,
    show_output: Optional[bool] = None,
) -> Callable[[Sequence[Tuple[Any, Any]]], List[Tuple[float, Dict[str, Any]]]]:
    """GEPA's ``batch_evaluator``: ``batch_evaluate(pairs) -> [(score,
    side_info), ...]`` for a list of ``(candidate, example)`` pairs, scored in
    one request (chunked by the client). Same mapping and side_info as
    :func:`gepa_evaluator`; pass both to ``optimize_anything`` (``evaluator=``
    for single pairs, ``batch_evaluator=`` for minibatches and validation)."""
    client = _client(client_or_url, token, timeout)
    show = (run is not None) if show_output is None else show_output

    def batch_evaluate(pairs):
        built = [_gepa_case(candidate, example, run, to_case) for candidate, example in pairs]
        cases = []
        for i, (case, _) in enumerate(built):
            case = dict(case)
            case["id"] = str(i + 1)
            cases.append(case)
        results = client.score(cases)
        return [_side_info(res, out, show, failure_score) for res, (_, out) in zip(results, built)]

    batch_evaluate.client = client
    return batch_evaluate


def verl_compute_score(
    client_or_url: Union[str, Client, AsyncClient],
    *,
    asynchronous: bool = False,
    to_case: Optional[Callable[..., Case]] = None,
    token: Optional[str] = None,
    timeout: Optional[float] = None,
    failure_score: float = 0.0,
) -> Callable[..., Any]:
    """verl's custom reward function, scored by the server. In the file that
    verl's ``custom_reward_function.path`` names::

        from skynet_client import verl_compute_score
        compute_score = verl_compute_score("http://HOST:8765")   # custom_reward_function.name: compute_score

    verl's reward managers call ``compute_score(data_source=...,
    solution_str=..., ground_truth=..., extra_info=...)``
    (verl/workers/reward_manager/naive.py, NaiveRewardManager.__call__),
    one sample a call; its reward loop awaits it when it is a coroutine
    function (verl/experimental/reward_loop/reward_manager/naive.py,
    run_single), which ``asynchronous=True`` returns. Extra keyword arguments
    (``reward_router_address``...) are accepted and not sent.

    The case: ``input`` = ``{"data_source": data_source, "extra_info":
    extra_info}``, ``output`` = ``solution_str``, ``expected`` =
    ``{"ground_truth": ground_truth}``; ``to_case(data_source, solution_str,
    ground_truth, extra_info)`` returning a case dict replaces this. Returns
    the score as a float, ``failure_score`` for a case whose metric failed.
    """

    def case_of(data_source, solution_str, ground_truth, extra_info):
        if to_case is not None:
            return dict(to_case(data_source, solution_str, ground_truth, extra_info))
        return {"input": {"data_source": data_source, "extra_info": extra_info}, "output": solution_str, "expected": {"ground_truth": ground_truth}}

    def prepare(data_source=None, solution_str=None, ground_truth=None, extra_info=None, **kwargs):
        return [case_of(data_source, solution_str, ground_truth, extra_info)], lambda results: _outcome(results[0], failure_score)[0]

    return _adapter(client_or_url, asynchronous, token, timeout, prepare, "compute_score")


# What TRL's GRPOTrainer passes a reward function besides the dataset's columns.
_TRL_KWARGS = ("prompts", "completions", "completion_ids", "trainer_state", "log_extra", "log_metric", "environments")


def _trl_text(completion: Any) -> Any:
    """A completion's text: itself when it is a str, the content of its last
    message when it is conversational (a list of {"role", "content"})."""
    if isinstance(completion, list) and completion and isinstance(completion[-1], dict) and "content" in completion[-1]:
        return completion[-1]["content"]
    return completion


def trl_reward_func(
    client_or_url: Union[str, Client, AsyncClient],
    *,
    asynchronous: bool = False,
    to_case: Optional[Callable[..., Case]] = None,
    token: Optional[str] = None,
    timeout: Optional[float] = None,
    failure_score: Optional[float] = 0.0,
    name: str = "skynet",
) -> Callable[..., Any]:
    """A TRL reward function scored by the server, one request a batch::

        from skynet_client import trl_reward_func
        trainer = GRPOTrainer(model=..., reward_funcs=[trl_reward_func("http://HOST:8765")], train_dataset=...)

    GRPOTrainer calls ``reward_func(prompts=..., completions=...,
    completion_ids=..., **columns)`` with every other dataset column as a
    list (plus ``trainer_state``, ``log_extra``, ``log_metric``) and makes a
    float32 tensor of the list returned; an ``async def`` one
    (``asynchronous=True``) is awaited beside the others (trl/trainer/
    grpo_trainer.py, GRPOTrainer._calculate_rewards).

    Case i: ``input`` = ``{"prompt": prompts[i]}``, ``output`` = completion
    i's text (a conversational completion: its last message's content),
    ``expected`` = the dataset's other columns at row i (None when there are
    none); ``to_case(prompt, completion, row)`` returning a case dict
    replaces this. Returns one float a completion; a failed case's is
    ``failure_score`` (None tells TRL the reward does not apply: NaN). With
    TRL's ``log_extra``, each completion's feedback becomes the completions
    table's column ``"<name>_feedback"``. ``name`` is the reward's name in
    TRL's logs.
    """

    def cases_of(prompts, completions, kwargs):
        n = len(completions)
        columns = {k: v for k, v in kwargs.items() if k not in _TRL_KWARGS and isinstance(v, (list, tuple)) and len(v) == n}
        cases = []
        for i in range(n):
            row = {k: v[i] for k, v in columns.items()}
            prompt = prompts[i] if prompts is not None else None
            if to_case is not None:
                case = dict(to_case(prompt, completions[i], row))
            else:
                case = {"input": {"prompt": prompt}, "output": _trl_text(completions[i]), "expected": row or None}
            case["id"] = str(i + 1)
            cases.append(case)
        return cases

    def finish(results, kwargs):
        outcomes = [_outcome(r, failure_score) for r in results]
        log_extra = kwargs.get("log_extra")
        if callable(log_extra):
            log_extra(f"{name}_feedback", [o[1] for o in outcomes])
        return [o[0] for o in outcomes]

    def prepare(prompts=None, completions=None, **kwargs):
        return cases_of(prompts, completions, kwargs), lambda results: finish(results, kwargs)

    return _adapter(client_or_url, asynchronous, token, timeout, prepare, name)
