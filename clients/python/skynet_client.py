"""Client for ``skynet serve``: score cases over HTTP, from Python 3.9+, stdlib only.

One file: copy it next to your code or put its folder on ``PYTHONPATH``.

    from skynet_client import Client
    c = Client("http://127.0.0.1:8765")          # token=..., or env SKYNET_TOKEN / SKYNET_SERVE_TOKEN
    c.wait_ready(30)
    results = c.score([{"input": {"q": "2+2"}, "output": "4", "expected": {"label": "4"}}])
    results[0]["score"], results[0]["feedback"]

``Client`` (threads) and ``AsyncClient`` (asyncio) speak the server's API:
``POST /v1/score`` (JSON, or NDJSON streamed), ``POST /v1/rewards`` (OpenRLHF's
remote reward shape), ``GET /healthz``, ``GET /metrics``. Adapters turn a
server into a DSPy metric (:func:`dspy_metric`) or a GEPA ``optimize_anything``
evaluator (:func:`gepa_evaluator`, :func:`gepa_batch_evaluator`); OpenRLHF needs
no adapter, only the URL of ``/v1/rewards``. See README.md beside this file.
"""

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

__all__ = [
    "Client",
    "AsyncClient",
    "SkynetError",
    "ScoreWithFeedback",
    "dspy_metric",
    "gepa_evaluator",
    "gepa_batch_evaluator",
]

__version__ = "0.1.0"

DEFAULT_CHUNK = 500  # cases per request
DEFAULT_RETRIES = 5  # 429/503 answers retried per request
MAX_WAIT = 30.0  # longest Retry-After honoured, seconds
_CASE_KEYS = ("id", "input", "output", "expected", "observation")


class SkynetError(Exception):
    """The server answered with an error status, or could not be reached.

    ``status`` is the HTTP status (``None`` when no answer came), ``message``
    the server's own message (from its JSON ``error``/``message``, else the
    body's text), ``body`` the raw reply text, ``retry_after`` seconds from a
    ``Retry-After`` header (429/503) or ``None``, ``url`` the request's URL.
    """

    def __init__(self, message, status=None, body="", url="", retry_after=None):
        self.status = status
        self.message = message
        self.body = body
        self.url = url
        self.retry_after = retry_after
        where = f" ({url})" if url else ""
        head = f"HTTP {status}: " if status is not None else ""
        super().__init__(f"skynet: {head}{message}{where}")


class ScoreWithFeedback(dict):
    """What :func:`dspy_metric` returns for GEPA's feedback calls when DSPy is
    not importable: a dict with ``score`` and ``feedback`` (and
    ``objective_scores`` when the metric gave named scores), readable as
    ``o.score`` or ``o["score"]``, and usable as a number (``float(o)``).
    With DSPy importable a real ``dspy.Prediction`` is returned instead."""

    def __getattr__(self, key):
        try:
            return self[key]
        except KeyError:
            raise AttributeError(key) from None

    def __float__(self):
        return float(self["score"])


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


def _jsonable(value):
    """json.dumps' default: DSPy/pydantic objects become dicts, sets lists,
    bytes text; anything else its str()."""
    for name in ("toDict", "model_dump", "to_dict"):
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


def _chunks(items, size):
    if size is None or size < 1:
        raise ValueError(f"skynet: chunk_size must be >= 1, got {size!r}")
    for i in range(0, len(items), size):
        yield items[i : i + size]


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


class _Reply:
    __slots__ = ("status", "headers", "body")

    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body


# ---------------------------------------------------------------- sync client


