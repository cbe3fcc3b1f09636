# fault: raises a BaseException subclass
# kind: exception
class Escape(BaseException):
    pass
def score(input, output, expected=None):
    raise Escape("not an Exception")
