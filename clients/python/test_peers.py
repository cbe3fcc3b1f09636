"""The peers' own code against skynet serve (unittest; the pinned test venv).

    SKYNET_URL=http://127.0.0.1:PORT SKYNET_BIN=bin/skynet SKYNET_METRIC=testdata/metric.py \
        bin/pyvenv/bin/python -m unittest -v test_peers

cmd/skynet/peers_test.go (TestPythonPeers) starts the server on
testdata/metric.py, without a token (OpenRLHF sends none), and runs this file
on the python of the pinned venv (build/pyvenv.sh), where DSPy, GEPA and
aiohttp are installed from build/python-test.lock. SKYNET_BIN is the skynet
binary, for `skynet score` on the same cases (results compared case by case)
and for servers of its own.

Run for real, from PyPI: DSPy (Evaluate, BootstrapFewShot, GEPA.compile and
its Flex call; ../../testdata/peers/dspy_calls.py), GEPA (optimize_anything).
OpenRLHF, verl and TRL pull torch, vLLM or DeepSpeed, so they are not
installed: the code of theirs that calls a reward is quoted below, from the
commits named, and run as it is written (aiohttp included); only torch is
modelled, by the one rule that matters here: torch.tensor's dtype inference.
"""

import asyncio
import inspect
import json
import logging
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "testdata", "peers"))

import skynet_client as sc  # noqa: E402
from skynet_client import Client  # noqa: E402

for _name in ("dspy", "gepa", "LiteLLM", "httpx"):  # their INFO lines are each iteration's chatter
    logging.getLogger(_name).setLevel(logging.WARNING)

URL = os.environ.get("SKYNET_URL")
BIN = os.environ.get("SKYNET_BIN")
METRIC = os.environ.get("SKYNET_METRIC", os.path.join(HERE, "testdata", "metric.py"))


def skynet_score(cases):
    """`skynet score` on cases (dicts as case-file lines): its results, by
    id, as the plain reference for what the server answered."""
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        for c in cases:
            f.write(json.dumps(c) + "\n")
    try:
        out = subprocess.run([BIN, "score", "--metric", METRIC, "--data", f.name, "--processes", "1"], capture_output=True, text=True, timeout=120)
    finally:
        os.unlink(f.name)
    results = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
    if len(results) != len(cases):
        raise AssertionError(f"skynet score: {len(results)} results for {len(cases)} cases: {out.stderr}")
    return {r["id"]: r for r in results}


class ServeProcess:
    """A skynet serve of its own on a free port, from its "listening on"
    line (the port opens before the metric has loaded)."""

    def __init__(self, metric, *args):
        self.proc = subprocess.Popen([BIN, "serve", "--metric", metric, "--listen", "127.0.0.1:0", "--processes", "1", *args], stderr=subprocess.PIPE, text=True)
        self.lines = []
        line = self.proc.stderr.readline()
        self.lines.append(line)
        m = re.search(r"listening on (http://\S+)", line)
        if not m:
            self.stop()
            raise AssertionError(f"skynet serve: {line}{self.proc.stderr.read()}")
        self.url = m.group(1)
        self.drain = threading.Thread(target=self._drain, daemon=True)
        self.drain.start()

    def _drain(self):
        for line in self.proc.stderr:
            self.lines.append(line)

    def stop(self):
        self.proc.kill()
        self.proc.wait()
        if getattr(self, "drain", None) is not None:
            self.drain.join(10)
        self.proc.stderr.close()


def slow_metric(dirname, seconds):
    """A metric.py that takes seconds to import (a model or a big table),
    then scores as testdata/metric.py does."""
    path = os.path.join(dirname, "slow_metric.py")
    with open(METRIC) as f:
        body = f.read()
    with open(path, "w") as f:
        f.write(f"import time\ntime.sleep({seconds})\n" + body)
    return path


@unittest.skipUnless(URL and BIN, "set SKYNET_URL (a skynet serve on testdata/metric.py) and SKYNET_BIN")
class PeersTest(unittest.TestCase):
    pass


# ------------------------------------------------------------------ DSPy


