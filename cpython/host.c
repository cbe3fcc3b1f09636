// host.c: interpreter lifecycle, worker thread states, calls and errors.
#include "host.h"
#include <string.h>

static __thread sky_worker *tls_worker;   // the worker bound to this OS thread
static PyObject *interrupt_type;          // raised in a call that overran its time
static PyObject *format_exception;        // traceback.format_exception

void sky_buf_free(sky_buf *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

// set_error writes an error in sky_fetch_error's three-string layout.
static void set_error(sky_buf *b, const char *type, const char *msg) {
    b->len = 0;
    sky_buf_put_str(b, type, strlen(type));
    sky_buf_put_str(b, msg, strlen(msg));
    sky_buf_put_str(b, "", 0);
}

// capture(s) -> bool: appends s to the current call's logs when this thread's
// worker is capturing; False tells the Python writer to use its fallback stream.
static PyObject *host_capture(PyObject *self, PyObject *arg) {
    sky_worker *w = tls_worker;
    if (!w || !w->capturing) Py_RETURN_FALSE;
    if (!PyUnicode_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "write() argument must be str, not %.100s", Py_TYPE(arg)->tp_name);
        return NULL;
    }
    Py_ssize_t n;
    const char *s = PyUnicode_AsUTF8AndSize(arg, &n);
    PyObject *bytes = NULL;
    if (!s) {
        PyErr_Clear();
        bytes = PyUnicode_AsEncodedString(arg, "utf-8", "backslashreplace"); // new ref
        if (!bytes) return NULL;
        s = PyBytes_AS_STRING(bytes);
        n = PyBytes_GET_SIZE(bytes);
    }
    size_t room = w->logs.len < w->logs_limit ? w->logs_limit - w->logs.len : 0;
    size_t take = (size_t)n < room ? (size_t)n : room;
    while (take < (size_t)n && take > 0 && ((unsigned char)s[take] & 0xC0) == 0x80) take--;
    if (take < (size_t)n) w->logs_truncated = 1;
    if (take > 0) {
        if (w->logs.len + take > w->logs.cap) {
            size_t cap = w->logs.cap ? w->logs.cap : 1024;
            while (cap < w->logs.len + take) cap *= 2;
            char *d = realloc(w->logs.data, cap);
            if (!d) { Py_XDECREF(bytes); return PyErr_NoMemory(); }
            w->logs.data = d;
            w->logs.cap = cap;
        }
        memcpy(w->logs.data + w->logs.len, s, take);
        w->logs.len += take;
    }
    Py_XDECREF(bytes);
    Py_RETURN_TRUE;
}

static PyMethodDef host_methods[] = {
    {"capture", host_capture, METH_O, "Append to the current call's captured output."},
    {NULL, NULL, 0, NULL},
};

static int host_exec(PyObject *m) {
    interrupt_type = PyErr_NewExceptionWithDoc(
        "_skynet_host.Interrupted",
        "Raised inside a call that overran its time limit or was cancelled.",
        PyExc_BaseException, NULL); // new ref, kept for the process lifetime
    if (!interrupt_type) return -1;
    Py_INCREF(interrupt_type);
    if (PyModule_AddObject(m, "Interrupted", interrupt_type) < 0) { // steals on success
        Py_DECREF(interrupt_type);
        return -1;
    }
    return 0;
}

static PyModuleDef_Slot host_slots[] = {{Py_mod_exec, host_exec}, {0, NULL}};

static struct PyModuleDef host_module = {
    PyModuleDef_HEAD_INIT, "_skynet_host", "Skynet host hooks (internal).", 0,
    host_methods, host_slots, NULL, NULL, NULL,
};

static PyObject *PyInit__skynet_host(void) { return PyModuleDef_Init(&host_module); }

static void status_error(sky_buf *err, PyStatus st) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s%s%s", st.func ? st.func : "", st.func ? ": " : "",
             st.err_msg ? st.err_msg : "Python initialisation failed");
    set_error(err, "InitError", msg);
}

