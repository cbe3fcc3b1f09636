# An intent-label grader that dies with SIGSEGV on exactly one case: when
# input["crash"] is true it reads a NULL pointer through ctypes
# (ctypes.string_at(0)), the way a buggy C-extension call takes a grader down.
# Every other case is scored normally, so an engine must report that case as
# a crash and still score the rest exactly as a plain script does on
# cases_nocrash.jsonl (the same lines without the crashing one).
#
# Score: 1.0 for the expected label (after normalising case, spaces, hyphens
# and a few aliases), 0.5 for a label in the same group, else 0.0.
import ctypes

ALIASES = {"bug-report": "bug", "defect": "bug", "invoice": "billing", "payment": "billing",
           "login": "account", "password": "account", "feature": "feature-request"}
GROUPS = {"bug": "support", "account": "support", "billing": "finance", "refund": "finance",
          "feature-request": "product", "feedback": "product"}


def normalise(label):
    s = "-".join(str(label).strip().lower().replace("_", " ").split())
    return ALIASES.get(s, s)


def score(input, output, expected=None):
    if input.get("crash"):
        ctypes.string_at(0)  # SIGSEGV: reads address 0
    got, want = normalise(output), normalise(expected["label"])
    if got == want:
        return 1.0, {"feedback": f"Correct label {want!r}."}
    if got in GROUPS and GROUPS.get(got) == GROUPS.get(want):
        return 0.5, {"feedback": f"Label {got!r} is in the right group ({GROUPS[want]}) but the answer is {want!r}."}
    if got not in GROUPS:
        return 0.0, {"feedback": f"{got!r} is not a label; use one of {', '.join(sorted(GROUPS))}."}
    return 0.0, {"feedback": f"Expected {want!r}, got {got!r}."}
