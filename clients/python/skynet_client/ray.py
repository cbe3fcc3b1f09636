"""skynet on a Ray cluster (what verl and OpenRLHF run on): one ``skynet serve``
per node as a Ray actor, and batch scoring as a Ray job of ``skynet score
--shard`` tasks. Needs ``ray`` (``pip install "skynet-client[ray]"``); the rest
of skynet_client does not import this module.

    import ray
    from skynet_client.ray import start_servers, score_shards
    ray.init(address="auto")
    servers = start_servers("/shared/metric.py", skynet="/shared/skynet", processes=4)
    client = servers.client()           # a Client of every node's server, with failover
    rewards = client.score(cases)
    servers.shutdown()

    # batch: shard i of N on some node, --resume on a retry, then merged
    merged = score_shards("/shared/metric.py", "/shared/cases.jsonl", "/shared/out", skynet="/shared/skynet")

The skynet binary, the metric and the case file must be at the same path on
every node (a shared filesystem, or baked into the image), as for Slurm.
"""

from __future__ import annotations

import ctypes
import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Dict, List, Optional, Sequence

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from . import Client

__all__ = ["start_servers", "SkynetServers", "score_shards", "ShardError"]

_LISTENING = re.compile(r"skynet serve: listening on http://\S+?:(\d+)")
_READY = "skynet serve: ready on http://"


