# fault: metric.py loops forever at import
# kind: load
# process: child
# result: skynet score/eval/check: check "metric loads" fails once --load-timeout passes, exit code 1 (in-process, Open never returns)
while True:
    pass
def score(input, output, expected=None):
    return 1.0
