"""Tests of skynet_client (unittest, stdlib only, Python 3.9+).

    SKYNET_URL=http://127.0.0.1:PORT [SKYNET_TOKEN=T] python3 -m unittest -v test_skynet_client

RealServerTest runs against a `skynet serve --metric testdata/metric.py`
at SKYNET_URL (skipped without it; cmd/skynet/pyclient_test.go starts one
and runs this file: `build/static.sh go test -run TestPythonClient
./cmd/skynet`). StandinServerTest runs the same API tests against a small
http.server stand-in in this file, plus what only a scripted server can do
deterministically: 429 with Retry-After, 401, 413, 503 while loading,
dropped keep-alive connections.

The adapters are tested here as functions, with no peer installed (the
client needs none); test_peers.py runs them under the peers' own code
(DSPy, GEPA, and the quoted callers of OpenRLHF, verl and TRL).
"""

import asyncio
import ast
import importlib.util
import inspect
import json
import os
import re
import socket
import struct
import sys
import threading
import time
import unittest
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import skynet_client as sc  # noqa: E402
from skynet_client import AsyncClient, Client, SkynetError  # noqa: E402


def _load_metric():
    spec = importlib.util.spec_from_file_location("client_test_metric", os.path.join(HERE, "testdata", "metric.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.score


METRIC = _load_metric()


def cases(n, wrong=(), boom=(), ids=True):
    out = []
    for i in range(n):
        output = "boom" if i in boom else ("no" if i in wrong else f"l{i}")
        c = {"input": {"n": i}, "output": output, "expected": {"label": f"l{i}"}}
        if ids:
            c["id"] = f"c{i}"
        out.append(c)
    return out


# ------------------------------------------------------------ stand-in server


class Standin(ThreadingHTTPServer):
    """Speaks the serve API with METRIC; scripted faults for the retry tests."""

    daemon_threads = True

    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)  # a client that left early is no error

    def __init__(self, token=None):
        super().__init__(("127.0.0.1", 0), Handler)
        self.token = token
        self.busy = 0  # answer this many /v1/score requests with 429
        self.retry_after = "0.2"
        self.max_cases = None  # more cases than this in one request: 413
        self.ready = True
        self.close_after = False  # answer with Connection: close
        self.requests = []  # (path, number of cases)
        self.reset = 0  # reset the connection of this many /v1/score requests, unanswered
        self.cut_after = None  # stream this many result lines of the next NDJSON request, then reset
        self.draining = False  # answer /v1/score 503, as skynet serve after SIGTERM
        self.thread = threading.Thread(target=self.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server_address[1]}"

    def stop(self):
        self.shutdown()
        self.server_close()


def _result(case):
    t = time.perf_counter()
    try:
        value, side = METRIC(case.get("input"), case.get("output"), case.get("expected"))
        err = None
    except Exception as e:  # a metric error is a result
        value, side, err = None, {"feedback": f"{type(e).__name__}: {e}"}, {"kind": "exception", "message": f"{type(e).__name__}: {e}"}
    return {"id": case.get("id"), "score": value, "feedback": side.get("feedback"), "scores": side.get("scores", {}), "error": err, "ms": (time.perf_counter() - t) * 1000}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send(self, status, body, ctype="application/json", headers=()):
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for k, v in headers:
            self.send_header(k, v)
        if self.server.close_after:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(data)

    def abort(self):
        """Resets the connection (SO_LINGER 0): the server died mid-request."""
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_connection = True
        self.connection.close()

    def fail(self, status, message, headers=()):
        self.send(status, json.dumps({"error": message}), headers=headers)

    def authorized(self):
        if self.server.token and self.headers.get("Authorization") != f"Bearer {self.server.token}":
            self.fail(401, "missing or wrong bearer token")
            return False
        return True

    def do_GET(self):
        if self.path == "/healthz":
            if self.server.ready:
                self.send(200, "ok\n", "text/plain")
            else:
                self.send(503, "loading\n", "text/plain")
        elif self.path == "/metrics":
            if self.authorized():
                self.send(200, "# TYPE skynet_cases_total counter\nskynet_cases_total 0\n", "text/plain")
        else:
            self.fail(404, "not found")

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if not self.authorized():
            return
        ndjson = self.headers.get("Content-Type", "").startswith("application/x-ndjson")
        try:
            if ndjson:
                doc = {"cases": [json.loads(l) for l in body.decode().splitlines() if l.strip()]}
            else:
                doc = json.loads(body)
        except ValueError as e:
            return self.fail(400, f"invalid JSON: {e}")
        if self.path == "/v1/score":
            batch = doc.get("cases")
            self.server.requests.append((self.path, len(batch)))
            if self.server.reset > 0:
                self.server.reset -= 1
                return self.abort()
            if self.server.draining:
                return self.fail(503, "the server is shutting down", headers=[("Retry-After", "5")])
            if self.server.busy > 0:
                self.server.busy -= 1
                return self.fail(429, "too many cases in flight", headers=[("Retry-After", self.server.retry_after)])
            if self.server.max_cases is not None and len(batch) > self.server.max_cases:
                return self.fail(413, "request body too large")
            results = [_result(c) for c in batch]
            if ndjson:
                self.send_response(200)
                self.send_header("Content-Type", "application/x-ndjson")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                cut, self.server.cut_after = self.server.cut_after, None
                for i, r in enumerate(results):
                    if i == cut:
                        self.wfile.flush()
                        return self.abort()
                    line = (json.dumps(r) + "\n").encode()
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
                self.wfile.write(b"0\r\n\r\n")
            else:
                self.send(200, json.dumps({"results": results}))
        elif self.path == "/v1/rewards":
            q, p, lab = doc["query"], doc.get("prompts"), doc.get("labels")
            rs = []
            for i, query in enumerate(q):
                prompt = p[i] if p and p[i] else ""
                out = query[len(prompt):] if query.startswith(prompt) else query
                rs.append(_result({"input": {"prompt": prompt}, "output": out, "expected": {"label": lab[i]} if lab and lab[i] is not None else None}))
            rewards = [r["score"] if r["error"] is None else 0.0 for r in rs]
            self.send(200, json.dumps({"rewards": rewards, "scores": rewards, "extra_logs": {"error": [float(r["error"] is not None) for r in rs]}, "feedback": [r["feedback"] for r in rs]}))
        else:
            self.fail(404, "not found")


# ------------------------------------------------------------ API tests


class ApiTests:
    """The API, against self.url (with self.token)."""

    url = None
    token = None

    def client(self, **kw):
        return Client(self.url, token=self.token, timeout=30, **kw)

    def test_wait_ready_and_healthy(self):
        c = self.client()
        self.assertTrue(c.wait_ready(30))
        self.assertTrue(c.healthy())

    def test_score_results_in_order(self):
        c = self.client()
        got = c.score(cases(6, wrong={1}, boom={4}))
        self.assertEqual([r["id"] for r in got], [f"c{i}" for i in range(6)])
        self.assertEqual(got[0]["score"], 1.0)
        self.assertEqual(got[0]["feedback"], "Correct.")
        self.assertEqual(got[0]["scores"], {"exact": 1.0, "length": 2.0})
        self.assertIsNone(got[0]["error"])
        self.assertIn("ms", got[0])
        self.assertEqual(got[1]["score"], 0.0)
        self.assertEqual(got[1]["feedback"], "Expected 'l1', got 'no'.")
        err = got[4]["error"]
        self.assertIsInstance(err, dict, got[4])
        self.assertTrue(err.get("kind"), err)
        self.assertIn("boom requested", err.get("message", ""))
        for r in got[:4] + got[5:]:
            self.assertIsNone(r["error"], r)

    def test_default_ids_are_positions(self):
        got = self.client().score(cases(3, ids=False))
        self.assertEqual([r["id"] for r in got], ["1", "2", "3"])
        self.assertEqual([r["score"] for r in got], [1.0, 1.0, 1.0])

    def test_no_expected(self):
        got = self.client().score([{"input": {}, "output": None}])
        self.assertEqual(got[0]["score"], 1.0, got[0])  # None == (expected or {}).get("label")

    def test_chunks_keep_order(self):
        c = self.client(chunk_size=4)
        got = c.score(cases(23, wrong={5, 17}))
        self.assertEqual([r["id"] for r in got], [f"c{i}" for i in range(23)])
        self.assertEqual(sum(r["score"] for r in got), 21.0)

    def test_many_cases_one_call(self):
        got = self.client().score(cases(1200, wrong={999}))
        self.assertEqual(len(got), 1200)
        self.assertEqual(got[1199]["id"], "c1199")
        self.assertEqual(got[999]["score"], 0.0)

    def test_ndjson_stream(self):
        c = self.client(chunk_size=7)
        got = list(c.iter_score(cases(20, boom={3})))
        self.assertEqual([r["id"] for r in got], [f"c{i}" for i in range(20)])
        self.assertIsNotNone(got[3]["error"])
        self.assertIsNone(got[4]["error"])
        # a stream left half read leaves the client usable
        it = c.iter_score(cases(10))
        next(it)
        it.close()
        self.assertEqual(len(c.score(cases(3))), 3)

    def test_unicode_and_nested_output(self):
        out = {"text": "héllo ✓", "list": [1, 2.5, None, True]}
        got = self.client().score([{"id": "u", "input": {"q": "ü"}, "output": out, "expected": {"label": out}}])
        self.assertEqual(got[0]["score"], 1.0, got[0])

    def test_threads_share_a_client(self):
        c = self.client()
        errors, totals = [], []

        def work(k):
            try:
                totals.append(sum(r["score"] for r in c.score(cases(30))))
            except Exception as e:  # reported below
                errors.append(e)

        threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        self.assertEqual(totals, [30.0] * 4)

    def test_client_side_errors(self):
        c = self.client()
        with self.assertRaisesRegex(ValueError, "unknown field 'expexted'"):
            c.score([{"input": {}, "output": 1, "expexted": {}}])
        with self.assertRaisesRegex(ValueError, "same id 'a'"):
            c.score([{"id": "a", "input": {}, "output": 1}, {"id": "a", "input": {}, "output": 2}])
        with self.assertRaisesRegex(ValueError, "same id '2'"):
            c.score([{"id": "2", "input": {}, "output": 1}, {"input": {}, "output": 2}])
        with self.assertRaisesRegex(ValueError, "NaN"):
            c.score([{"input": {}, "output": float("nan")}])
        with self.assertRaisesRegex(TypeError, "list of cases"):
            c.score({"input": {}, "output": 1})

    def test_malformed_json_is_400(self):
        c = self.client()
        with self.assertRaises(SkynetError) as cm:
            c._call("POST", "/v1/score", '{"cases": [', c._headers("application/json"))
        self.assertEqual(cm.exception.status, 400)
        self.assertTrue(cm.exception.message)
        self.assertIn("HTTP 400", str(cm.exception))

    def test_rewards(self):
        c = self.client()
        got = c.rewards(["Q: a\nA: l0", "Q: b\nA: no"], prompts=["Q: a\nA: ", "Q: b\nA: "], labels=["l0", "l1"])
        self.assertEqual(len(got["rewards"]), 2)
        for r in got["rewards"]:
            self.assertIsInstance(r, (int, float))
        self.assertEqual(len(got["scores"]), 2)
        self.assertIsInstance(got.get("extra_logs"), dict)

    def test_rewards_as_openrlhf_reads_them(self):
        # openrlhf/utils/agent.py (SingleTurnAgentExecutor._fetch_rewards_via_http)
        # posts {"query": [q], "prompts": [p], "labels": [l]} with aiohttp
        # (json=, no auth header) and reads "rewards", "scores" (else
        # "rewards") and "extra_logs"; samples_generator.py then does
        # torch.tensor([value]) for each extra_logs value, so every value
        # must be numbers: a list of strings or None there stops training.
        body = json.dumps({"query": ["Q: a\nA: l0"], "prompts": ["Q: a\nA: "], "labels": ["l0"]}).encode()
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        req = urllib.request.Request(self.url + "/v1/rewards", data=body, headers=headers)
        with urllib.request.urlopen(req, timeout=30) as resp:
            self.assertEqual(resp.status, 200)
            doc = json.loads(resp.read())
        self.assertEqual(len(doc["rewards"]), 1)
        for r in doc["rewards"]:
            self.assertIsInstance(r, (int, float), "a reward must be a number (never null)")
        for key, values in (doc.get("extra_logs") or {}).items():
            self.assertIsInstance(values, list, key)
            for v in values:
                self.assertTrue(isinstance(v, (int, float)) and not isinstance(v, bool), f"extra_logs[{key!r}] holds {v!r}: OpenRLHF's samples_generator.py does torch.tensor([value]) on every extra_logs value, so a str or None there stops a PPO run; keep extra_logs numeric and put feedback and error kinds in keys beside it")

    def test_rewards_error_and_empty(self):
        c = self.client()
        got = c.rewards(["boom"], prompts=[""], labels=["x"])
        self.assertIsInstance(got["rewards"][0], (int, float), "a failed case's reward is a number")
        # OpenRLHF shards one query over several --reward.remote_url servers:
        # all but the first get empty lists and must answer 200.
        self.assertEqual(c.rewards([], prompts=[], labels=[])["rewards"], [])

    def test_rewards_without_labels(self):
        got = self.client().rewards(["just text"])
        self.assertEqual(len(got["rewards"]), 1)

    def test_metrics(self):
        self.assertIn("# TYPE", self.client().metrics())

    def test_async_client(self):
        async def main():
            async with AsyncClient(self.url, token=self.token, timeout=30, chunk_size=5) as ac:
                self.assertTrue(await ac.wait_ready(30))
                self.assertTrue(await ac.healthy())
                a, b, r = await asyncio.gather(ac.score(cases(12)), ac.score(cases(3, wrong={0})), ac.rewards(["x"], ["p"], ["x"]))
                streamed = [res async for res in ac.iter_score(cases(9, boom={8}))]
                return a, b, r, streamed

        a, b, r, streamed = asyncio.run(main())
        self.assertEqual([x["id"] for x in a], [f"c{i}" for i in range(12)])
        self.assertEqual([x["score"] for x in b], [0.0, 1.0, 1.0])
        self.assertEqual(len(r["rewards"]), 1)
        self.assertEqual(len(streamed), 9)
        self.assertIsNotNone(streamed[8]["error"])

    # -- adapters

    def test_dspy_metric_without_dspy(self):
        # every call form answers a ScoreWithFeedback when dspy does not import
        saved = sys.modules.get("dspy")
        sys.modules["dspy"] = None  # import dspy raises ImportError
        try:
            ex = ExampleLike({"q": "x", "label": "ok", "dspy_uuid": "u1"}, inputs={"q"})
            metric = sc.dspy_metric(self.url, token=self.token, timeout=30)
            inspect.signature(metric).bind(None, None, None, None, None, None)  # GEPA's five, and program_trace
            right = metric(ex, {"answer": "ok"})
            self.assertIsInstance(right, sc.ScoreWithFeedback)
            self.assertEqual((right.score, float(right), bool(right), right + 1, 2 + right, right > 0.5), (1.0, 1.0, True, 2.0, 3.0, True))
            self.assertEqual(right.objective_scores, {"exact": 1.0, "length": 2.0})
            o = metric(ex, {"answer": "nope"}, None, "p", [])
            self.assertEqual((o.score, o["score"], float(o), bool(o)), (0.0, 0.0, 0.0, False))
            self.assertEqual(o.feedback, "Expected 'ok', got 'nope'.")
            self.assertEqual(sum([right, o, right]), 2.0)
            boom = metric(ex, {"answer": "boom"})
            self.assertEqual(boom.score, 0.0)
            self.assertIn("boom requested", boom.feedback)
            self.assertEqual(metric(ex, {"answer": "keys?"}).feedback, "expected keys: label", "DSPy's dspy_* fields are left out")
            strict = sc.dspy_metric(self.url, token=self.token, raise_errors=True)
            with self.assertRaisesRegex(SkynetError, "boom requested"):
                strict(ex, {"answer": "boom"})
        finally:
            if saved is None:
                del sys.modules["dspy"]
            else:
                sys.modules["dspy"] = saved

    def test_dspy_metric_scores_each_pair_once(self):
        counting = CountingClient(self.url, token=self.token)
        metric = sc.dspy_metric(counting)
        gold = ExampleLike({"question": "q", "label": "a"}, inputs={"question"})
        pred = {"answer": "a"}
        metric(gold, pred)
        for name in ("p1", "p2"):
            metric(gold, pred, None, name, [])
        self.assertEqual(counting.calls, 1)

    def test_gepa_evaluator(self):
        run = lambda candidate, example: candidate.replace("{x}", example["input"]["x"])  # noqa: E731
        evaluate = sc.gepa_evaluator(self.client(), run)
        dataset = [{"id": "e1", "input": {"x": "a"}, "expected": {"label": "say a"}}, {"input": {"x": "b"}, "expected": {"label": "say B"}}]
        s1, info1 = evaluate("say {x}", dataset[0])
        s2, info2 = evaluate("say {x}", dataset[1])
        self.assertEqual((s1, s2), (1.0, 0.0))
        self.assertEqual(info1["Feedback"], "Correct.")
        self.assertEqual(info1["scores"], {"exact": 1.0, "length": 5.0})
        self.assertEqual(info1["Output"], "say a")
        self.assertNotIn("Expected", info2)
        self.assertIn("Expected 'say B'", info2["Feedback"])  # only what the metric wrote
        # single-task search: no example, no run: the candidate is the output
        score, info = sc.gepa_evaluator(self.url, token=self.token)("boom")
        self.assertEqual(score, 0.0)
        self.assertIn("boom requested", info["Error"])
        self.assertNotIn("Output", info)

    def test_gepa_batch_evaluator(self):
        run = lambda candidate, example: candidate + example["w"]  # noqa: E731
        batch = sc.gepa_batch_evaluator(self.client(), run, to_case=lambda c, ex, out: {"input": ex, "expected": {"label": ex["want"]}})
        pairs = [("x", {"w": "1", "want": "x1"}), ("x", {"w": "2", "want": "nope"}), ("y", {"w": "3", "want": "y3"})]
        got = batch(pairs)
        self.assertEqual([s for s, _ in got], [1.0, 0.0, 1.0])
        self.assertEqual(got[1][1]["Output"], "x2")

    def test_verl_and_trl_adapters(self):
        # the peers' call shapes (test_peers.py runs their quoted code)
        to_case = lambda ds, sol, gt, ei: {"input": {"ds": ds}, "output": sol, "expected": {"label": gt}}  # noqa: E731
        verl = sc.verl_compute_score(self.client(), to_case=to_case)
        self.assertEqual(verl(data_source="d", solution_str="a", ground_truth="a", extra_info={"index": 1}), 1.0)
        self.assertEqual(verl(data_source="d", solution_str="boom", ground_truth="a", extra_info=None), 0.0)
        trl = sc.trl_reward_func(self.client())
        logged = {}
        got = trl(prompts=["p1", "p2"], completions=["x", [{"role": "assistant", "content": "y"}]], completion_ids=[[1], [2]], label=["x", "z"], log_extra=lambda c, v: logged.setdefault(c, v))
        self.assertEqual(got, [1.0, 0.0])
        self.assertEqual(logged["skynet_feedback"], ["Correct.", "Expected 'z', got 'y'."])

        async def both():
            a = sc.verl_compute_score(self.url, asynchronous=True, to_case=to_case, token=self.token)
            b = sc.trl_reward_func(self.url, asynchronous=True, token=self.token)
            return await a(data_source="d", solution_str="a", ground_truth="a"), await b(prompts=["p"], completions=["q"], label=["q"])

        self.assertEqual(asyncio.run(both()), (1.0, [1.0]))


# ------------------------------------------------------------ helpers


class ExampleLike:
    """A gold example with inputs()/labels() and items(), as the adapter
    reads a dspy.Example (no dspy needed)."""

    def __init__(self, store, inputs):
        self.store, self.keys = store, inputs

    def inputs(self):
        return {k: v for k, v in self.store.items() if k in self.keys}

    def labels(self):
        return {k: v for k, v in self.store.items() if k not in self.keys}


class CountingClient(Client):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.calls = 0

    def score(self, cases, **kw):
        self.calls += 1
        return super().score(cases, **kw)


# ------------------------------------------------------------ the test classes


@unittest.skipUnless(os.environ.get("SKYNET_URL"), "set SKYNET_URL to a `skynet serve --metric testdata/metric.py`")
class RealServerTest(ApiTests, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.url = os.environ["SKYNET_URL"]
        cls.token = os.environ.get("SKYNET_TOKEN") or None
        Client(cls.url, token=cls.token).wait_ready(60)

    def test_token_required(self):
        if not self.token:
            self.skipTest("SKYNET_TOKEN not set")
        for token in ("", "wrong-" + self.token):
            with self.assertRaises(SkynetError) as cm:
                Client(self.url, token=token or None, timeout=10).score(cases(1)) if token else bare_client(self.url).score(cases(1))
            self.assertEqual(cm.exception.status, 401, cm.exception)


def bare_client(url):
    c = Client(url, timeout=10)
    c.token = None  # not even SKYNET_TOKEN or SKYNET_SERVE_TOKEN from the environment
    return c


class StandinServerTest(ApiTests, unittest.TestCase):
    def setUp(self):
        self.server = Standin()
        self.url = self.server.url

    def tearDown(self):
        self.server.stop()

    def test_429_is_retried_after_retry_after(self):
        self.server.busy, self.server.retry_after = 2, "0.3"
        t = time.monotonic()
        got = Client(self.url, timeout=10).score(cases(2))
        self.assertGreaterEqual(time.monotonic() - t, 0.6)
        self.assertEqual(len(got), 2)
        self.assertEqual([n for _, n in self.server.requests], [2, 2, 2])

    def test_429_retries_are_bounded(self):
        self.server.busy, self.server.retry_after = 10, "0"
        with self.assertRaises(SkynetError) as cm:
            Client(self.url, timeout=10, retries=3).score(cases(1))
        e = cm.exception
        self.assertEqual((e.status, e.retry_after, e.message), (429, 0.0, "too many cases in flight"))
        self.assertEqual(len(self.server.requests), 4)

    def test_retry_after_is_capped(self):
        self.server.busy, self.server.retry_after = 1, "3600"
        t = time.monotonic()
        Client(self.url, timeout=10, max_wait=0.1).score(cases(1))
        self.assertLess(time.monotonic() - t, 5)

    def test_async_429(self):
        self.server.busy, self.server.retry_after = 2, "0.1"

        async def main():
            ac = AsyncClient(self.url, timeout=10)
            try:
                return await ac.score(cases(3))
            finally:
                await ac.aclose()

        self.assertEqual(len(asyncio.run(main())), 3)
        self.assertEqual(len(self.server.requests), 3)

    def test_ndjson_429(self):
        self.server.busy, self.server.retry_after = 1, "0"
        self.assertEqual(len(list(Client(self.url).iter_score(cases(4)))), 4)
        self.server.busy = 2

        async def main():
            async with AsyncClient(self.url, timeout=10) as ac:
                return [r async for r in ac.iter_score(cases(5))]

        self.assertEqual(len(asyncio.run(main())), 5)

    def test_unfinished_stream_then_request(self):
        c = Client(self.url, timeout=10)
        it = c.iter_score(cases(5))
        self.assertEqual(next(it)["id"], "c0")  # left unfinished, still referenced
        self.assertEqual(len(c.score(cases(2))), 2)
        self.assertEqual([n for _, n in self.server.requests], [5, 2], "sent once, on a new connection")
        del it
        self.assertEqual(len(c.score(cases(1))), 1)

    def test_401(self):
        self.server.token = "s3cret"
        with self.assertRaises(SkynetError) as cm:
            bare_client(self.url).score(cases(1))
        self.assertEqual(cm.exception.status, 401)
        self.assertIn("bearer token", str(cm.exception))
        with self.assertRaises(SkynetError) as cm:
            Client(self.url, token="nope").rewards(["x"])
        self.assertEqual(cm.exception.status, 401)
        self.assertEqual(len(Client(self.url, token="s3cret").score(cases(2))), 2)
        old = os.environ.get("SKYNET_TOKEN")
        os.environ["SKYNET_TOKEN"] = "s3cret"
        try:
            self.assertEqual(len(Client(self.url).score(cases(1))), 1)
        finally:
            if old is None:
                del os.environ["SKYNET_TOKEN"]
            else:
                os.environ["SKYNET_TOKEN"] = old

    def test_413_halves_the_chunk(self):
        self.server.max_cases = 3
        got = Client(self.url).score(cases(10))
        self.assertEqual([r["id"] for r in got], [f"c{i}" for i in range(10)])
        streamed = list(Client(self.url).iter_score(cases(7)))
        self.assertEqual(len(streamed), 7)
        self.server.max_cases = 0
        with self.assertRaises(SkynetError) as cm:
            Client(self.url).score(cases(2))
        self.assertEqual(cm.exception.status, 413)

    def test_wait_ready_waits_for_200(self):
        self.server.ready = False
        c = Client(self.url)
        self.assertFalse(c.healthy())
        self.assertEqual(c.health()[0], 503)
        threading.Timer(0.3, lambda: setattr(self.server, "ready", True)).start()
        self.assertTrue(c.wait_ready(10))
        self.server.ready = False
        with self.assertRaisesRegex(SkynetError, "not ready after 0.2s: last /healthz: 503 loading"):
            c.wait_ready(0.2)

    def test_unreachable(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        c = Client(f"http://127.0.0.1:{port}", timeout=2)
        self.assertFalse(c.healthy())
        with self.assertRaises(SkynetError) as cm:
            c.score(cases(1))
        self.assertIsNone(cm.exception.status)
        self.assertIn("cannot reach", str(cm.exception))

    def test_connection_close_and_stale_keepalive(self):
        c = Client(self.url)
        self.server.close_after = True
        self.assertEqual(len(c.score(cases(2))), 2)
        self.assertEqual(len(c.score(cases(2))), 2)
        self.server.close_after = False
        c.score(cases(1))
        # the server goes away and comes back on the same port: the kept-alive
        # socket is stale, the client reconnects once
        port = self.server.server_address[1]
        self.server.stop()
        self.server = restart_on(port)
        self.assertEqual(len(c.score(cases(1))), 1)

    def test_url_forms(self):
        port = self.server.server_address[1]
        for url in (f"127.0.0.1:{port}", f"http://127.0.0.1:{port}/", f"http://127.0.0.1:{port}/v1/rewards"):
            self.assertEqual(Client(url).url, f"http://127.0.0.1:{port}")
            self.assertEqual(len(Client(url).score(cases(1))), 1)
        with self.assertRaises(ValueError):
            Client("ftp://x")

    def test_server_message_forms(self):
        self.assertEqual(sc._server_message('{"error": {"kind": "input", "message": "bad"}}', 400), "bad")
        self.assertEqual(sc._server_message('{"message": "m"}', 400), "m")
        self.assertEqual(sc._server_message("plain text\n", 500), "plain text")
        self.assertEqual(sc._server_message("", 502), "Bad Gateway")
        self.assertEqual(sc._retry_after("2"), 2.0)
        self.assertIsNone(sc._retry_after("soon"))
        self.assertLessEqual(sc._retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), 0.0)


class SeveralServersTest(unittest.TestCase):
    """A Client of several servers: chunks spread over them, and a request
    a server refuses, resets, cuts short or answers 503 goes to another,
    each case answered once in the results."""

    def setUp(self):
        self.servers = [Standin() for _ in range(3)]
        self.urls = [s.url for s in self.servers]

    def tearDown(self):
        for s in self.servers:
            s.stop()

    def sent(self):
        return [sum(n for _, n in s.requests) for s in self.servers]

    def test_a_connection_gone_mid_request_is_lost_not_an_error(self):
        # A send that failed once http.client had marked the request sent,
        # its socket gone (a server SIGKILLed mid-request, test_ray): there is
        # no early reply to read, and the request goes to another server.
        import http.client

        conn = http.client.HTTPConnection("127.0.0.1", 9)
        conn._HTTPConnection__state = http.client._CS_REQ_SENT
        self.assertIsNone(sc.Client._early_reply(conn))

    def check(self, got, n):
        self.assertEqual([r["id"] for r in got], [f"c{i}" for i in range(n)])
        want = [METRIC(c["input"], c["output"], c["expected"])[0] for c in cases(n)]
        self.assertEqual([r["score"] for r in got], want)

    def test_url_forms(self):
        c = Client(",".join(self.urls))
        self.assertEqual(c.urls, self.urls)
        self.assertEqual(c.url, ",".join(self.urls))
        self.assertEqual(Client(self.urls).urls, self.urls)
        self.assertEqual(Client(f" {self.urls[0]} , {self.urls[1]}").urls, self.urls[:2])
        with self.assertRaises(ValueError):
            Client(self.urls[0] + ",")
        self.assertEqual(repr(AsyncClient(self.urls)), f"AsyncClient({','.join(self.urls)!r})")

    def test_chunks_spread(self):
        got = Client(self.urls, timeout=10, chunk_size=10).score(cases(300))
        self.check(got, 300)
        sent = self.sent()
        self.assertEqual(sum(sent), 300, "each case sent once")
        self.assertTrue(all(n > 0 for n in sent), f"every server had chunks: {sent}")

    def test_one_request_at_a_time_goes_round(self):
        c = Client(self.urls, timeout=10)
        for i in range(6):
            self.assertEqual(len(c.score(cases(1))), 1)
        self.assertEqual(self.sent(), [2, 2, 2])

    def test_dead_server(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
        s.close()
        c = Client([dead] + self.urls[:1], timeout=5, chunk_size=5)
        self.check(c.score(cases(40)), 40)
        self.check(list(c.iter_score(cases(12))), 12)
        self.assertEqual(c.rewards(["a"], ["a"], ["x"])["rewards"], [0.0])
        self.assertEqual(self.sent()[0], 52)
        with self.assertRaises(SkynetError) as cm:
            Client([dead, dead], timeout=5).score(cases(1))
        self.assertIsNone(cm.exception.status)
        self.assertIn("cannot reach", str(cm.exception))

    def test_reset_goes_to_another(self):
        self.servers[0].reset = 3
        c = Client(self.urls[:2], timeout=10, chunk_size=4)
        self.check(c.score(cases(40)), 40)
        resets = 3 - self.servers[0].reset  # fewer once it is marked down
        self.assertGreaterEqual(resets, 1)
        self.assertEqual(sum(self.sent()[:2]) - 4 * resets, 40, "the reset chunks were sent again, the rest once")

    def test_stream_cut_goes_on_elsewhere(self):
        self.servers[0].cut_after = 3
        c = Client(self.urls[:2], timeout=10, chunk_size=10)
        # the first request goes to the first server (none in flight: in turn)
        self.check(list(c.iter_score(cases(10))), 10)
        self.assertEqual([[n for _, n in s.requests] for s in self.servers[:2]], [[10], [7]], "the 7 cases not answered went to the other server")

    def test_draining_goes_to_another_at_once(self):
        self.servers[0].draining = True
        c = Client(self.urls[:2], timeout=10, chunk_size=5)
        t = time.monotonic()
        self.check(c.score(cases(20)), 20)
        self.assertLess(time.monotonic() - t, 4, "no Retry-After wait while another server answers")

    def test_all_busy_waits(self):
        for s in self.servers:
            s.busy, s.retry_after = 1, "0.2"
        t = time.monotonic()
        self.check(Client(self.urls, timeout=10).score(cases(3)), 3)
        self.assertGreaterEqual(time.monotonic() - t, 0.2)

    def test_async(self):
        self.servers[1].reset = 2

        async def main():
            async with AsyncClient(self.urls, timeout=10, chunk_size=3) as ac:
                return await ac.score(cases(30)), [r async for r in ac.iter_score(cases(9))]

        got, streamed = asyncio.run(main())
        self.check(got, 30)
        self.check(streamed, 9)

    def test_health_of_all(self):
        c = Client(self.urls)
        self.assertTrue(c.wait_ready(5))
        self.servers[2].ready = False
        status, text = c.health()
        self.assertEqual(status, 503)
        self.assertTrue(text.startswith(self.urls[2] + ": "), text)
        self.assertFalse(c.healthy())
        self.assertEqual(c.metrics().count("# skynet server "), 3)


class Python39Test(unittest.TestCase):
    """The client supports Python 3.9: its files parse as 3.9 grammar (no
    match, no parenthesised context managers) and name no 3.10+ API."""

    NEWER = re.compile(r"\bzip\([^)]*strict=|\bmatch\s+\w+:|\bTaskGroup\b|\bExceptionGroup\b|\btomllib\b|\bdatetime\.UTC\b|\banext\(|\baiter\(|\bbit_count\(|\bkw_only=|\bslots=True|\bParamSpec\b|\bTypeAlias\b|\bSelf\b|\basyncio\.timeout\(|\bto_thread\b.*\|")
    UNION = re.compile(r"(?<![=!<>])\b\w+\s*\|\s*None\b|\bNone\s*\|\s*\w")

    def test_python39_syntax(self):
        for name in (os.path.join("skynet_client", "__init__.py"), "test_skynet_client.py", os.path.join("testdata", "metric.py")):
            with open(os.path.join(HERE, name), encoding="utf-8") as f:
                src = f.read()
            ast.parse(src, filename=name, feature_version=(3, 9))
            for n, line in enumerate(src.splitlines(), 1):
                if line.lstrip().startswith("#") or "NEWER = " in line or "UNION = " in line:
                    continue
                self.assertIsNone(self.NEWER.search(line), f"{name}:{n}: a 3.10+ API: {line.strip()}")
                self.assertIsNone(self.UNION.search(line), f"{name}:{n}: PEP 604 unions need 3.10 at run time: {line.strip()}")


def restart_on(port):
    deadline = time.monotonic() + 5
    while True:
        try:
            s = Standin.__new__(Standin)
            ThreadingHTTPServer.__init__(s, ("127.0.0.1", port), Handler)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    s.token, s.busy, s.retry_after, s.max_cases, s.ready, s.close_after, s.requests = None, 0, "0", None, True, False, []
    s.thread = threading.Thread(target=s.serve_forever, args=(0.05,), daemon=True)
    s.thread.start()
    return s


if __name__ == "__main__":
    unittest.main()