def _die_with_parent():
    """In the server's process before exec: SIGTERM when the actor's process
    dies, so an actor killed by Ray leaves no server holding its port."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _tail(lines, n=20):
    return "".join(lines[-n:]).strip()


class _ServeActor:
    """One node's ``skynet serve``: started in __init__ (ready when it
    returns), watched by a thread; when the server dies the actor's process
    exits, and Ray restarts the actor, which starts a new server."""

    def __init__(self, argv: List[str], port: int, env: Optional[Dict[str, str]], ready_timeout: float):
        exe = shutil.which(argv[0]) or argv[0]
        if not os.path.isfile(exe):
            raise RuntimeError(f"skynet serve on node {ray.util.get_node_ip_address()}: no skynet binary at {argv[0]!r} (it must be at the same path on every node)")
        full_env = dict(os.environ)
        full_env.update(env or {})
        self.proc = subprocess.Popen(
            [exe] + argv[1:] + ["--listen", f"0.0.0.0:{port}"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=full_env,
            text=True,
            preexec_fn=_die_with_parent,
        )
        self.stopping = False
        lines: List[str] = []
        bound = None
        deadline = time.monotonic() + ready_timeout
        timer = threading.Timer(ready_timeout, self.proc.kill)  # a server that never gets ready
        timer.start()
        try:
            for line in self.proc.stderr:
                lines.append(line)
                m = _LISTENING.search(line)
                if m:
                    bound = int(m.group(1))
                if _READY in line:
                    break
        finally:
            timer.cancel()
        if bound is None or self.proc.poll() is not None or time.monotonic() > deadline:
            self.proc.kill()
            raise RuntimeError(f"skynet serve on node {ray.util.get_node_ip_address()} did not get ready:\n{_tail(lines)}")
        self._url = f"http://{ray.util.get_node_ip_address()}:{bound}"
        threading.Thread(target=self._watch, daemon=True).start()

    def _watch(self):
        for line in self.proc.stderr:  # the server's notices, in the actor's log
            sys.stderr.write(line)
        code = self.proc.wait()
        if not self.stopping:
            sys.stderr.write(f"skynet serve exited ({code}): restarting its actor\n")
            sys.stderr.flush()
            os._exit(1)  # Ray restarts the actor (max_restarts=-1), and with it the server

    def url(self) -> str:
        return self._url

    def pid(self) -> int:
        return self.proc.pid

    def stop(self, timeout: float) -> int:
        """SIGTERM: the server drains (answers what is in flight) and exits."""
        self.stopping = True
        self.proc.terminate()
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


class SkynetServers:
    """The serving actors start_servers made, one per node."""

    def __init__(self, actors: List[Any], nodes: List[str], ready_timeout: float):
        self.actors, self.nodes, self.ready_timeout = actors, nodes, ready_timeout

    @property
    def urls(self) -> List[str]:
        """Each node's server URL, asked of its actor now: an actor being
        restarted answers once its new server is ready (with port=0 its URL
        may then differ)."""
        return ray.get([a.url.remote() for a in self.actors], timeout=self.ready_timeout)

    def client(self, **kwargs: Any) -> Client:
        """A Client of every server: requests go to the least busy, and
        one refused, reset or cut short goes to another."""
        return Client(self.urls, **kwargs)

    def shutdown(self, drain_timeout: float = 60.0) -> None:
        """Drains and stops every server, then its actor."""
        for a in self.actors:
            try:
                ray.get(a.stop.remote(drain_timeout), timeout=drain_timeout + 30)
            except Exception:
                pass
            ray.kill(a, no_restart=True)

    def __enter__(self) -> "SkynetServers":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()


def start_servers(
    metric: str,
    *,
    skynet: str = "skynet",
    args: Sequence[str] = (),
    port: int = 8765,
    processes: Optional[int] = None,
    num_cpus: Optional[float] = None,
    env: Optional[Dict[str, str]] = None,
    name: str = "skynet-serve",
    namespace: Optional[str] = None,
    ready_timeout: float = 300.0,
) -> SkynetServers:
    """Starts one ``skynet serve --metric metric`` on every alive node of
    the Ray cluster this driver is connected to, each in an actor pinned to
    its node (NodeAffinity, not soft) that Ray restarts when it or its
    server dies, and returns them once every server is ready.

    ``port``: each server's port on its node (0: a free one, which changes
    when the actor restarts; read ``SkynetServers.urls`` again). ``processes``:
    ``--processes`` of each server (None: one per CPU of its node). Each
    actor reserves ``num_cpus`` of its node (default: ``processes``, else 0).
    ``args``: more ``skynet serve`` flags (``--token``, ``--timeout`` ...);
    ``env``: more environment for the servers (``SKYNET_SERVE_TOKEN``).
    """
    if not ray.is_initialized():
        ray.init(address="auto")
    argv = [skynet, "serve", "--metric", metric] + list(args)
    if processes is not None:
        argv += ["--processes", str(processes)]
    if num_cpus is None:
        num_cpus = processes or 0
    _by_value()
    cls = ray.remote(_ServeActor)
    actors, nodes = [], []
    for node in ray.nodes():
        if not node.get("Alive"):
            continue
        node_id = node["NodeID"]
        actors.append(
            cls.options(
                name=f"{name}-{node_id[:12]}",
                namespace=namespace,
                num_cpus=num_cpus,
                max_restarts=-1,
                max_task_retries=-1,  # a call to a restarting actor waits for it
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node_id, soft=False),
            ).remote(argv, port, env, ready_timeout)
        )
        nodes.append(node_id)
    if not actors:
        raise RuntimeError("skynet: no alive Ray node to start skynet serve on")
    servers = SkynetServers(actors, nodes, ready_timeout)
    try:
        servers.urls  # every server ready, or the first failure raised
    except BaseException:
        for a in actors:
            ray.kill(a, no_restart=True)
        raise
    return servers


def _by_value():
    """Ships this module's actor and task code to the workers with them, so
    skynet_client need not be installed on every node, only where the
    driver runs."""
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])


class ShardError(RuntimeError):
    """A shard's skynet score failed as a run (exit 2 or worse: bad flags,
    a metric that does not load), not merely with failed cases."""


def _score_shard(argv: List[str]) -> Dict[str, Any]:
    proc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if proc.returncode not in (0, 1):  # 1: some cases failed, each has its result
        raise ShardError(f"{' '.join(argv)}: exit {proc.returncode}\n{proc.stderr.strip()[-4000:]}")
    return {"code": proc.returncode, "summary": proc.stdout.strip()[-2000:], "node": ray.util.get_node_ip_address()}


def score_shards(
    metric: str,
    data: str,
    out_dir: str,
    *,
    shards: Optional[int] = None,
    skynet: str = "skynet",
    args: Sequence[str] = (),
    num_cpus: float = 1,
    max_retries: int = 3,
) -> str:
    """Scores data in ``shards`` Ray tasks spread over the nodes (default:
    one per CPU of the cluster, at ``num_cpus`` a task), each ``skynet score
    --shard I/N --out out_dir/results-{shard}.jsonl --resume``; a task that
    fails is retried and resumes its shard. Then ``skynet merge`` writes
    out_dir/results.jsonl in the case file's order, and its path is returned.
    ``args``: more ``skynet score`` flags (``--processes`` per task ...).
    """
    if not ray.is_initialized():
        ray.init(address="auto")
    if shards is None:
        shards = max(1, int(ray.cluster_resources().get("CPU", 1) // max(num_cpus, 1e-9)))
    os.makedirs(out_dir, exist_ok=True)
    pattern = os.path.join(out_dir, "results-{shard}.jsonl")
    _by_value()
    # max_retries: a task lost with its node or worker runs again, and
    # resumes its shard; a ShardError (bad flags, a metric that does not
    # load) would fail again, so it is not retried.
    task = ray.remote(_score_shard).options(num_cpus=num_cpus, max_retries=max_retries, scheduling_strategy="SPREAD")
    refs = [
        task.remote([skynet, "score", "--metric", metric, "--data", data, "--shard", f"{i}/{shards}", "--out", pattern, "--resume"] + list(args))
        for i in range(shards)
    ]
    ray.get(refs)
    merged = os.path.join(out_dir, "results.jsonl")
    parts = sorted(glob.glob(os.path.join(out_dir, "results-*.jsonl")))
    proc = subprocess.run([skynet, "merge", "--data", data, "--out", merged] + parts, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        raise ShardError(f"skynet merge: exit {proc.returncode}\n{proc.stderr.strip()[-4000:]}")
    return merged
