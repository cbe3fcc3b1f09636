# A grader for "sort these words case-insensitively" answers that leans on libc
# through ctypes, as graders do when they must match a C tool's ordering:
# the reference order comes from libc qsort() with a Python CFUNCTYPE
# comparison callback (C calling back into Python: PyGILState_Ensure), which
# compares with strcasecmp() and breaks ties with strcmp(); strlen() enforces a
# byte budget on the answer, strncasecmp() gives credit for a correct prefix.
#
# input["words"]: the words to sort; input["max_bytes"]: the answer's budget.
# output: the sorted words, one string separated by spaces (or a JSON list).
# Score: the fraction of positions that hold the right word, 0 over budget.
import ctypes
import ctypes.util

libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
libc.strlen.argtypes = [ctypes.c_char_p]
libc.strlen.restype = ctypes.c_size_t
libc.strcmp.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
libc.strcmp.restype = ctypes.c_int
libc.strcasecmp.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
libc.strcasecmp.restype = ctypes.c_int
libc.strncasecmp.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
libc.strncasecmp.restype = ctypes.c_int

CMPFUNC = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_char_p))
libc.qsort.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, CMPFUNC]
libc.qsort.restype = None


def _compare(a, b):
    c = libc.strcasecmp(a[0], b[0])
    if c == 0:
        c = libc.strcmp(a[0], b[0])
    return (c > 0) - (c < 0)


_compare_c = CMPFUNC(_compare)  # kept alive at module level, as it must be


def c_sorted(words):
    """words sorted by libc qsort with the Python comparison callback."""
    encoded = [w.encode("utf-8") for w in words]
    arr = (ctypes.c_char_p * len(encoded))(*encoded)
    libc.qsort(arr, len(arr), ctypes.sizeof(ctypes.c_char_p), _compare_c)
    return [arr[i].decode("utf-8") for i in range(len(arr))]


def common_prefix_words(got, want):
    n = 0
    for g, w in zip(got, want):
        gb, wb = g.encode(), w.encode()
        if len(gb) != len(wb) or libc.strncasecmp(gb, wb, len(wb)) != 0:
            break
        n += 1
    return n


def score(input, output, expected=None):
    words = input["words"]
    want = c_sorted(words)
    text = " ".join(output) if isinstance(output, list) else str(output)
    nbytes = libc.strlen(text.encode("utf-8"))
    budget = input.get("max_bytes")
    if budget is not None and nbytes > budget:
        return 0.0, {"feedback": f"The answer is {nbytes} bytes, over the {budget}-byte budget: list only the words."}
    got = text.split()
    if sorted(got) != sorted(words):
        missing = sorted(set(words) - set(got))
        extra = sorted(set(got) - set(words))
        return 0.0, {"feedback": f"The answer must hold exactly the given words. Missing: {missing}; not given: {extra}."}
    right = sum(1 for g, w in zip(got, want) if g == w)
    frac = right / len(want) if want else 1.0
    if frac == 1.0:
        return 1.0, {"feedback": f"Correct order ({len(want)} words, {nbytes} bytes)."}
    prefix = common_prefix_words(got, want)
    return frac, {"feedback": f"{right}/{len(want)} words in place; the first {prefix} are right (ignoring case). "
                              f"Expected: {' '.join(want)}."}