// sky_initialize starts the one interpreter of the process. The Go runtime owns
// signals, so Python installs no handlers and faulthandler stays off whatever
// the environment says. On return the GIL is released.
int sky_initialize(const char *program_name, const char *home, int argc, char **argv,
                   const char *bootstrap, sky_buf *err) {
    PyConfig config;
    PyStatus st;
    PyConfig_InitPythonConfig(&config);
    config.install_signal_handlers = 0;
    config.faulthandler = 0;
    config.parse_argv = 0;
    config.configure_c_stdio = 0;
    st = PyConfig_SetBytesString(&config, &config.stdio_encoding, "utf-8");
    if (PyStatus_Exception(st)) goto fail;
    st = PyConfig_SetBytesString(&config, &config.stdio_errors, "backslashreplace");
    if (PyStatus_Exception(st)) goto fail;
    if (program_name && *program_name) {
        st = PyConfig_SetBytesString(&config, &config.program_name, program_name);
        if (PyStatus_Exception(st)) goto fail;
    }
    if (home && *home) {
        st = PyConfig_SetBytesString(&config, &config.home, home);
        if (PyStatus_Exception(st)) goto fail;
    }
    st = PyConfig_SetBytesArgv(&config, argc, argv);
    if (PyStatus_Exception(st)) goto fail;
    if (PyImport_AppendInittab("_skynet_host", PyInit__skynet_host) < 0) {
        set_error(err, "InitError", "cannot register _skynet_host");
        PyConfig_Clear(&config);
        return -1;
    }
    st = Py_InitializeFromConfig(&config);
    PyConfig_Clear(&config);
    if (PyStatus_Exception(st)) { status_error(err, st); return -1; }

    int rc = -1;
    PyObject *tb = NULL, *globals = NULL, *res = NULL;
    tb = PyImport_ImportModule("traceback"); // new ref
    if (!tb) goto done;
    format_exception = PyObject_GetAttrString(tb, "format_exception"); // new ref, kept forever
    if (!format_exception) goto done;
    globals = PyDict_New();
    if (!globals || PyDict_SetItemString(globals, "__builtins__", PyEval_GetBuiltins()) < 0) goto done;
    res = PyRun_String(bootstrap, Py_file_input, globals, globals);
    if (!res) goto done;
    rc = 0;
done:
    if (rc < 0) {
        sky_fetch_error(err);
    }
    Py_XDECREF(res);
    Py_XDECREF(globals);
    Py_XDECREF(tb);
    PyEval_SaveThread(); // the main thread state stays parked; workers have their own
    return rc;
fail:
    status_error(err, st);
    PyConfig_Clear(&config);
    return -1;
}

// sky_worker_new binds a new thread state to the calling OS thread; the caller
// keeps that thread for the worker's whole life. The GIL is not held on return.
sky_worker *sky_worker_new(size_t logs_limit) {
    sky_worker *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    PyInterpreterState *interp = PyInterpreterState_Main();
    w->tstate = PyThreadState_New(interp);
    if (!w->tstate) { free(w); return NULL; }
    w->tid = PyThread_get_thread_ident();
    w->logs_limit = logs_limit;
    tls_worker = w;
    return w;
}

void sky_worker_enter(sky_worker *w) { PyEval_RestoreThread(w->tstate); }

void sky_worker_leave(sky_worker *w) { PyEval_SaveThread(); }

// sky_worker_free must run on the worker's own thread without the GIL held.
void sky_worker_free(sky_worker *w) {
    PyEval_RestoreThread(w->tstate);
    PyThreadState_Clear(w->tstate);
    PyThreadState_DeleteCurrent(); // releases the GIL
    if (tls_worker == w) tls_worker = NULL;
    sky_buf_free(&w->out);
    sky_buf_free(&w->logs);
    free(w);
}

