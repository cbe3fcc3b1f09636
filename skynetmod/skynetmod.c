// skynetmod.c: the `skynet` module's C method table. Measurements live in Go;
// these functions only copy them out, so nothing Python does to the module
// (reassigning attributes, mutating returned dicts) changes what Go computes.
#include "skynetmod.h"
#include "_cgo_export.h"
#include <string.h>

static const char *no_case =
    "is only available while Skynet is calling score or run for a case "
    "(not at import time or from threads the metric starts)";

// current_observation copies the running case's observation into o, or sets
// a RuntimeError naming fname when no case is running on this thread.
static int current_observation(const char *fname, sky_observation *o) {
    sky_thread *t = sky_current_thread();
    memset(o, 0, sizeof *o);
    sky_exit_if_forked(); // a forked child never calls Go (host.h)
    int64_t index, run_ns;
    int in_run;
    if (!t || !t->context || !sky_case_of(t, &index, &in_run, &run_ns) ||
        !skynetObservation(t->context, index, run_ns, o)) {
        PyErr_Format(PyExc_RuntimeError, "skynet.%s() %s", fname, no_case);
        return -1;
    }
    return 0;
}

static PyObject *sk_observation(PyObject *self, PyObject *unused) {
    sky_observation o;
    if (current_observation("observation", &o) < 0) return NULL;
    PyObject *d = PyDict_New(); // new ref, returned
    if (!d) return NULL;
    struct { const char *key; int has; PyObject *v; } items[5] = {
        {"run_ms", o.has_run_ms, o.has_run_ms ? PyFloat_FromDouble(o.run_ms) : NULL},
        {"cost_usd", o.has_cost_usd, o.has_cost_usd ? PyFloat_FromDouble(o.cost_usd) : NULL},
        {"model_calls", o.has_model_calls, o.has_model_calls ? PyLong_FromLongLong(o.model_calls) : NULL},
        {"input_tokens", o.has_input_tokens, o.has_input_tokens ? PyLong_FromLongLong(o.input_tokens) : NULL},
        {"output_tokens", o.has_output_tokens, o.has_output_tokens ? PyLong_FromLongLong(o.output_tokens) : NULL},
    };
    int failed = 0;
    for (int i = 0; i < 5; i++) {
        PyObject *v = items[i].has ? items[i].v : Py_NewRef(Py_None); // owned here
        if (!v || PyDict_SetItemString(d, items[i].key, v) < 0) failed = 1;
        Py_XDECREF(v);
    }
    if (failed) {
        Py_DECREF(d);
        return NULL;
    }
    return d;
}

static PyObject *sk_service_cost(PyObject *self, PyObject *unused) {
    sky_observation o;
    if (current_observation("service_cost", &o) < 0) return NULL;
    if (!o.has_cost_usd) Py_RETURN_NONE;
    return PyFloat_FromDouble(o.cost_usd);
}

static PyObject *sk_reward(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"spec", "accuracy", "feedback", NULL};
    PyObject *spec, *acc, *fb;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOO:reward", kwlist, &spec, &acc, &fb)) return NULL;
    sky_thread *t = sky_current_thread();
    int64_t index, run_ns;
    int in_run;
    if (!t || !t->context || !sky_case_of(t, &index, &in_run, &run_ns)) {
        PyErr_Format(PyExc_RuntimeError, "skynet.reward() %s", no_case);
        return NULL;
    }
    if (PyBool_Check(acc) || !(PyFloat_Check(acc) || PyLong_Check(acc))) {
        PyErr_Format(PyExc_TypeError, "skynet.reward(): accuracy must be a number, got %.100s",
                     Py_TYPE(acc)->tp_name);
        return NULL;
    }
    double accuracy = PyFloat_AsDouble(acc);
    if (accuracy == -1.0 && PyErr_Occurred()) return NULL;
    if (!PyUnicode_Check(fb)) {
        PyErr_Format(PyExc_TypeError, "skynet.reward(): feedback must be a str, got %.100s",
                     Py_TYPE(fb)->tp_name);
        return NULL;
    }
    Py_ssize_t fblen;
    const char *fbs = PyUnicode_AsUTF8AndSize(fb, &fblen); // borrowed from fb
    if (!fbs) return NULL;
    sky_buf specbuf = {0};
    if (sky_encode(&specbuf, spec, 0) < 0) {
        sky_buf_free(&specbuf);
        return NULL;
    }
    sky_reward_out out;
    memset(&out, 0, sizeof out);
    sky_exit_if_forked(); // a forked child never calls Go (host.h)
    skynetReward(t->context, index, run_ns, specbuf.data, specbuf.len, accuracy, (char *)fbs, (size_t)fblen, &out);
    sky_buf_free(&specbuf);
    if (out.error) {
        PyErr_SetString(PyExc_ValueError, out.error);
        free(out.error);
        free(out.feedback);
        return NULL;
    }
    PyObject *res = Py_BuildValue("(d{s:s#,s:{s:d,s:d,s:d}})", out.total, "feedback", out.feedback,
                                  (Py_ssize_t)out.feedback_len, "scores", "accuracy", out.accuracy,
                                  "speed", out.speed, "cost", out.cost); // new ref, returned
    free(out.feedback);
    return res;
}

