# The judge example as `async def score`: skynet.allm() awaits the model while
# the worker's event loop runs other cases, so one worker keeps --threads K
# judge calls in flight without K Python threads.
from skynet import allm


async def score(input, output, expected=None):
    verdict = await allm(
        "Answer PASS or FAIL, then give one sentence of reasons.",
        input=f"Question: {input['question']}\nAnswer: {output}",
    )
    passed = str(verdict).strip().upper().startswith("PASS")
    return (1.0 if passed else 0.0), {"feedback": str(verdict)}