// sky_interrupt raises Interrupted in w's thread if the call with this token is
// still running. Any thread may call it; it waits for the GIL, so a call stuck
// in C that never releases the GIL keeps this waiting too.
int sky_interrupt(sky_worker *w, uint64_t token) {
    PyGILState_STATE g = PyGILState_Ensure();
    int posted = 0;
    if (token != 0 && w->running == token) {
        posted = PyThreadState_SetAsyncExc(w->tid, interrupt_type) > 0;
        if (posted) w->interrupt_posted = 1;
    }
    PyGILState_Release(g);
    return posted;
}

// sky_fetch_error moves the current Python exception into out as three strings:
// type name, message, formatted traceback. It never prints and never exits,
// so SystemExit and KeyboardInterrupt are ordinary errors here.
void sky_fetch_error(sky_buf *out) {
    out->len = 0;
    PyObject *type = NULL, *value = NULL, *tb = NULL, *name = NULL, *msg = NULL, *lines = NULL, *text = NULL;
    PyErr_Fetch(&type, &value, &tb); // new refs (any may be NULL)
    if (!type) {
        sky_buf_put_str(out, "SystemError", 11);
        sky_buf_put_str(out, "error return without exception set", 34);
        sky_buf_put_str(out, "", 0);
        return;
    }
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb && value) PyException_SetTraceback(value, tb);
    PyTypeObject *t = (PyTypeObject *)type;
    PyObject *mod = PyObject_GetAttrString(type, "__module__"); // new ref
    if (mod && PyUnicode_Check(mod) && PyUnicode_CompareWithASCIIString(mod, "builtins") != 0) {
        PyObject *qual = PyObject_GetAttrString(type, "__qualname__"); // new ref
        if (qual) name = PyUnicode_FromFormat("%U.%U", mod, qual);
        Py_XDECREF(qual);
    }
    Py_XDECREF(mod);
    PyErr_Clear();
    if (!name) name = PyUnicode_FromString(PyType_Check(type) ? t->tp_name : "exception");
    msg = value ? PyObject_Str(value) : NULL;
    if (!msg) { PyErr_Clear(); msg = PyUnicode_FromString("<exception str() failed>"); }
    if (value && format_exception) {
        lines = PyObject_CallOneArg(format_exception, value);
        if (lines) {
            PyObject *empty = PyUnicode_FromString("");
            if (empty) text = PyUnicode_Join(empty, lines);
            Py_XDECREF(empty);
        }
    }
    if (!text) { PyErr_Clear(); text = PyUnicode_FromString(""); }
    PyObject *parts[3] = {name, msg, text};
    for (int i = 0; i < 3; i++) {
        Py_ssize_t n = 0;
        const char *s = parts[i] ? PyUnicode_AsUTF8AndSize(parts[i], &n) : NULL;
        if (!s) { PyErr_Clear(); s = "?"; n = 1; }
        sky_buf_put_str(out, s, (size_t)n);
    }
    Py_XDECREF(name);
    Py_XDECREF(msg);
    Py_XDECREF(lines);
    Py_XDECREF(text);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    PyErr_Clear();
}

static int decode_args(const char *in, size_t inlen, int nargs, PyObject **args) {
    const char *p = in, *end = in + inlen;
    for (int i = 0; i < nargs; i++) {
        args[i] = sky_decode(&p, end, 0);
        if (!args[i]) return -1;
    }
    if (p != end) {
        PyErr_SetString(PyExc_ValueError, "skynet value buffer: trailing bytes");
        return -1;
    }
    return 0;
}

// end_call stops a call's interruptibility before anything else runs Python
// (encoding, traceback formatting), so a late interrupt cannot land there or in
// the next call on this thread.
static void end_call(sky_worker *w) {
    w->running = 0;
    w->capturing = 0;
    if (w->interrupt_posted) {
        PyThreadState_SetAsyncExc(w->tid, NULL);
        w->interrupt_posted = 0;
    }
}