// What the module keeps is in its state, not in C globals, as multi-phase
// init (PEP 489) expects.
typedef struct {
    PyObject *llm_error; // skynet.LLMError
    int frozen;          // read-only once initialised (skynet_setattro)
} skynet_state;

static char *python_source; // Python-level helpers (dspy.py), set from Go; read-only after

void skynetmod_set_python(const char *src) { python_source = strdup(src); }

// add_python runs the Python helpers and adds the functions they define.
static int add_python(PyObject *m) {
    if (!python_source) return 0;
    int rc = -1;
    PyObject *name = NULL;
    PyObject *globals = PyDict_New(); // new ref
    if (!globals || PyDict_SetItemString(globals, "__builtins__", PyEval_GetBuiltins()) < 0) goto done;
    name = PyModule_GetNameObject(m); // new ref; SetItem does not steal it
    if (!name || PyDict_SetItemString(globals, "__name__", name) < 0) goto done;
    PyObject *res = PyRun_String(python_source, Py_file_input, globals, globals); // new ref
    if (!res) goto done;
    Py_DECREF(res);
    PyObject *fn = PyDict_GetItemString(globals, "dspy_metric"); // borrowed
    if (!fn) {
        PyErr_SetString(PyExc_RuntimeError, "skynet: dspy_metric is missing");
        goto done;
    }
    Py_INCREF(fn);
    if (PyModule_AddObject(m, "dspy_metric", fn) < 0) { // steals on success
        Py_DECREF(fn);
        goto done;
    }
    rc = 0;
done:
    Py_XDECREF(name);
    Py_XDECREF(globals);
    return rc;
}

// utf8_of returns a borrowed UTF-8 view of a str, or of json.dumps(o) for
// other values (kept alive in *holder).
static const char *utf8_of(PyObject *o, Py_ssize_t *n, PyObject **holder) {
    *holder = NULL;
    if (PyUnicode_Check(o)) return PyUnicode_AsUTF8AndSize(o, n); // borrowed from o
    PyObject *json = PyImport_ImportModule("json"); // new ref
    if (!json) return NULL;
    *holder = PyObject_CallMethod(json, "dumps", "O", o); // new ref
    Py_DECREF(json);
    if (!*holder) return NULL;
    return PyUnicode_AsUTF8AndSize(*holder, n);
}

// llm_args is a model call's arguments, read and checked for llm and allm.
typedef struct {
    const char *instr, *input; // borrowed from the caller's arguments and holder
    Py_ssize_t instr_len, input_len;
    int has_temp, has_max;
    double temperature;
    long long max_tokens;
    PyObject *holder; // owns input's UTF-8 when it was not a str (json.dumps)
    int64_t index;    // the case
    int in_run;
    uintptr_t ctx;
    sky_thread *t;
} llm_args;