class DSPyTest(PeersTest):
    """dspy_metric under DSPy's own callers (testdata/peers/dspy_calls.py)."""

    @classmethod
    def setUpClass(cls):
        import dspy_calls

        cls.dspy_calls = dspy_calls
        cls.got = dspy_calls.drive(sc.dspy_metric(URL))

    def test_evaluate_scores_are_skynet_scores(self):
        self.dspy_calls.check_evaluate(self.got, lambda cases: [skynet_score(cases)[c["id"]] for c in cases])

    def test_bootstrap_keeps_only_scored_demos(self):
        self.dspy_calls.check_bootstrap(self.got)

    def test_gepa_gets_feedback_and_objectives_in_every_call_form(self):
        self.dspy_calls.check_gepa(self.got)

    def test_flex_call_reads_feedback(self):
        self.dspy_calls.check_flex(self.got)

    def test_dspy_internal_fields_are_not_expected(self):
        self.dspy_calls.check_expected_keys(self.got)

    def test_failed_case_and_raise_errors(self):
        import dspy

        gold = dspy.Example(question="q", label="x").with_inputs("question")
        out = sc.dspy_metric(URL)(gold, dspy.Prediction(label="boom"))
        self.assertEqual((float(out), bool(out)), (0.0, False))
        self.assertIn("boom requested", out.feedback)
        self.assertEqual(float(sc.dspy_metric(URL, failure_score=-1.0)(gold, dspy.Prediction(label="boom"))), -1.0)
        with self.assertRaisesRegex(sc.SkynetError, "boom requested"):
            sc.dspy_metric(URL, raise_errors=True)(gold, dspy.Prediction(label="boom"))

    def test_pickles(self):
        # GEPA's run_dir state and DSPy's saved results pickle what a metric returned
        import pickle

        import dspy

        out = sc.dspy_metric(URL)(dspy.Example(question="q", label="x").with_inputs("question"), dspy.Prediction(label="x"))
        back = pickle.loads(pickle.dumps(out))
        self.assertEqual((type(back).__name__, float(back), back.feedback), ("DSPyScore", 1.0, "Correct."))


# ------------------------------------------------------------------ GEPA


class GEPATest(PeersTest):
    """gepa.optimize_anything with gepa_evaluator and gepa_batch_evaluator:
    the reflection LM is a function (gepa's LanguageModel protocol) that
    proposes the fix only once skynet's feedback says what is wrong."""

    DATA = [{"input": {"x": x}, "expected": {"label": x.upper() + "!"}} for x in "abcdef"]
    SEED = "Repeat the letter."
    FIX = "Repeat the letter in upper case, then exclaim."

    @staticmethod
    def run_candidate(candidate, example):
        out = example["input"]["x"]
        if "upper case" in candidate:
            out = out.upper()
        if "exclaim" in candidate:
            out += "!"
        return out

    def optimize(self, **evaluators):
        from gepa.optimize_anything import EngineConfig, GEPAConfig, ReflectionConfig, optimize_anything

        prompts = []

        def reflection_lm(prompt):
            text = prompt if isinstance(prompt, str) else json.dumps(prompt)
            prompts.append(text)
            return f"```\n{self.FIX if 'Expected' in text else self.SEED}\n```"

        config = GEPAConfig(engine=EngineConfig(max_metric_calls=40, parallel=False, seed=0), reflection=ReflectionConfig(reflection_lm=reflection_lm))
        result = optimize_anything(self.SEED, dataset=self.DATA[:3], valset=self.DATA[3:], config=config, **evaluators)
        return result, prompts

    def check(self, result, prompts):
        self.assertEqual(result.val_aggregate_scores[0], 0.0, "the seed scores 0")
        self.assertEqual(result.best_candidate, self.FIX)
        self.assertEqual(result.val_aggregate_scores[result.best_idx], 1.0, "optimization raised the validation score")
        self.assertTrue(any("Expected 'A!', got 'a'." in p or "Expected 'B!', got 'b'." in p or "Expected 'C!', got 'c'." in p for p in prompts), "skynet's feedback reached the reflection prompt")

    def test_evaluator(self):
        self.check(*self.optimize(evaluator=sc.gepa_evaluator(URL, self.run_candidate)))

    def test_batch_evaluator(self):
        self.check(*self.optimize(batch_evaluator=sc.gepa_batch_evaluator(URL, self.run_candidate)))


# ------------------------------------------------------------------ OpenRLHF

# OpenRLHF/OpenRLHF at 3c3be6234e0cb353e76bb8019947db9dfe99fca7,
# openrlhf/utils/agent.py, SingleTurnAgentExecutor._fetch_rewards_via_http,
# as written there (self.reward_endpoints is the comma-split
# --reward.remote_url; SingleTurnAgentExecutor.execute calls it with one
# sample: [query], [prompt], [label]).


