# An async grader, as RL reward code and LLM judges write them: each answer
# field is checked by its own coroutine (asyncio.gather), the CPU part runs in
# the loop's default executor, a module-level asyncio.Semaphore (bound to the
# loop that first waits on it) limits the checks in flight, an asyncio.Lock
# guards a lazy table load, asyncio.wait_for bounds a slow check (one case
# runs past it and scores 0), and a ContextVar carries the case's id into the
# nested coroutines, where tasks of other cases run between the awaits.
import asyncio
import contextvars
import difflib
import json
import os

CHECKS = asyncio.Semaphore(3)
_table_lock = asyncio.Lock()
_table = None
_case_id = contextvars.ContextVar("case_id")


async def _units():
    global _table
    async with _table_lock:
        if _table is None:
            await asyncio.sleep(0.01)  # another case may ask meanwhile: it waits for the lock
            with open(os.path.join(os.path.dirname(__file__), "units.json"), encoding="utf-8") as f:
                _table = json.load(f)
    return _table


def _ratio(a, b):
    return difflib.SequenceMatcher(None, a, b).ratio()


async def _field(name, got, want, delay):
    async with CHECKS:
        await asyncio.sleep(delay)
        owner = _case_id.get()
        if name == "unit":
            table = await _units()
            got, want = table.get(got, got), table.get(want, want)
        loop = asyncio.get_running_loop()
        r = await loop.run_in_executor(None, _ratio, str(got), str(want))
        # The id read after the awaits is still this case's.
        return name, round(r, 6), owner


async def score(input, output, expected=None):
    _case_id.set(input["id"])
    if not isinstance(output, dict):
        raise TypeError(f"output must be an object, got {type(output).__name__}")
    delay = float(input.get("delay", 0.005))
    fields = sorted(expected)
    try:
        checks = await asyncio.wait_for(
            asyncio.gather(*(_field(f, output.get(f, ""), expected[f], delay) for f in fields)), timeout=1.0)
    except asyncio.TimeoutError:
        return 0.0, {"feedback": f"{input['id']}: a check took over 1s"}
    owners = {owner for _, _, owner in checks}
    assert owners == {input["id"]}, f"context leaked: {owners}"
    total = sum(r for _, r, _ in checks) / len(checks)
    parts = ", ".join(f"{n}={r:.3f}" for n, r, _ in checks)
    return round(total, 6), {"feedback": f"{input['id']}: {parts}"}
