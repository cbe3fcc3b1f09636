"""A faithful minimal stand-in of dspy.Example and dspy.Prediction, for
tests only (DSPy itself is not installable here). It follows DSPy's
interface: item and attribute access, with_inputs, inputs(), labels(),
keys(), items(), toDict()."""


class Example:
    def __init__(self, base=None, **kwargs):
        self._store = {}
        self._input_keys = None
        if base is not None:
            self._store.update(dict(base))
        self._store.update(kwargs)

    def __getattr__(self, key):
        if key.startswith("__") or key in ("_store", "_input_keys"):
            raise AttributeError(key)
        try:
            return self._store[key]
        except KeyError:
            raise AttributeError(key) from None

    def __setattr__(self, key, value):
        if key in ("_store", "_input_keys"):
            object.__setattr__(self, key, value)
        else:
            self._store[key] = value

    def __getitem__(self, key):
        return self._store[key]

    def __contains__(self, key):
        return key in self._store

    def __len__(self):
        return len(self._store)

    def keys(self):
        return list(self._store.keys())

    def values(self):
        return list(self._store.values())

    def items(self):
        return list(self._store.items())

    def get(self, key, default=None):
        return self._store.get(key, default)

    def with_inputs(self, *keys):
        copy = type(self)(self._store)
        copy._input_keys = set(keys)
        return copy

    def inputs(self):
        if self._input_keys is None:
            raise ValueError("inputs have not been set for this example; use example.with_inputs()")
        out = type(self)({k: v for k, v in self._store.items() if k in self._input_keys})
        out._input_keys = self._input_keys
        return out

    def labels(self):
        keys = self._input_keys or set()
        return type(self)({k: v for k, v in self._store.items() if k not in keys})

    def toDict(self):
        return dict(self._store)

    def __repr__(self):
        return f"Example({self._store!r}) (input_keys={self._input_keys})"


class Prediction(Example):
    pass