class _OpenRLHFExecutor:
    def __init__(self, reward_endpoints):
        self.reward_endpoints = reward_endpoints

    async def _fetch_rewards_via_http(self, queries_list, prompts_list, labels_list):
        """HTTP fallback: shard requests across servers."""
        import aiohttp

        num_servers = len(self.reward_endpoints)
        batch_size = (len(queries_list) + num_servers - 1) // num_servers
        timeout = aiohttp.ClientTimeout(total=180)

        tasks = []
        for i, rm in enumerate(self.reward_endpoints):
            start_idx = i * batch_size
            end_idx = min((i + 1) * batch_size, len(queries_list))
            payload = {
                "query": queries_list[start_idx:end_idx],
                "prompts": prompts_list[start_idx:end_idx],
                "labels": labels_list[start_idx:end_idx],
            }

            async def _post_request(url, data, try_max_times=5):
                for _ in range(try_max_times):
                    try:
                        async with aiohttp.ClientSession(timeout=timeout) as session:
                            async with session.post(url, json=data) as response:
                                response.raise_for_status()
                                return await response.json()
                    except aiohttp.ClientError:
                        pass  # logger.info(f"Request error, please check: {e}")
                    except Exception:  # pragma: no cover - defensive
                        pass
                    await asyncio.sleep(1)

                raise RuntimeError(f"Request error for {try_max_times} times, returning None. Please check the API server.")

            tasks.append(asyncio.create_task(_post_request(rm, payload)))
        return await asyncio.gather(*tasks)


def torch_tensor_dtype(value):
    """torch.tensor(value)'s dtype when value is nested lists of Python
    numbers (torch/csrc/utils/tensor_new.cpp, infer_scalar_type): bool when
    every item is a bool, int64 when every item is an int, else the default
    float dtype, float32. OpenRLHF makes its reward tensors this way."""
    leaves = []

    def walk(v):
        if isinstance(v, (list, tuple)):
            for x in v:
                walk(x)
        else:
            leaves.append(v)

    walk(value)
    if all(isinstance(x, bool) for x in leaves):
        return "bool"
    if all(isinstance(x, int) and not isinstance(x, bool) for x in leaves):
        return "int64"
    return "float32"


def group_norm_advantages(rewards, n_samples_per_prompt):
    """openrlhf/trainer/ppo_utils/experience_maker.py,
    compute_advantages_and_returns, for the group_norm estimator (GRPO):
    rewards.reshape(-1, n); (rewards - mean) / (rewards.std(-1) + 1e-9),
    std unbiased as torch's. torch raises on an integer tensor here:
    "std and var only support floating point and complex dtypes"."""
    dtype = torch_tensor_dtype(rewards)
    if dtype != "float32":
        raise RuntimeError(f"std and var only support floating point and complex dtypes (rewards are {dtype})")
    out = []
    for g in range(0, len(rewards), n_samples_per_prompt):
        group = [r[0] for r in rewards[g : g + n_samples_per_prompt]]
        mean, std = statistics.fmean(group), statistics.stdev(group)
        out.extend((r - mean) / (std + 1e-9) for r in group)
    return out


