# Writes N deterministic cases for one of the cheap graders beside this file
# as JSONL on stdout: python3 make_cases.py KIND N [SEED] > cases.jsonl, KIND
# one of gsm8k_regex, exact_norm, token_f1. Outputs are model-like answers:
# some right, some wrong, some without a final answer. Same arguments, same
# bytes, on any Python 3.
import json
import random
import sys

WORDS = (
    "the a of to and in is it that for on with as was be by this are at from or an have not they "
    "model score output answer question reason prompt metric engine python value result case "
    "river mountain city paris london tokyo einstein newton curie 1905 1969 apollo moon"
).split()


def words(rng, n):
    return " ".join(rng.choice(WORDS) for _ in range(n))


def gsm8k(rng, i):
    a, b = rng.randint(1, 999), rng.randint(1, 999)
    answer = str(a * b)
    steps = f"First we multiply {a} by {b}. {words(rng, rng.randint(8, 30))}."
    r = rng.random()
    if r < 0.5:
        out = f"{steps} The answer is {answer}.\n#### {answer}"
    elif r < 0.7:
        out = f"{steps} So the result is {int(answer):,}."
    elif r < 0.9:
        out = f"{steps}\n#### {int(answer) + rng.randint(1, 9)}"
    else:
        out = steps.replace(str(a), "some").replace(str(b), "number")
    return {"input": {"question": f"What is {a} times {b}?"}, "output": out, "expected": {"answer": answer}}


def qa(rng, i):
    truth = words(rng, rng.randint(1, 4))
    answers = [truth, "The " + truth.title() + "."]
    r = rng.random()
    if r < 0.4:
        out = rng.choice(answers).upper()
    elif r < 0.7:
        out = truth + " " + words(rng, rng.randint(1, 6))
    else:
        out = words(rng, rng.randint(1, 8))
    return {"input": {"question": f"Question {i}: {words(rng, 8)}?"}, "output": out, "expected": {"answers": answers}}


def main(argv):
    kind, n = argv[1], int(argv[2])
    rng = random.Random(int(argv[3]) if len(argv) > 3 else 7)
    make = {"gsm8k_regex": gsm8k, "exact_norm": qa, "token_f1": qa}[kind]
    out = sys.stdout
    for i in range(n):
        case = make(rng, i)
        case["id"] = f"c{i}"
        out.write(json.dumps(case, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(sys.argv)
