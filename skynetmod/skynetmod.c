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
    if (!t || !t->context || !skynetObservation(t->context, t->case_index, o)) {
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
    if (!t || !t->context) {
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
    skynetReward(t->context, t->case_index, specbuf.data, specbuf.len, accuracy, (char *)fbs, (size_t)fblen, &out);
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

static PyObject *sk_llm(PyObject *self, PyObject *args, PyObject *kwargs) {
    PyErr_SetString(PyExc_RuntimeError,
                    "skynet.llm: no model is configured, so there is no model to call "
                    "(model calls are not available in this build yet)");
    return NULL;
}

static PyMethodDef skynet_methods[] = {
    {"llm", (PyCFunction)(void (*)(void))sk_llm, METH_VARARGS | METH_KEYWORDS,
     "llm(instructions, input=...) -> str: one chat call to the metric model (run code: the task model)."},
    {"reward", (PyCFunction)(void (*)(void))sk_reward, METH_VARARGS | METH_KEYWORDS,
     "reward(spec, accuracy, feedback) -> (score, side_info): combine accuracy with the measured run time and cost."},
    {"observation", sk_observation, METH_NOARGS,
     "observation() -> dict: run_ms, cost_usd, model_calls, input_tokens, output_tokens of the current case (None = not measured)."},
    {"service_cost", sk_service_cost, METH_NOARGS,
     "service_cost() -> float | None: measured USD cost of the current case's model calls made by run."},
    {NULL, NULL, 0, NULL},
};

static PyModuleDef_Slot skynet_slots[] = {{0, NULL}};

static struct PyModuleDef skynet_module = {
    PyModuleDef_HEAD_INIT, "skynet",
    "Skynet helpers for metrics: llm, reward, observation, service_cost.\n"
    "Measurements live in the host; this module only reads them.",
    0, skynet_methods, skynet_slots, NULL, NULL, NULL,
};

static PyObject *PyInit_skynet(void) { return PyModuleDef_Init(&skynet_module); }

int skynetmod_register(void) { return PyImport_AppendInittab("skynet", PyInit_skynet); }