class OpenRLHFTest(PeersTest):
    def rollout(self, endpoints, samples):
        """Each sample through _fetch_rewards_via_http on its own, as
        execute() does, concurrently as the rollout executors run."""
        ex = _OpenRLHFExecutor(endpoints)

        async def one(query, prompt, label):
            rewards_info = (await ex._fetch_rewards_via_http([query], [prompt], [label]))[0]
            # execute(): reward=rewards_info.get("rewards"), scores=... or rewards, extra_logs=...
            score_value = rewards_info.get("scores")
            if score_value is None:
                score_value = rewards_info.get("rewards")
            return rewards_info.get("rewards"), score_value, rewards_info.get("extra_logs") or {}

        async def main():
            return await asyncio.gather(*(one(*s) for s in samples))

        return asyncio.run(main())

    def samples(self, prompts=4, n=8):
        """n samples a prompt, each right or wrong: all-0/1 rewards."""
        out = []
        for p in range(prompts):
            prompt = f"Ticket {p}: classify.\nLabel: "
            for k in range(n):
                right = (p + k) % 3 == 0 if p < prompts - 1 else True  # the last group: all right, std 0
                out.append((prompt + ("bug" if right else "feature") + "<|im_end|>", prompt, "bug<|im_end|>"))
        return out

    def test_rewards_make_float_tensors_and_advantages(self):
        samples = self.samples()
        got = self.rollout([URL + "/v1/rewards"], samples)
        rewards = [r for r, _, _ in got]
        # samples_generator.py: info["reward"] = torch.tensor([reward_val]), rewards=torch.tensor([reward_val])
        self.assertEqual(torch_tensor_dtype([rewards[0]]), "float32", f"a reward crosses as {rewards[0]!r}: whole numbers must be written 1.0, not 1")
        for _, _, extra in got:
            for key, value in extra.items():
                self.assertEqual(torch_tensor_dtype([value]), "float32", f"extra_logs[{key!r}] = {value!r}")
        # each sample's reward is the reply's list for its one query, [r]:
        # torch.cat of the torch.tensor([[r]])s, reshaped to groups of 8
        adv = group_norm_advantages(rewards, 8)
        self.assertEqual(len(adv), len(samples))
        self.assertTrue(all(math.isfinite(a) for a in adv))
        self.assertEqual(adv[-8:], [0.0] * 8, "a group whose samples all score the same has advantage 0")
        cases = [{"id": str(i), "input": {"prompt": p}, "output": q[len(p):], "expected": {"label": label}} for i, (q, p, label) in enumerate(samples)]
        want = skynet_score(cases)
        self.assertEqual([r[0] for r in rewards], [float(want[str(i)]["score"]) for i in range(len(samples))])

    def test_int_rewards_would_stop_training(self):
        # what the server wrote before: the same values as ints
        with self.assertRaisesRegex(RuntimeError, "std and var only support floating point"):
            group_norm_advantages([[1], [0]] * 4, 8)

    def test_several_urls_split_evenly(self):
        # two servers: one sample a request goes to the first, the second
        # gets empty lists and must answer them
        second = ServeProcess(METRIC)
        try:
            Client(second.url).wait_ready(60)
            got = self.rollout([URL + "/v1/rewards", second.url + "/v1/rewards"], self.samples(prompts=2, n=4))
            self.assertEqual(len(got), 8)
            ex = _OpenRLHFExecutor([URL + "/v1/rewards", second.url + "/v1/rewards"])
            both = asyncio.run(ex._fetch_rewards_via_http(["a", "b", "c"], ["", "", ""], ["a", "x", "c"]))
            self.assertEqual([b["rewards"] for b in both], [[1.0, 0.0], [1.0]])
        finally:
            second.stop()

    def test_a_loading_server_is_retried_not_refused(self):
        # the port opens at once and answers 503 while the metric loads;
        # OpenRLHF's 5 tries 1 s apart outlast a 2 s import
        with tempfile.TemporaryDirectory() as d:
            slow = ServeProcess(slow_metric(d, 2))
            try:
                got = self.rollout([slow.url + "/v1/rewards"], [("Q: A: bug", "Q: A: ", "bug")])
                self.assertEqual(got[0][0], [1.0])
            finally:
                slow.stop()


# ------------------------------------------------------------------ verl

# volcengine/verl at b178a3cd56f58b2d502255daba591e92833930a7.


def verl_naive_reward(compute_score, items):
    """verl/workers/reward_manager/naive.py, NaiveRewardManager.__call__:
    one compute_score call a sample, its float (or dict's "score") put into
    the reward tensor."""
    rewards = []
    for data_source, response_str, ground_truth, extra_info in items:
        score = compute_score(
            data_source=data_source,
            solution_str=response_str,
            ground_truth=ground_truth,
            extra_info=extra_info,
        )
        if isinstance(score, dict):
            reward = score["score"]
        else:
            reward = score
        rewards.append(reward)
    return rewards


async def verl_reward_loop_run_single(compute_score, data_source, response_str, ground_truth, extra_info, loop):
    """verl/experimental/reward_loop/reward_manager/naive.py,
    NaiveRewardManager.run_single: awaited when compute_score is a coroutine
    function, else run in the loop's executor."""
    extra_reward_kwargs = {}
    if inspect.iscoroutinefunction(compute_score):
        result = await compute_score(data_source=data_source, solution_str=response_str, ground_truth=ground_truth, extra_info=extra_info, **extra_reward_kwargs)
    else:
        result = await loop.run_in_executor(None, lambda: compute_score(data_source=data_source, solution_str=response_str, ground_truth=ground_truth, extra_info=extra_info, **extra_reward_kwargs))
    if isinstance(result, dict):
        score = result["score"]
    else:
        score = result
    return {"reward_score": score, "reward_extra_info": {"acc": score}}


