# fault: score's __signature__ property loops forever (the contract check reads it at load)
# kind: load
# process: child
# result: skynet score/eval/check: check "metric loads" fails once --load-timeout passes, exit code 1 (in-process, Open never returns)
class Score:
    @property
    def __signature__(self):
        while True:
            pass
    def __call__(self, input, output, expected=None):
        return 1.0
score = Score()