// read_llm_args fills a from llm's arguments; -1 with an exception set.
static int read_llm_args(const char *fname, PyObject *args, PyObject *kwargs, llm_args *a) {
    static char *kwlist[] = {"instructions", "input", "temperature", "max_tokens", NULL};
    char format[32];
    snprintf(format, sizeof format, "U|O$OO:%s", fname);
    PyObject *instr, *input = Py_None, *temp = Py_None, *maxtok = Py_None;
    memset(a, 0, sizeof *a);
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, format, kwlist, &instr, &input, &temp, &maxtok)) return -1;
    sky_thread *t = sky_current_thread();
    int64_t run_ns;
    if (!t || !t->context || !sky_case_of(t, &a->index, &a->in_run, &run_ns)) {
        PyErr_Format(PyExc_RuntimeError, "skynet.%s() %s", fname, no_case);
        return -1;
    }
    a->t = t;
    a->ctx = t->context;
    if (temp != Py_None) {
        if (PyBool_Check(temp) || !(PyFloat_Check(temp) || PyLong_Check(temp))) {
            PyErr_Format(PyExc_TypeError, "skynet.%s(): temperature must be a number", fname);
            return -1;
        }
        a->temperature = PyFloat_AsDouble(temp);
        if (a->temperature == -1.0 && PyErr_Occurred()) return -1;
        a->has_temp = 1;
    }
    if (maxtok != Py_None) {
        if (PyBool_Check(maxtok) || !PyLong_Check(maxtok)) {
            PyErr_Format(PyExc_TypeError, "skynet.%s(): max_tokens must be an int", fname);
            return -1;
        }
        a->max_tokens = PyLong_AsLongLong(maxtok);
        if (a->max_tokens == -1 && PyErr_Occurred()) return -1;
        if (a->max_tokens <= 0) {
            PyErr_Format(PyExc_ValueError, "skynet.%s(): max_tokens must be positive", fname);
            return -1;
        }
        a->has_max = 1;
    }
    a->instr = PyUnicode_AsUTF8AndSize(instr, &a->instr_len); // borrowed from instr
    if (!a->instr) return -1;
    a->input = "";
    if (input != Py_None) {
        a->input = utf8_of(input, &a->input_len, &a->holder);
        if (!a->input) return -1;
    }
    return 0;
}

// llm(instructions, input=None, *, temperature=None, max_tokens=None) -> str.
// The GIL is released for the whole network wait.
static PyObject *sk_llm(PyObject *self, PyObject *args, PyObject *kwargs) {
    llm_args a;
    if (read_llm_args("llm", args, kwargs, &a) < 0) {
        Py_XDECREF(a.holder);
        return NULL;
    }
    sky_thread *t = a.t;
    sky_llm_out out;
    memset(&out, 0, sizeof out);
    sky_exit_if_forked(); // a forked child never calls Go (host.h)
    // The strings stay valid without the GIL: instr and input are held by
    // the caller's frame and holder by us, and str contents never change.
    t->inside = 0;
    Py_BEGIN_ALLOW_THREADS
    skynetLLM(a.ctx, a.index, a.in_run, (char *)a.instr, (size_t)a.instr_len, (char *)a.input, (size_t)a.input_len,
              a.has_temp, a.temperature, a.has_max, a.max_tokens, &out);
    Py_END_ALLOW_THREADS
    t->inside = 1;
    Py_XDECREF(a.holder);
    if (out.error) {
        skynet_state *st = PyModule_GetState(self); // self is the module (PyModule_AddFunctions)
        PyErr_SetString(out.no_model || !st ? PyExc_RuntimeError : st->llm_error, out.error);
        free(out.error);
        free(out.text);
        return NULL;
    }
    PyObject *res = PyUnicode_DecodeUTF8(out.text ? out.text : "", (Py_ssize_t)out.text_len, "replace");
    free(out.text);
    return res;
}

// allm(...) -> awaitable str: llm's call for `async def score`. Go makes the
// call on a goroutine and the event loop runs other cases meanwhile; the
// awaitable (a future of the loop) gets the reply or the error.
static PyObject *sk_allm(PyObject *self, PyObject *args, PyObject *kwargs) {
    llm_args a;
    if (read_llm_args("allm", args, kwargs, &a) < 0) {
        Py_XDECREF(a.holder);
        return NULL;
    }
    uint64_t id = 0;
    PyObject *fut = sky_aio_new_call(a.t, &id); // new ref, returned
    if (fut) {
        sky_exit_if_forked();
        skynetLLMStart(a.ctx, a.index, a.in_run, id, (char *)a.instr, (size_t)a.instr_len, (char *)a.input,
                       (size_t)a.input_len, a.has_temp, a.temperature, a.has_max, a.max_tokens);
    }
    Py_XDECREF(a.holder);
    return fut;
}

static PyMethodDef skynet_methods[] = {
    {"llm", (PyCFunction)(void (*)(void))sk_llm, METH_VARARGS | METH_KEYWORDS,
     "llm(instructions, input=...) -> str: one chat call to the metric model (run code: the task model)."},
    {"allm", (PyCFunction)(void (*)(void))sk_allm, METH_VARARGS | METH_KEYWORDS,
     "allm(instructions, input=...) -> awaitable str: llm() for `async def score`; the event loop runs on while the model answers."},
    {"reward", (PyCFunction)(void (*)(void))sk_reward, METH_VARARGS | METH_KEYWORDS,
     "reward(spec, accuracy, feedback) -> (score, side_info): combine accuracy with the measured run time and cost."},
    {"observation", sk_observation, METH_NOARGS,
     "observation() -> dict: run_ms, cost_usd, model_calls, input_tokens, output_tokens of the current case (None = not measured)."},
    {"service_cost", sk_service_cost, METH_NOARGS,
     "service_cost() -> float | None: measured USD cost of the current case's model calls made by run."},
    {NULL, NULL, 0, NULL},
};