class VerlTest(PeersTest):
    ITEMS = [("tickets", out, want, {"index": i, "num_turns": None, "rollout_reward_scores": {}}) for i, (out, want) in enumerate([("bug", "bug"), ("feature", "bug"), ("boom", "x"), ("x", "x")])]

    def reference(self):
        cases = [{"id": str(i), "input": {"data_source": ds, "extra_info": ei}, "output": out, "expected": {"label": want}} for i, (ds, out, want, ei) in enumerate(self.ITEMS)]
        want = skynet_score(cases)
        return [0.0 if want[str(i)]["error"] else float(want[str(i)]["score"]) for i in range(len(cases))]

    # the metric reads expected["label"]: to_case maps verl's ground_truth to it
    @staticmethod
    def to_case(data_source, solution_str, ground_truth, extra_info):
        return {"input": {"data_source": data_source, "extra_info": extra_info}, "output": solution_str, "expected": {"label": ground_truth}}

    def test_sync_compute_score(self):
        got = verl_naive_reward(sc.verl_compute_score(URL, to_case=self.to_case), self.ITEMS)
        self.assertEqual(got, self.reference())
        self.assertTrue(all(type(r) is float for r in got))

    def test_async_compute_score(self):
        fn = sc.verl_compute_score(URL, asynchronous=True, to_case=self.to_case)
        self.assertTrue(inspect.iscoroutinefunction(fn))

        async def main():
            loop = asyncio.get_running_loop()
            return await asyncio.gather(*(verl_reward_loop_run_single(fn, *item, loop) for item in self.ITEMS))

        got = [r["reward_score"] for r in asyncio.run(main())]
        self.assertEqual(got, self.reference())

    def test_default_case(self):
        # without to_case: expected {"ground_truth": ...}; extra kwargs accepted
        r = sc.verl_compute_score(URL)(data_source="d", solution_str="x", ground_truth="x", extra_info=None, reward_router_address="h:1")
        self.assertEqual(r, 0.0)  # testdata/metric.py reads expected["label"], absent here


# ------------------------------------------------------------------ TRL

# huggingface/trl at f2cd57710ae345ea6428ae95363267fcf38a3dc8,
# trl/trainer/grpo_trainer.py, GRPOTrainer._calculate_rewards: the dataset's
# other columns as lists, plus trainer_state, log_extra and log_metric; a
# sync reward function is called in place, an async one gathered on the
# trainer's event loop thread (asyncio.run_coroutine_threadsafe).


def trl_calculate_rewards(reward_funcs, inputs, prompts, completions, completion_ids_list, async_loop, extra_logs):
    keys = [key for key in inputs[0] if key not in ["prompt", "completion", "completion_ids"]]
    reward_kwargs = {key: [example[key] for example in inputs] for key in keys}
    reward_kwargs["trainer_state"] = object()
    reward_kwargs["log_extra"] = lambda column, values: extra_logs.setdefault(column, []).extend(values)
    reward_kwargs["log_metric"] = lambda name, value: None
    rewards_per_func = [[None] * len(reward_funcs) for _ in prompts]
    async_funcs_info = []
    for i, reward_func in enumerate(reward_funcs):
        if inspect.iscoroutinefunction(reward_func):
            async_funcs_info.append((i, reward_func))
        else:
            output_reward_func = reward_func(prompts=prompts, completions=completions, completion_ids=completion_ids_list, **reward_kwargs)
            output_reward_func = [reward if reward is not None else math.nan for reward in output_reward_func]
            for row, r in enumerate(output_reward_func):
                rewards_per_func[row][i] = r  # torch.tensor(output_reward_func, dtype=torch.float32)
    if async_funcs_info:

        async def _invoke_async(index, func):
            output = await func(prompts=prompts, completions=completions, completion_ids=completion_ids_list, **reward_kwargs)
            output = [r if r is not None else math.nan for r in output]
            return index, output

        async def _run_async_funcs():
            return await asyncio.gather(*[_invoke_async(i, func) for (i, func) in async_funcs_info])

        for idx, output_reward_func in asyncio.run_coroutine_threadsafe(_run_async_funcs(), async_loop).result():
            for row, r in enumerate(output_reward_func):
                rewards_per_func[row][idx] = r
    return rewards_per_func


