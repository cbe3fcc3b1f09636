#!/usr/bin/env bash
# make test-ray: skynet_client.ray on a real local Ray cluster of two nodes on
# this machine: the head and a second `ray start --address` on loopback, from
# the pinned test venv (build/pyvenv.sh: ray[default] from the lock file).
# clients/python/test_ray.py then starts one skynet serve per node as actors,
# kills one mid-run, and submits deploy/ray/score_job.py as a Ray job,
# comparing every result with skynet score's. At the end `ray stop --force`
# stops every Ray process of this user on the machine.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="$(bash "$root/build/pyvenv.sh")"
bin="$root/bin/skynet"
[ -x "$bin" ] || { echo "build/test-ray.sh: no $bin: run make build" >&2; exit 2; }
export PATH="$venv/bin:$PATH" RAY_USAGE_STATS_ENABLED=0
free_port() { python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
port="$(free_port)"
dport="$(free_port)"
log="$(mktemp -d)"
cleanup() {
  ray stop --force >/dev/null 2>&1 || true
  rm -rf "$log"
}
trap cleanup EXIT
start=$SECONDS
if ! ray start --head --node-ip-address 127.0.0.1 --port "$port" --num-cpus 2 \
  --include-dashboard true --dashboard-host 127.0.0.1 --dashboard-port "$dport" \
  --disable-usage-stats >"$log/head.log" 2>&1; then
  cat "$log/head.log" >&2
  exit 1
fi
if ! ray start --address "127.0.0.1:$port" --node-ip-address 127.0.0.1 --num-cpus 2 \
  --disable-usage-stats >"$log/node.log" 2>&1; then
  cat "$log/node.log" >&2
  exit 1
fi
echo "build/test-ray.sh: a Ray cluster of two nodes on 127.0.0.1:$port (dashboard $dport) in $((SECONDS - start))s" >&2
cd "$root/clients/python"
SKYNET_BIN="$bin" RAY_ADDRESS="127.0.0.1:$port" RAY_DASHBOARD="http://127.0.0.1:$dport" \
  timeout 900 python -m unittest -v test_ray
