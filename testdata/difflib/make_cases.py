# Writes N deterministic cases for testdata/difflib/metric.py as JSONL on
# stdout: python3 make_cases.py N [SEED] > cases.jsonl
# Each case's expected text is 18–26 words drawn from a fixed vocabulary; the
# output is that text with a few words replaced, dropped, inserted or
# swapped, so SequenceMatcher has real work to do. Same N and seed, same
# bytes, on any Python 3.
import json
import random
import sys

WORDS = (
    "the a of to and in is it that for on with as was be by this are at from or an have not they "
    "which one you had but all were when we there can been has more if will would who so no out up "
    "into time than them some could only other new about its then also after two first any may "
    "these people way over such like our well even just because most through where much before "
    "model score output answer question reason prompt metric engine python value result case "
    "feedback expected input token context cost speed memory thread worker batch stream signal "
    "charge account refund billing password settings crash update version install network"
).split()


def text(rng, n):
    return " ".join(rng.choice(WORDS) for _ in range(n))


def mutate(rng, words):
    words = list(words)
    for _ in range(rng.randint(0, 6)):
        op = rng.random()
        i = rng.randrange(len(words))
        if op < 0.4:
            words[i] = rng.choice(WORDS)
        elif op < 0.6 and len(words) > 5:
            del words[i]
        elif op < 0.8:
            words.insert(i, rng.choice(WORDS))
        else:
            j = rng.randrange(len(words))
            words[i], words[j] = words[j], words[i]
    return words


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    rng = random.Random(int(sys.argv[2]) if len(sys.argv) > 2 else 1)
    out = sys.stdout
    for i in range(n):
        want = text(rng, rng.randint(18, 26))
        got = " ".join(mutate(rng, want.split()))
        case = {
            "id": f"d{i + 1}",
            "input": {"question": "Restate: " + text(rng, 8)},
            "output": got,
            "expected": {"text": want},
        }
        out.write(json.dumps(case) + "\n")


if __name__ == "__main__":
    main()