class Client:
    """A client of one ``skynet serve``. Thread-safe: each thread keeps its own
    keep-alive connection.

    ``url``: ``http://host:port`` (``host:port`` and URLs ending in
    ``/v1/score`` or ``/v1/rewards`` also do). ``token``: sent as
    ``Authorization: Bearer``; ``None`` reads env ``SKYNET_TOKEN``, else
    ``SKYNET_SERVE_TOKEN`` (the server's own variable).
    ``timeout``: seconds a socket operation may wait (connecting, or the gap
    between bytes of a reply); ``None`` waits as long as scoring takes.
    ``chunk_size``: cases per request (a 413 halves it for that request).
    ``retries``: how many 429/503 answers one request retries, each after the
    server's ``Retry-After`` (capped at ``max_wait`` seconds; 1 s when absent).
    """

    def __init__(self, url, token=None, timeout=None, *, chunk_size=DEFAULT_CHUNK, retries=DEFAULT_RETRIES, max_wait=MAX_WAIT):
        self.scheme, self.host, self.port, self.prefix = _base_url(url)
        self.url = f"{self.scheme}://{self.host}{':' + str(self.port) if self.port else ''}{self.prefix}"
        if token is None:  # the client's variable, else the one skynet serve reads
            token = os.environ.get("SKYNET_TOKEN") or os.environ.get("SKYNET_SERVE_TOKEN") or None
        self.token = token
        self.timeout = timeout
        self.chunk_size = chunk_size
        self.retries = retries
        self.max_wait = max_wait
        self._local = threading.local()
        self._conns = []
        self._lock = threading.Lock()

    def __repr__(self):
        return f"Client({self.url!r})"

    # -- connections

    def _conn(self):
        conn = getattr(self._local, "conn", None)
        if conn is None:
            cls = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
            conn = cls(self.host, self.port, timeout=self.timeout)
            self._local.conn = conn
            with self._lock:
                self._conns.append(conn)
        return conn

    def _drop(self, conn=None):
        """Closes conn (default: this thread's connection) and forgets it."""
        if conn is None or getattr(self._local, "conn", None) is conn:
            conn = getattr(self._local, "conn", None)
            self._local.conn = None
        if conn is not None:
            conn.close()
            with self._lock:
                if conn in self._conns:
                    self._conns.remove(conn)

    def close(self):
        """Closes every connection this client opened (any thread's)."""
        with self._lock:
            conns, self._conns = self._conns, []
        for conn in conns:
            conn.close()
        self._local = threading.local()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _headers(self, content_type=None, accept="application/json"):
        h = {"Accept": accept, "User-Agent": f"skynet-client-python/{__version__}"}
        if content_type:
            h["Content-Type"] = content_type
        if self.token:
            h["Authorization"] = f"Bearer {self.token}"
        return h

    def _open(self, method, path, body=None, headers=None):
        """Sends one request and returns the live response (headers read).
        A kept-alive connection the server has closed meanwhile is reopened
        once; a refused connection is a SkynetError with status None."""
        url = self.url + path
        data = body.encode("utf-8") if isinstance(body, str) else body
        unread = getattr(self._local, "streaming", None)
        if unread is not None:
            self._local.streaming = None
            if not unread.isclosed():  # an iter_score left unfinished: give its connection up
                self._drop(unread.skynet_conn)
        for attempt in (0, 1):
            conn = self._conn()
            reused = conn.sock is not None
            try:
                conn.request(method, self.prefix + path, body=data, headers=headers or self._headers())
                resp = conn.getresponse()
                resp.skynet_conn = conn
                return resp
            except http.client.ImproperConnectionState:
                # this thread left a reply unread (an iter_score not run to
                # its end): that connection is given up, a new one opened
                self._drop()
                if attempt == 0:
                    continue
                raise
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, http.client.BadStatusLine) as e:
                self._drop()
                if reused and attempt == 0:
                    continue
                raise SkynetError(f"connection lost: {e}", url=url) from e
            except socket.timeout as e:
                self._drop()
                raise SkynetError(f"no answer within {self.timeout}s", url=url) from e
            except OSError as e:
                self._drop()
                raise SkynetError(f"cannot reach the server: {e}", url=url) from e
            except BaseException:
                self._drop()
                raise
        raise AssertionError("unreachable")

    def _read(self, resp, url):
        try:
            body = resp.read()
        except (OSError, http.client.HTTPException) as e:
            self._drop(resp.skynet_conn)
            raise SkynetError(f"reply cut short: {e}", status=resp.status, url=url) from e
        if resp.will_close:
            self._drop(resp.skynet_conn)
        return body.decode("utf-8", "replace")

    def _once(self, method, path, body=None, headers=None):
        """One request, its whole reply read."""
        resp = self._open(method, path, body, headers)
        text = self._read(resp, self.url + path)
        return _Reply(resp.status, resp.headers, text)

    def _error(self, status, headers, text, path):
        return SkynetError(
            _server_message(text, status), status=status, body=text, url=self.url + path, retry_after=_retry_after(headers.get("Retry-After"))
        )

    def _wait(self, err):
        """Seconds to wait before retrying err, or None when it is final."""
        if err.status not in (429, 503):
            return None
        wait = err.retry_after if err.retry_after is not None else 1.0
        return min(wait, self.max_wait)

    def _call(self, method, path, body=None, headers=None, ok=(200,)):
        """A request with the retry policy; returns the reply text."""
        for attempt in range(self.retries + 1):
            r = self._once(method, path, body, headers)
            if r.status in ok:
                return r.body
            err = self._error(r.status, r.headers, r.body, path)
            wait = self._wait(err)
            if wait is None or attempt == self.retries:
                raise err
            time.sleep(wait)
        raise AssertionError("unreachable")

    def _json(self, text, path):
        try:
            return json.loads(text)
        except ValueError as e:
            raise SkynetError(f"the reply is not JSON ({e}): {text[:200]!r}", url=self.url + path) from None

    # -- API

    def score(self, cases, *, chunk_size=None):
        """Scores cases (dicts with "input", "output", optional "id",
        "expected", "observation") and returns one result dict per case, in
        order: {"id", "score", "feedback", "scores", "error", "ms", ...}.
        A case whose metric failed is a result with "error" set, not an
        exception; SkynetError is for the request itself (4xx/5xx, no
        server). Sent as JSON, chunk_size cases a request."""
        prepared = _prepare(cases)
        out = []
        for chunk in _chunks(prepared, chunk_size or self.chunk_size):
            out.extend(self._score_chunk(chunk))
        return out

    def _score_chunk(self, chunk):
        path = "/v1/score"
        try:
            text = self._call("POST", path, _dumps({"cases": chunk}, "a case"), self._headers("application/json"))
        except SkynetError as e:
            if e.status == 413 and len(chunk) > 1:  # too large: halve it
                half = len(chunk) // 2
                return self._score_chunk(chunk[:half]) + self._score_chunk(chunk[half:])
            raise
        doc = self._json(text, path)
        results = doc.get("results") if isinstance(doc, dict) else None
        _check_results(results, chunk, self.url + path)
        return results

    def iter_score(self, cases, *, chunk_size=None):
        """Like score(), but sends NDJSON and yields each result as its line
        arrives (the server streams them in case order)."""
        prepared = _prepare(cases)
        for chunk in _chunks(prepared, chunk_size or self.chunk_size):
            yield from self._stream_chunk(chunk)

    def _stream_chunk(self, chunk, retries=None):
        retries = self.retries if retries is None else retries
        path = "/v1/score"
        url = self.url + path
        body = "".join(_dumps(c, "a case") + "\n" for c in chunk)
        headers = self._headers("application/x-ndjson", accept="application/x-ndjson")
        for attempt in range(retries + 1):
            resp = self._open("POST", path, body, headers)
            if resp.status == 200:
                break
            text = self._read(resp, url)
            err = self._error(resp.status, resp.headers, text, path)
            if err.status == 413 and len(chunk) > 1:
                half = len(chunk) // 2
                yield from self._stream_chunk(chunk[:half], retries)
                yield from self._stream_chunk(chunk[half:], retries)
                return
            wait = self._wait(err)
            if wait is None or attempt == retries:
                raise err
            time.sleep(wait)
        n = 0
        conn = resp.skynet_conn
        self._local.streaming = resp
        try:
            while True:
                try:
                    line = resp.readline()
                except (OSError, http.client.HTTPException) as e:
                    self._drop(conn)
                    raise SkynetError(f"stream cut after {n} of {len(chunk)} result(s): {e}", status=200, url=url) from e
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
                yield res
        except BaseException:
            self._drop(conn)  # the reply was not read to its end
            raise
        if resp.will_close:
            self._drop(conn)
        if n != len(chunk):
            raise SkynetError(f"the stream ended after {n} of {len(chunk)} result(s)", status=200, url=url)

    def rewards(self, queries, prompts=None, labels=None):
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
        doc = self._json(self._call("POST", path, _dumps(body), self._headers("application/json")), path)
        if not isinstance(doc, dict) or not isinstance(doc.get("rewards"), list) or len(doc["rewards"]) != len(queries):
            raise SkynetError(f"the reply has no {len(queries)} rewards: {str(doc)[:200]}", url=self.url + path)
        return doc

    def health(self):
        """GET /healthz: (status, text); status None when unreachable."""
        try:
            r = self._once("GET", "/healthz", headers=self._headers(accept="*/*"))
        except SkynetError as e:
            return None, str(e)
        return r.status, r.body

    def healthy(self):
        """True when /healthz answers 200 (loaded, not draining)."""
        return self.health()[0] == 200

    def wait_ready(self, timeout=60.0, interval=0.1):
        """Polls /healthz until it answers 200; SkynetError after timeout
        seconds, naming the last answer."""
        deadline = time.monotonic() + timeout
        while True:
            status, text = self.health()
            if status == 200:
                return True
            if time.monotonic() >= deadline:
                raise SkynetError(f"not ready after {timeout}s: last /healthz: {status if status is not None else ''} {text.strip()[:200]}".replace("  ", " "), status=status, url=self.url + "/healthz")
            time.sleep(min(interval, max(0.0, deadline - time.monotonic())))

    def metrics(self):
        """GET /metrics: the Prometheus text."""
        return self._call("GET", "/metrics", headers=self._headers(accept="text/plain"))


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

    def __init__(self, url, token=None, timeout=None, *, chunk_size=DEFAULT_CHUNK, retries=DEFAULT_RETRIES, max_wait=MAX_WAIT, max_workers=16):
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

    async def score(self, cases, *, chunk_size=None):
        """As Client.score; chunks go one after another."""
        prepared = _prepare(cases)
        out = []
        for chunk in _chunks(prepared, chunk_size or self.sync.chunk_size):
            out.extend(await self._retrying(self.sync._score_chunk, chunk))
        return out

    async def iter_score(self, cases, *, chunk_size=None):
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
                for chunk in _chunks(prepared, chunk_size or self.sync.chunk_size):
                    # retried here with blocking waits: this thread is the stream's
                    for res in self.sync._stream_chunk(chunk, retries=self.retries):
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

    async def rewards(self, queries, prompts=None, labels=None):
        return await self._retrying(self.sync.rewards, queries, prompts, labels)

    async def health(self):
        return await self._run(self.sync.health)

    async def healthy(self):
        return await self._run(self.sync.healthy)

    async def wait_ready(self, timeout=60.0, interval=0.1):
        deadline = time.monotonic() + timeout
        while True:
            status, text = await self.health()
            if status == 200:
                return True
            if time.monotonic() >= deadline:
                raise SkynetError(f"not ready after {timeout}s: last /healthz: {status} {text.strip()[:200]}", status=status, url=self.url + "/healthz")
            await asyncio.sleep(min(interval, max(0.0, deadline - time.monotonic())))

    async def metrics(self):
        return await self._retrying(self.sync.metrics)

    async def aclose(self):
        self._pool.shutdown(wait=False)
        self.sync.close()

    def close(self):
        self._pool.shutdown(wait=False)
        self.sync.close()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.aclose()


