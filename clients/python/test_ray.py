"""skynet_client.ray on a real local Ray cluster of two nodes (make test-ray:
build/test-ray.sh starts the head and a second node on loopback, then runs
this file). Every result is compared case by case with `skynet score`'s.

    SKYNET_BIN=bin/skynet RAY_ADDRESS=127.0.0.1:PORT RAY_DASHBOARD=http://127.0.0.1:DPORT \\
        python -m unittest -v test_ray
"""

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import ray  # noqa: E402

from skynet_client import Client  # noqa: E402
from skynet_client.ray import start_servers  # noqa: E402

SKYNET = os.path.abspath(os.environ.get("SKYNET_BIN", os.path.join(ROOT, "bin", "skynet")))
METRIC = os.path.join(ROOT, "testdata", "exact_match", "metric.py")
N = 3000
COMPARED = ("id", "score", "feedback", "scores", "error")


def make_cases(path, n):
    with open(os.path.join(ROOT, "testdata", "exact_match", "cases.jsonl"), encoding="utf-8") as f:
        seed = [json.loads(l) for l in f if l.strip()]
    out = []
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            c = dict(seed[i % len(seed)], id=f"c{i}")
            out.append(c)
            f.write(json.dumps(c) + "\n")
    return out


def read_results(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(l) for l in f if l.strip()]


def same(test, got, want, what):
    test.assertEqual(len(got), len(want), what)
    for g, w in zip(got, want):
        test.assertEqual({k: g.get(k) for k in COMPARED}, {k: w.get(k) for k in COMPARED}, f"{what}: case {w['id']}")


