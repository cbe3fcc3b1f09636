# fault: allocation bomb (allocates until memory runs out)
# kind: exception
# result: with Options.PythonMemoryLimit, a MemoryError in its case and the next case runs (TestMemoryLimit, in a child process: the cap is per process); without a cap, the OS decides
# process: child
def score(input, output, expected=None):
    if output == "bomb":
        hoard = []
        while True:
            hoard.append("x" * 10_000_000)
    return 1.0, {"feedback": "fine"}