# ---------------------------------------------------------------- adapters


def _client(client_or_url, token=None, timeout=None):
    if isinstance(client_or_url, Client):
        return client_or_url
    if isinstance(client_or_url, AsyncClient):
        return client_or_url.sync
    return Client(client_or_url, token=token, timeout=timeout)


def _as_dict(obj):
    if obj is None:
        return {}
    if isinstance(obj, dict):
        return dict(obj)
    if hasattr(obj, "toDict"):
        return dict(obj.toDict())
    if hasattr(obj, "items"):
        return dict(obj.items())
    return dict(obj)


def _outcome(result, failure_score):
    """(score, feedback, named scores, error text or None) of one result. A
    failed case (error set) scores failure_score; its feedback is the
    server's, else "kind: message"."""
    err = result.get("error")
    score = result.get("score")
    if err or not isinstance(score, (int, float)) or isinstance(score, bool) or not math.isfinite(score):
        score = failure_score
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
    return float(score), feedback, dict(scores), message


def dspy_metric(client_or_url, *, token=None, timeout=None, failure_score=0.0, raise_errors=False, objective_scores=True):
    """A DSPy metric scored by the server (DSPy itself is not needed to build it).

    Returns ``metric(gold, pred, trace=None, pred_name=None, pred_trace=None)``,
    the signature DSPy's callers use: ``dspy.Evaluate`` calls
    ``metric(example, prediction)``, bootstrapping ``metric(example,
    prediction, trace)`` (both get a float), and ``dspy.GEPA`` checks that
    the metric binds five positional arguments and calls ``metric(gold, pred,
    trace, pred_name, pred_trace)`` for feedback: then (pred_name or
    pred_trace given) it gets ``dspy.Prediction(score=..., feedback=...)``
    plus ``objective_scores`` (the metric's named scores) when there are any
    and ``objective_scores`` is true, or, where ``dspy`` does not import, a
    :class:`ScoreWithFeedback` dict with the same keys.

    The case sent is the one ``skynet.dspy_metric`` builds in-process:
    ``input`` = ``gold.inputs()``, ``expected`` = ``gold.labels()`` (None when
    empty), ``output`` = the prediction's one output field, or a dict of its
    fields when it has several. A case whose metric failed scores
    ``failure_score`` with the error as feedback (``raise_errors=True`` raises
    SkynetError instead). GEPA asks again for each predictor on the same gold
    and prediction: the result is remembered (by object identity, up to 4096
    pairs) so the server scores each pair once.
    """
    client = _client(client_or_url, token, timeout)
    memo = {}
    keep = []  # the memo holds its keys' objects so their ids stay theirs
    lock = threading.Lock()

    def judge(gold, pred):
        key = (id(gold), id(pred))
        with lock:
            hit = memo.get(key)
        if hit is not None:
            return hit
        case = {"input": _as_dict(gold.inputs()), "expected": _as_dict(gold.labels()) or None}
        fields = _as_dict(pred)
        case["output"] = next(iter(fields.values())) if len(fields) == 1 else fields
        result = client.score([case])[0]
        outcome = _outcome(result, failure_score)
        if outcome[3] is not None and raise_errors:
            raise SkynetError(f"the metric failed: {outcome[3]}", url=client.url + "/v1/score")
        with lock:
            if len(memo) >= 4096:
                memo.clear()
                keep.clear()
            keep.append((gold, pred))
            memo[key] = outcome
        return outcome

    def metric(gold, pred, trace=None, pred_name=None, pred_trace=None):
        score, feedback, scores, _ = judge(gold, pred)
        if pred_name is None and pred_trace is None:
            return score
        fields = {"score": score, "feedback": feedback}
        if scores and objective_scores:
            fields["objective_scores"] = scores
        try:
            import dspy  # only when GEPA asks for feedback
        except ImportError:
            return ScoreWithFeedback(fields)
        return dspy.Prediction(**fields)

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


def gepa_evaluator(client_or_url, run=None, *, to_case=None, token=None, timeout=None, failure_score=0.0, show_output=None):
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


def gepa_batch_evaluator(client_or_url, run=None, *, to_case=None, token=None, timeout=None, failure_score=0.0, show_output=None):
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