@unittest.skipUnless(os.environ.get("RAY_ADDRESS"), "set RAY_ADDRESS (make test-ray starts a cluster)")
class RayTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        ray.init(address=os.environ["RAY_ADDRESS"], logging_level="WARNING", log_to_driver=False)
        cls.tmp = tempfile.mkdtemp(prefix="skynet-ray-")
        cls.data = os.path.join(cls.tmp, "cases.jsonl")
        cls.cases = make_cases(cls.data, N)
        ref = os.path.join(cls.tmp, "reference.jsonl")
        subprocess.run([SKYNET, "score", "--metric", METRIC, "--data", cls.data, "--out", ref], check=True, stdout=subprocess.DEVNULL)
        cls.want = read_results(ref)
        alive = [n for n in ray.nodes() if n["Alive"]]
        assert len(alive) == 2, f"want a cluster of two nodes, got {len(alive)}"
        # port 0: both nodes are this machine, so each server takes a free port
        cls.servers = start_servers(METRIC, skynet=SKYNET, port=0, processes=1, ready_timeout=120)

    @classmethod
    def tearDownClass(cls):
        cls.servers.shutdown(drain_timeout=10)
        ray.shutdown()

    def test_one_server_per_node(self):
        urls = self.servers.urls
        self.assertEqual(len(urls), 2)
        self.assertEqual(len(set(urls)), 2)
        self.assertEqual(len(set(self.servers.nodes)), 2, "one actor on each node")
        placed = ray.get([a.__ray_call__.remote(lambda self: ray.get_runtime_context().get_node_id()) for a in self.servers.actors])
        self.assertEqual(placed, self.servers.nodes, "each actor runs on its node")
        for u in urls:
            self.assertTrue(Client(u).healthy(), u)

    def test_servers_match_score(self):
        got = self.servers.client(chunk_size=100).score(self.cases)
        same(self, got, self.want, "Client(servers.urls).score")

    def test_server_killed_mid_run(self):
        """SIGKILL one node's skynet serve while a score call runs on both:
        the client sends what it lost to the other, nothing is lost or
        doubled, and Ray restarts the actor, which serves again."""
        client = self.servers.client(chunk_size=10, timeout=60)
        victim = self.servers.actors[1]
        old_pid = ray.get(victim.pid.remote())
        victim_url = ray.get(victim.url.remote())
        before = _scored(victim_url)
        # ten times the cases (new ids, the same answers): long enough to
        # be killed in the middle on this machine
        cases = [dict(c, id=f"{c['id']}-{k}") for k in range(10) for c in self.cases]
        want = [dict(w, id=f"{w['id']}-{k}") for k in range(10) for w in self.want]
        out = {}

        def run():
            try:
                out["results"] = client.score(cases)
            except BaseException as e:  # reported below
                out["error"] = e

        t = threading.Thread(target=run)
        t.start()
        deadline = time.monotonic() + 30
        while _scored(victim_url) < before + 500:  # the victim is serving the run
            self.assertLess(time.monotonic(), deadline, "the run never reached the victim")
            time.sleep(0.01)
        os.kill(old_pid, signal.SIGKILL)
        self.assertTrue(t.is_alive(), "the kill came after the run: make it longer")
        t.join(300)
        self.assertNotIn("error", out, out.get("error"))
        same(self, out["results"], want, "score with a server killed mid-run")

        deadline = time.monotonic() + 60
        while True:  # the actor restarts with a new server
            try:
                new_pid = ray.get(victim.pid.remote(), timeout=30)
            except Exception:
                new_pid = None
            if new_pid and new_pid != old_pid:
                break
            self.assertLess(time.monotonic(), deadline, "the serving actor was not restarted")
            time.sleep(0.5)
        url = ray.get(victim.url.remote(), timeout=60)
        Client(url).wait_ready(60)
        same(self, Client(url).score(self.cases[:50]), self.want[:50], "the restarted server")

    def test_actor_killed_takes_its_server(self):
        """ray.kill of a serving actor (as when its worker dies): its server
        goes with it (no orphan holding the port), and Ray restarts both."""
        victim = self.servers.actors[0]
        old_pid = ray.get(victim.pid.remote())
        ray.kill(victim, no_restart=False)
        deadline = time.monotonic() + 30
        while _alive(old_pid):
            self.assertLess(time.monotonic(), deadline, f"skynet serve {old_pid} outlived its actor")
            time.sleep(0.1)
        urls = self.servers.urls  # waits for the restarted actor
        self.assertEqual(len(urls), 2)
        same(self, Client(urls[0]).score(self.cases[:20]), self.want[:20], "the restarted server")

    def test_ray_job_shards(self):
        """deploy/ray/score_job.py submitted as a Ray job: 4 shards on the
        two nodes, merged in the case file's order, as skynet score."""
        out_dir = os.path.join(self.tmp, "job")
        env = {"env_vars": {"PYTHONPATH": HERE}}
        cmd = [
            sys.executable, "-m", "ray.scripts.scripts", "job", "submit",
            "--address", os.environ["RAY_DASHBOARD"],
            "--runtime-env-json", json.dumps(env),
            "--", sys.executable, os.path.join(ROOT, "deploy", "ray", "score_job.py"),
            "--skynet", SKYNET, "--metric", METRIC, "--data", self.data, "--out-dir", out_dir, "--shards", "4",
            "--", "--processes", "1",
        ]
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
        self.assertEqual(p.returncode, 0, p.stdout[-4000:])
        self.assertIn(f"skynet ray job: {N} case(s), 0 failed", p.stdout)
        parts = sorted(f for f in os.listdir(out_dir) if f.startswith("results-") and f.endswith(".jsonl"))
        self.assertEqual(len(parts), 4, parts)
        for part in parts:  # each says what made it, as skynet score --out records
            self.assertTrue(os.path.exists(os.path.join(out_dir, part + ".meta.json")), part)
        self.assertTrue(os.path.exists(os.path.join(out_dir, "results.jsonl.meta.json")), "skynet merge --out records it too")
        same(self, read_results(os.path.join(out_dir, "results.jsonl")), self.want, "the Ray job's merged results")


def _scored(url):
    for line in Client(url).metrics().splitlines():
        if line.startswith("skynet_cases_scored_total "):
            return int(line.split()[1])
    return 0


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


if __name__ == "__main__":
    unittest.main()