// The module is read-only once initialised: one metric cannot replace
// skynet.observation (or anything else) for the metrics loaded after it,
// and an attempt fails loudly. Dunder attributes stay writable for the
// import machinery.
static int skynet_setattro(PyObject *m, PyObject *name, PyObject *value) {
    skynet_state *st = PyModule_GetState(m);
    if (st && st->frozen && PyUnicode_Check(name)) {
        Py_ssize_t n = PyUnicode_GET_LENGTH(name);
        int dunder = n > 4 && PyUnicode_READ_CHAR(name, 0) == '_' && PyUnicode_READ_CHAR(name, 1) == '_';
        if (!dunder) {
            PyErr_Format(PyExc_AttributeError,
                         "the skynet module is read-only: cannot %s skynet.%U (measurements live in the host)",
                         value ? "replace" : "delete", name);
            return -1;
        }
    }
    return PyObject_GenericSetAttr(m, name, value);
}

// The module is an instance of a heap type made when it is created
// (skynet_create): its own __setattr__ keeps it read-only.
static PyType_Slot skynet_type_slots[] = {
    {Py_tp_setattro, skynet_setattro},
    {Py_tp_doc, "The skynet module (read-only)."},
    {0, NULL},
};

static PyType_Spec skynet_type_spec = {
    "skynet.SkynetModule", 0, 0, Py_TPFLAGS_DEFAULT, skynet_type_slots,
};

static PyObject *skynet_create(PyObject *spec, PyModuleDef *def) {
    PyObject *type = NULL, *name = NULL, *m = NULL;
    type = PyType_FromSpecWithBases(&skynet_type_spec, (PyObject *)&PyModule_Type); // new ref
    if (!type) goto done;
    name = PyObject_GetAttrString(spec, "name"); // new ref
    if (!name) goto done;
    m = PyObject_CallOneArg(type, name); // new ref, returned; holds its type
done:
    Py_XDECREF(name);
    Py_XDECREF(type);
    return m;
}

static int skynet_exec(PyObject *m) {
    skynet_state *st = PyModule_GetState(m);
    if (!st) return -1;
    st->llm_error = PyErr_NewExceptionWithDoc("skynet.LLMError",
                                              "A model call failed after its retries (or was cut short by the case's time limit).",
                                              PyExc_RuntimeError, NULL); // new ref, owned by the state
    if (!st->llm_error) return -1;
    if (PyModule_AddFunctions(m, skynet_methods) < 0) return -1;
    if (PyModule_AddStringConstant(m, "__doc__",
            "Skynet helpers for metrics: llm, reward, observation, service_cost.\n"
            "Measurements live in the host; this module only reads them.") < 0)
        return -1;
    Py_INCREF(st->llm_error);
    if (PyModule_AddObject(m, "LLMError", st->llm_error) < 0) { // steals on success
        Py_DECREF(st->llm_error);
        return -1;
    }
    if (add_python(m) < 0) return -1;
    st->frozen = 1;
    return 0;
}

static int skynet_traverse(PyObject *m, visitproc visit, void *arg) {
    skynet_state *st = PyModule_GetState(m);
    if (st) Py_VISIT(st->llm_error);
    return 0;
}

static int skynet_clear(PyObject *m) {
    skynet_state *st = PyModule_GetState(m);
    if (st) Py_CLEAR(st->llm_error);
    return 0;
}

static PyModuleDef_Slot skynet_slots[] = {
    {Py_mod_create, skynet_create},
    {Py_mod_exec, skynet_exec},
#ifdef Py_mod_multiple_interpreters
    {Py_mod_multiple_interpreters, Py_MOD_PER_INTERPRETER_GIL_SUPPORTED},
#endif
    {0, NULL},
};

// m_methods is NULL: with Py_mod_create the functions are added in exec.
static struct PyModuleDef skynet_module = {
    PyModuleDef_HEAD_INIT, "skynet", NULL, sizeof(skynet_state), NULL, skynet_slots,
    skynet_traverse, skynet_clear, NULL,
};

static PyObject *PyInit_skynet(void) { return PyModuleDef_Init(&skynet_module); }

int skynetmod_register(void) { return PyImport_AppendInittab("skynet", PyInit_skynet); }
