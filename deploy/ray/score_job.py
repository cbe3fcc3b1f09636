"""Batch scoring as a Ray job: shard i of N in a Ray task on some node
(`skynet score --shard i/N --out OUT_DIR/results-{shard}.jsonl --resume`),
retried and resumed if its node dies, then `skynet merge` into
OUT_DIR/results.jsonl in the case file's order.

    ray job submit --address http://HEAD:8265 \\
        --runtime-env-json '{"pip": ["skynet-client[ray] @ git+https://HOST/ORG/skynet#subdirectory=clients/python"]}' \\
        -- python deploy/ray/score_job.py --skynet /shared/skynet --metric /shared/metric.py \\
           --data /shared/cases.jsonl --out-dir /shared/out [--shards 8] [-- --timeout 30s]

The skynet binary, the metric and the case file must be at the same path on
every node (a shared filesystem, or the image). Flags after `--` go to each
skynet score. Exit 0 once merged; the merged file has one result per case.
"""

import argparse
import json
import sys

from skynet_client.ray import score_shards


def main(argv):
    extra = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1 :]
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--skynet", default="skynet", help="the skynet binary (same path on every node)")
    ap.add_argument("--metric", required=True)
    ap.add_argument("--data", required=True, help="case file (JSONL)")
    ap.add_argument("--out-dir", required=True, help="where results-{shard}.jsonl and results.jsonl go (shared)")
    ap.add_argument("--shards", type=int, default=None, help="default: one per CPU of the cluster, at --num-cpus a task")
    ap.add_argument("--num-cpus", type=float, default=1, help="CPUs each shard's task reserves (give skynet score --processes to match)")
    a = ap.parse_args(argv)
    merged = score_shards(a.metric, a.data, a.out_dir, shards=a.shards, skynet=a.skynet, args=extra, num_cpus=a.num_cpus)
    n = failed = 0
    with open(merged, encoding="utf-8") as f:
        for line in f:
            n += 1
            failed += json.loads(line).get("error") is not None
    print(f"skynet ray job: {n} case(s), {failed} failed: {merged}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