#define SKY_MAX_ARGS 8

// sky_call is the hot path, one crossing per case: decode the arguments, call
// fn, and leave the encoded result (or error) in w->out.
int sky_call(sky_worker *w, PyObject *fn, PyObject *first, const char *in, size_t inlen,
             int nargs, uint64_t token, int capture) {
    PyObject *args[SKY_MAX_ARGS] = {NULL};
    PyObject *res = NULL;
    int rc = SKY_PYERR, skip = first ? 1 : 0;
    w->out.len = 0;
    w->logs.len = 0;
    w->logs_truncated = 0;
    if (nargs < 0 || nargs + skip > SKY_MAX_ARGS) {
        PyErr_SetString(PyExc_ValueError, "too many arguments");
        nargs = 0;
        goto done;
    }
    if (first) {
        Py_INCREF(first);
        args[0] = first; // released with the other arguments below
    }
    if (decode_args(in, inlen, nargs, args + skip) < 0) goto done;
    w->running = token;
    w->capturing = capture;
    res = PyObject_Vectorcall(fn, args, (size_t)(nargs + skip), NULL); // new ref
    end_call(w);
    if (!res) goto done;
    if (sky_encode(&w->out, res, 0) < 0) goto done;
    rc = SKY_OK;
done:
    end_call(w);
    if (rc != SKY_OK) sky_fetch_error(&w->out);
    Py_XDECREF(res);
    for (int i = 0; i < SKY_MAX_ARGS; i++) Py_XDECREF(args[i]);
    return rc;
}

// sky_call_obj is sky_call for setup code that needs the result as an object.
int sky_call_obj(sky_worker *w, PyObject *fn, const char *in, size_t inlen, int nargs,
                 PyObject **result) {
    PyObject *args[SKY_MAX_ARGS] = {NULL};
    *result = NULL;
    int rc = SKY_PYERR;
    w->out.len = 0;
    if (nargs < 0 || nargs > SKY_MAX_ARGS) {
        PyErr_SetString(PyExc_ValueError, "too many arguments");
        goto done;
    }
    if (decode_args(in, inlen, nargs, args) < 0) goto done;
    *result = PyObject_Vectorcall(fn, args, (size_t)nargs, NULL); // new ref, owned by the caller
    if (*result) rc = SKY_OK;
done:
    if (rc != SKY_OK) sky_fetch_error(&w->out);
    for (int i = 0; i < SKY_MAX_ARGS; i++) Py_XDECREF(args[i]);
    return rc;
}

// sky_exec_module runs source as a new module registered in sys.modules.
int sky_exec_module(sky_worker *w, const char *name, const char *filename, const char *source,
                    PyObject **result) {
    *result = NULL;
    w->out.len = 0;
    PyObject *code = NULL, *mod = NULL, *res = NULL;
    code = Py_CompileString(source, filename, Py_file_input); // new ref
    if (!code) goto fail;
    mod = PyImport_ExecCodeModuleEx(name, code, filename); // new ref
    if (!mod) goto fail;
    Py_DECREF(code);
    *result = mod;
    return SKY_OK;
fail:
    Py_XDECREF(code);
    Py_XDECREF(res);
    sky_fetch_error(&w->out);
    return SKY_PYERR;
}

int sky_getattr(sky_worker *w, PyObject *obj, const char *name, PyObject **result) {
    w->out.len = 0;
    *result = PyObject_GetAttrString(obj, name); // new ref, owned by the caller
    if (*result) return SKY_OK;
    sky_fetch_error(&w->out);
    return SKY_PYERR;
}

int sky_encode_obj(sky_worker *w, PyObject *obj) {
    w->out.len = 0;
    if (sky_encode(&w->out, obj, 0) == 0) return SKY_OK;
    sky_fetch_error(&w->out);
    return SKY_PYERR;
}

void sky_decref(PyObject *o) { Py_XDECREF(o); }
