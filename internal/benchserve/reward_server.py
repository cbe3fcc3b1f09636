# The reward servers users write instead of skynet serve, for make bench-serve
# (internal/benchserve --rewards): POST /v1/rewards with OpenRLHF's remote
# reward body, {"query": [...], "prompts": [...], "labels": [...]}, in the
# shape of OpenRLHF's openrlhf/cli/serve_rm.py (an async def handler, await
# request.json(), the reward computed in-process, JSON back), with score() of
# a metric.py called once a sample exactly as skynet's /v1/rewards calls it:
#   score({"prompt": p}, q[len(p):] if q.startswith(p) else q, {"label": l})
# The reply is {"rewards": [...], "scores": [...], "extra_logs": {...}}:
# extra_logs holds "failed" (1.0 for a sample whose score raised, its reward
# 0.0) and the metric's named scores, one list each.
#
# The metric is SKYNET_BENCH_METRIC (a path), so that uvicorn's workers, which
# import this module by name, build the same app:
#   SKYNET_BENCH_METRIC=m.py python reward_server.py aiohttp HOST PORT
#   SKYNET_BENCH_METRIC=m.py python -m uvicorn --app-dir DIR reward_server:fastapi_app --factory \
#       --workers N --loop uvloop --http httptools --no-access-log --host HOST --port PORT
import importlib.util
import os
import sys


def load_score(path):
    spec = importlib.util.spec_from_file_location("metric", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.score


score = load_score(os.environ["SKYNET_BENCH_METRIC"])


def rewards(data):
    queries, prompts, labels = data["query"], data["prompts"], data["labels"]
    out, failed, named = [], [], {}
    for q, p, l in zip(queries, prompts, labels):
        try:
            value, side = score({"prompt": p}, q[len(p):] if q.startswith(p) else q, {"label": l})
            value, bad = float(value), 0.0
            for name, v in side.get("scores", {}).items():
                named.setdefault(name, []).append(float(v))
        except Exception:
            value, bad = 0.0, 1.0
        out.append(value)
        failed.append(bad)
    return {"rewards": out, "scores": out, "extra_logs": {"failed": failed, **named}}


def fastapi_app():
    """uvicorn --factory's app: FastAPI, as serve_rm.py's."""
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse

    app = FastAPI()

    @app.post("/v1/rewards")
    async def get_reward(request: Request):
        data = await request.json()
        return JSONResponse(rewards(data))

    return app


def run_aiohttp(host, port):
    from aiohttp import web

    async def get_reward(request):
        data = await request.json()
        return web.json_response(rewards(data))

    # 64 MiB bodies, as skynet serve's --max-body: aiohttp's default of 1 MiB
    # refuses a 1,000-sample request of long completions.
    app = web.Application(client_max_size=64 << 20)
    app.router.add_post("/v1/rewards", get_reward)

    async def ready(_app):
        print(f"reward_server: aiohttp ready on http://{host}:{port}", file=sys.stderr, flush=True)

    app.on_startup.append(ready)
    web.run_app(app, host=host, port=port, access_log=None, print=None)


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] != "aiohttp":
        sys.exit("usage: SKYNET_BENCH_METRIC=metric.py reward_server.py aiohttp HOST PORT")
    run_aiohttp(sys.argv[2], int(sys.argv[3]))