class TRLTest(PeersTest):
    def setUp(self):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def tearDown(self):
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()

    def test_sync_and_async_reward_funcs(self):
        # a conversational dataset: prompts and completions are messages
        inputs = [{"prompt": [{"role": "user", "content": f"ticket {i}"}], "label": "bug" if i % 2 else "feature", "task": "tickets"} for i in range(6)]
        prompts = [x["prompt"] for x in inputs]
        answers = ["bug", "bug", "feature", "bug", "boom", "bug"]
        completions = [[{"role": "assistant", "content": a}] for a in answers]
        extra = {}
        funcs = [sc.trl_reward_func(URL), sc.trl_reward_func(URL, asynchronous=True, name="skynet_async", failure_score=None)]
        got = trl_calculate_rewards(funcs, inputs, prompts, completions, [[1, 2]] * 6, self.loop, extra)
        cases = [{"id": str(i), "input": {"prompt": p}, "output": a, "expected": {"label": x["label"], "task": "tickets"}} for i, (x, p, a) in enumerate(zip(inputs, prompts, answers))]
        want = skynet_score(cases)
        ref = [None if want[str(i)]["error"] else float(want[str(i)]["score"]) for i in range(6)]
        self.assertEqual([row[0] for row in got], [0.0 if r is None else r for r in ref])
        self.assertTrue(math.isnan(got[4][1]), "failure_score=None: TRL reads None as NaN, not applicable")
        self.assertEqual([row[1] for i, row in enumerate(got) if i != 4], [r for i, r in enumerate(ref) if i != 4])
        self.assertEqual(extra["skynet_feedback"], [want[str(i)]["feedback"] for i in range(6)])
        self.assertEqual(len(extra["skynet_async_feedback"]), 6)
        self.assertEqual((funcs[0].__name__, funcs[1].__name__), ("skynet", "skynet_async"))


# ------------------------------------------------------------------ the client's own fixes


class ClientFixesTest(PeersTest):
    def test_413_reaches_the_halving(self):
        # a body far past --max-body: the server answers 413 and closes
        # while the client still sends; the client reads that reply and
        # halves until the server takes the chunks
        small = ServeProcess(METRIC, "--max-body", "200000")
        try:
            c = Client(small.url)
            c.wait_ready(60)
            # 9 MB a request, 45 times the limit: well past what the
            # sockets' buffers take in before the server closes
            n = 60000
            cases = [{"id": str(i), "input": {"pad": "x" * 100}, "output": "l", "expected": {"label": "l"}} for i in range(n)]
            got = c.score(cases, chunk_size=n)
            self.assertEqual([r["id"] for r in got], [str(i) for i in range(n)])
            self.assertTrue(all(r["score"] == 1.0 for r in got))
            streamed = list(c.iter_score(cases[: n // 2], chunk_size=n // 2))
            self.assertEqual([r["id"] for r in streamed], [str(i) for i in range(n // 2)])
        finally:
            small.stop()

    def test_wait_ready_waits_through_loading(self):
        with tempfile.TemporaryDirectory() as d:
            slow = ServeProcess(slow_metric(d, 2))
            try:
                c = Client(slow.url)
                status, text = c.health()
                self.assertEqual((status, text), (503, "loading\n"))
                with self.assertRaises(sc.SkynetError) as cm:
                    Client(slow.url, retries=0).score([{"input": {}, "output": "x"}])
                self.assertEqual((cm.exception.status, cm.exception.retry_after), (503, 1.0))
                self.assertTrue(c.wait_ready(60))
                self.assertEqual(c.score([{"input": {}, "output": "x", "expected": {"label": "x"}}])[0]["score"], 1.0)
            finally:
                slow.stop()

    def test_scores_are_floats(self):
        got = Client(URL).score([{"input": {}, "output": "l", "expected": {"label": "l"}}])[0]
        self.assertIs(type(got["score"]), float)
        self.assertTrue(all(type(v) is float for v in got["scores"].values()))
        r = Client(URL).rewards(["a", "b"], ["", ""], ["a", "x"])
        for key in ("rewards", "scores"):
            self.assertEqual([type(v) for v in r[key]], [float, float], key)
        self.assertEqual([type(v) for v in r["extra_logs"]["failed"]], [float, float])


if __name__ == "__main__":
    unittest.main()
