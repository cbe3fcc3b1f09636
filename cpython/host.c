// host.c: interpreter lifecycle, worker thread states, calls and errors.
#include "host.h"
#include <pthread.h>
#include <signal.h>
#include <string.h>

// An OS thread has one thread state (tls_thread), made on first use.
static __thread sky_thread *tls_thread;
static sky_thread *all_threads;              // every thread state we made
static PyThread_type_lock threads_lock;      // guards all_threads
sky_interp sky_main;

int sky_forked_child; // see host.h

// mark_forked_child runs in the child of each fork() (only there), before
// fork() returns to whoever called it. Async-signal-safe: one store.
static void mark_forked_child(void) { sky_forked_child = 1; }

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
    sky_thread *t = sky_current_thread();
    sky_scratch *w = t ? t->capture : NULL;
    if (!w) Py_RETURN_FALSE;
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
    {"aio_poll", sky_aio_poll, METH_O, "aio_poll(room) -> (replies, cases, stop): what Go has for the event loop."},
    {"aio_done", sky_aio_done, METH_VARARGS, "aio_done(token, status, value, output, elapsed_ns, run_ns, logs, cut): a case's result to Go."},
    {"aio_hook", sky_aio_hook, METH_O, "aio_hook(new_call): the driver's hook for skynet.allm, or None."},
    {NULL, NULL, 0, NULL},
};

// host_exec makes the Interrupted type, which interp_setup keeps in sky_main.
static int host_exec(PyObject *m) {
    PyObject *type = PyErr_NewExceptionWithDoc(
        "_skynet_host.Interrupted",
        "Raised inside a call that overran its time limit or was cancelled.",
        PyExc_BaseException, NULL); // new ref
    if (!type) return -1;
    if (PyModule_AddObject(m, "Interrupted", type) < 0) { // steals on success
        Py_DECREF(type);
        return -1;
    }
    return 0;
}

static PyModuleDef_Slot host_slots[] = {
    {Py_mod_exec, host_exec},
#ifdef Py_mod_multiple_interpreters
    {Py_mod_multiple_interpreters, Py_MOD_PER_INTERPRETER_GIL_SUPPORTED},
#endif
    {0, NULL},
};

static struct PyModuleDef host_module = {
    PyModuleDef_HEAD_INIT, "_skynet_host", "Skynet host hooks (internal).", 0,
    host_methods, host_slots, NULL, NULL, NULL,
};

static PyObject *PyInit__skynet_host(void) { return PyModuleDef_Init(&host_module); }

static int interp_setup(const char *bootstrap, sky_buf *err);
static sky_thread *new_thread(PyThreadState *tstate);

static void status_error(sky_buf *err, PyStatus st) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s%s%s", st.func ? st.func : "", st.func ? ": " : "",
             st.err_msg ? st.err_msg : "Python initialisation failed");
    set_error(err, "InitError", msg);
}

// reset_go_signals gives back to SIG_DFL the signals whose handlers the Go
// runtime installed but a main-thread-mode process leaves to Python, so
// Python finds them as python3 does (signal.getsignal says SIG_DFL, not
// None) and installs its own (SIGINT). Go keeps what it needs: SIGURG
// (preemption), the synchronous faults it turns into panics or crashes
// (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSTKFLT, SIGSYS), SIGABRT,
// and SIGPIPE, which Python sets to SIG_IGN itself. SIGPROF serves only
// Go's CPU profiler, which such a process does not run. A signal ignored
// when the process started stays ignored where Go left it so (SIGHUP and
// SIGINT under nohup). os/signal.Notify for these no longer works: Go
// believes its handler is still there.
static int reset_go_signals(void) {
    static const int sigs[] = {SIGHUP,  SIGINT,  SIGQUIT,  SIGUSR1,   SIGUSR2, SIGALRM,
                               SIGTERM, SIGCHLD, SIGCONT,  SIGTSTP,   SIGTTIN, SIGTTOU,
                               SIGXCPU, SIGVTALRM, SIGPROF, SIGWINCH, SIGIO,   SIGPWR};
    struct sigaction dfl, old;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    int n = (int)(sizeof sigs / sizeof sigs[0]);
    // The real-time signals glibc leaves to programs (SIGRTMIN is past the
    // two it reserves for itself); Go installs a handler on each.
    for (int i = 0; i < n + (SIGRTMAX - SIGRTMIN + 1); i++) {
        int sig = i < n ? sigs[i] : SIGRTMIN + (i - n);
        if (sigaction(sig, NULL, &old) != 0) return -1;
        if (!(old.sa_flags & SA_SIGINFO) && (old.sa_handler == SIG_IGN || old.sa_handler == SIG_DFL)) continue;
        if (sigaction(sig, &dfl, NULL) != 0) return -1;
    }
    return 0;
}

// sky_initialize starts the one interpreter of the process (host.h). Off the
// main thread the Go runtime owns signals, so Python installs no handlers.
// faulthandler stays off whatever the environment says: it would turn Go's
// recoverable faults into fatal ones.
int sky_initialize(const char *program_name, const char *home, int argc, char **argv,
                   const char *bootstrap, size_t memory_limit, int main_thread, sky_buf *err) {
    PyConfig config;
    PyStatus st;
    // Once per process, as sky_initialize is: before any Python code can fork.
    if (pthread_atfork(NULL, NULL, mark_forked_child) != 0) {
        set_error(err, "InitError", "cannot register the fork handler");
        return -1;
    }
    if (main_thread && reset_go_signals() < 0) {
        set_error(err, "InitError", "cannot reset the signal handlers");
        return -1;
    }
    if (memory_limit > 0) {
        // The memory cap wraps the allocators between pre-initialisation
        // and initialisation, the one point where that is allowed.
        PyPreConfig pre;
        PyPreConfig_InitPythonConfig(&pre);
        pre.allocator = PYMEM_ALLOCATOR_MALLOC; // plain malloc beneath the cap, whatever PYTHONMALLOC says
        st = Py_PreInitialize(&pre);
        if (PyStatus_Exception(st)) {
            status_error(err, st);
            return -1;
        }
        sky_limit_memory(memory_limit);
    }
    PyConfig_InitPythonConfig(&config);
    // python3's handlers (SIGINT raises KeyboardInterrupt, SIGPIPE and
    // SIGXFSZ ignored) on the main thread only: they use SA_ONSTACK, as Go
    // requires of foreign handlers.
    config.install_signal_handlers = main_thread ? 1 : 0;
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
    if (sky_install_audit_hook() < 0) {
        set_error(err, "InitError", "cannot install the audit hook");
        PyConfig_Clear(&config);
        return -1;
    }
    if (PyImport_AppendInittab("_skynet_host", PyInit__skynet_host) < 0) {
        set_error(err, "InitError", "cannot register _skynet_host");
        PyConfig_Clear(&config);
        return -1;
    }
    st = Py_InitializeFromConfig(&config);
    PyConfig_Clear(&config);
    if (PyStatus_Exception(st)) { status_error(err, st); return -1; }

    sky_main.interp = PyInterpreterState_Main();
    int rc = interp_setup(bootstrap, err);
    threads_lock = PyThread_allocate_lock();
    if (!threads_lock && rc == 0) {
        set_error(err, "InitError", "cannot allocate a lock");
        rc = -1;
    }
    // On the main thread, calls use the main thread state: it is the one
    // PyGILState_Ensure (ctypes callbacks, C extensions) finds on this
    // thread, so a second one would leave it restoring a state that is
    // not current. Elsewhere it stays parked and calls use their own.
    if (rc == 0 && main_thread && !new_thread(PyThreadState_Get())) {
        set_error(err, "InitError", "cannot register the main thread state");
        rc = -1;
    }
    PyEval_SaveThread();
    return rc;
fail:
    status_error(err, st);
    PyConfig_Clear(&config);
    return -1;
}

// interp_setup gives the interpreter what the host needs of it: its
// Interrupted type, traceback formatter and interned keys, and the bootstrap
// (host.py) that routes sys.stdout and sys.stderr. Runs with the GIL held.
static int interp_setup(const char *bootstrap, sky_buf *err) {
    sky_interp *in = &sky_main;
    int rc = -1;
    PyObject *tb = NULL, *host = NULL, *globals = NULL, *res = NULL, *threading = NULL;
    // threading names as its main thread the one that first imports it:
    // this one, which initialised the runtime and is the one signal.signal
    // accepts. Imported later by a call on another thread, it would call
    // that thread main, and code that checks current_thread() is
    // main_thread() before signal.signal (DSPy, timeout helpers) would
    // raise ValueError instead of taking its other path.
    threading = PyImport_ImportModule("threading"); // new ref
    if (!threading) goto done;
    tb = PyImport_ImportModule("traceback"); // new ref
    if (!tb) goto done;
    in->format_exception = PyObject_GetAttrString(tb, "format_exception"); // new ref, kept forever
    if (!in->format_exception) goto done;
    host = PyImport_ImportModule("_skynet_host"); // new ref
    if (!host) goto done;
    in->interrupt_type = PyObject_GetAttrString(host, "Interrupted"); // new ref, kept forever
    if (!in->interrupt_type) goto done;
    in->k_feedback = PyUnicode_InternFromString("feedback"); // new ref, kept forever
    in->k_scores = PyUnicode_InternFromString("scores");     // new ref, kept forever
    if (!in->k_feedback || !in->k_scores) goto done;
    in->case_var = PyContextVar_New("skynet_case", NULL); // new ref, kept forever
    if (!in->case_var || PyObject_SetAttrString(host, "case", in->case_var) < 0) goto done;
    globals = PyDict_New(); // new ref
    if (!globals || PyDict_SetItemString(globals, "__builtins__", PyEval_GetBuiltins()) < 0) goto done;
    res = PyRun_String(bootstrap, Py_file_input, globals, globals); // new ref
    if (!res) goto done;
    rc = 0;
done:
    if (rc < 0) sky_fetch_error(err);
    Py_XDECREF(res);
    Py_XDECREF(globals);
    Py_XDECREF(host);
    Py_XDECREF(tb);
    Py_XDECREF(threading);
    return rc;
}

// new_thread registers tstate, or a new thread state (PyThreadState_New
// does not need the GIL), as this OS thread's.
static sky_thread *new_thread(PyThreadState *tstate) {
    sky_thread *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->tstate = tstate ? tstate : PyThreadState_New(sky_main.interp);
    if (!t->tstate) { free(t); return NULL; }
    t->tid = PyThread_get_thread_ident();
    PyThread_acquire_lock(threads_lock, WAIT_LOCK);
    t->next = all_threads;
    all_threads = t;
    PyThread_release_lock(threads_lock);
    tls_thread = t;
    return t;
}

sky_thread *sky_current_thread(void) {
    sky_thread *t = tls_thread;
    return t && t->inside ? t : NULL;
}

int sky_enter(void) {
    sky_thread *t = tls_thread;
    if (t && t->inside) return 0;
    if (!t && !(t = new_thread(NULL))) return -1;
    PyEval_RestoreThread(t->tstate);
    t->inside = 1;
    return 1;
}

void sky_leave(int entered) {
    sky_exit_if_forked(); // whatever ran under this GIL hold forked and returned
    if (entered != 1) return;
    tls_thread->inside = 0;
    PyEval_SaveThread();
}

sky_scratch *sky_scratch_new(size_t logs_limit) {
    sky_scratch *s = calloc(1, sizeof *s);
    if (s) s->logs_limit = logs_limit;
    return s;
}

void sky_scratch_free(sky_scratch *s) {
    if (!s) return;
    sky_buf_free(&s->out);
    sky_buf_free(&s->logs);
    free(s);
}

// running reports whether the call with this token is running on some thread.
static int running(uint64_t token) {
    int found = 0;
    PyThread_acquire_lock(threads_lock, WAIT_LOCK);
    for (sky_thread *t = all_threads; t && !found; t = t->next)
        found = __atomic_load_n(&t->running, __ATOMIC_ACQUIRE) == token;
    PyThread_release_lock(threads_lock);
    return found;
}

// sky_interrupt raises Interrupted in the call with this token, if it is
// still running on some thread. It waits for the GIL, so a call stuck in C
// code that never releases the GIL keeps it waiting too.
int sky_interrupt(uint64_t token) {
    if (token == 0 || !running(token)) return 0;
    int entered = sky_enter();
    if (entered < 0) return 0;
    int posted = 0;
    PyThread_acquire_lock(threads_lock, WAIT_LOCK);
    for (sky_thread *t = all_threads; t; t = t->next) {
        if (__atomic_load_n(&t->running, __ATOMIC_ACQUIRE) == token) {
            posted = PyThreadState_SetAsyncExc(t->tid, sky_main.interrupt_type) > 0;
            if (posted) t->interrupt_posted = 1;
            break;
        }
    }
    PyThread_release_lock(threads_lock);
    sky_leave(entered);
    return posted;
}

// sky_fetch_error moves the current Python exception into out as three strings:
// type name, message, formatted traceback. It never prints and never exits,
// so SystemExit and KeyboardInterrupt are ordinary errors here.
void sky_fetch_error(sky_buf *out) {
    out->len = 0;
    sky_fetch_error_append(out);
}

// sky_fetch_error_append is sky_fetch_error writing after what out holds.
void sky_fetch_error_append(sky_buf *out) {
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
    if (value && sky_main.format_exception) {
        lines = PyObject_CallOneArg(sky_main.format_exception, value);
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

int sky_decode_args(const char *in, size_t inlen, int nargs, PyObject **args);

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

int sky_decode_args(const char *in, size_t inlen, int nargs, PyObject **args) {
    return decode_args(in, inlen, nargs, args);
}

// begin_call makes the call interruptible and routes its output.
void begin_call(sky_thread *t, sky_scratch *s, uint64_t token, int capture, uintptr_t context,
                       sky_scratch **saved_capture, uintptr_t *saved_context, uint64_t *saved_running) {
    *saved_capture = t->capture;
    *saved_context = t->context;
    *saved_running = t->running;
    __atomic_store_n(&t->running, token, __ATOMIC_RELEASE); // read by sky_interrupt without the GIL
    t->capture = capture ? s : NULL;
    t->context = context;
    if (capture) {
        s->logs.len = 0;
        s->logs_truncated = 0;
    }
}

// end_call stops a call's interruptibility before anything else runs Python
// (encoding, traceback formatting), so a late interrupt cannot land there or in
// the next call on this thread. It restores the state of an enclosing call.
void end_call(sky_thread *t, sky_scratch *saved_capture, uintptr_t saved_context,
                     uint64_t saved_running) {
    __atomic_store_n(&t->running, saved_running, __ATOMIC_RELEASE);
    t->capture = saved_capture;
    t->context = saved_context;
    if (t->interrupt_posted && saved_running == 0) {
        PyThreadState_SetAsyncExc(t->tid, NULL);
        t->interrupt_posted = 0;
    }
}

#define SKY_MAX_ARGS 8

// sky_call decodes the arguments, calls fn, and leaves the encoded result (or
// error) in s->out. With first set, it is passed before the decoded arguments.
int sky_call(sky_scratch *s, PyObject *fn, PyObject *first, const char *in, size_t inlen,
             int nargs, uint64_t token, int capture, uintptr_t context) {
    PyObject *args[SKY_MAX_ARGS] = {NULL};
    PyObject *res = NULL;
    sky_thread *t = tls_thread; // held by sky_enter
    int rc = SKY_PYERR, skip = first ? 1 : 0;
    s->out.len = 0;
    if (nargs < 0 || nargs + skip > SKY_MAX_ARGS) {
        PyErr_SetString(PyExc_ValueError, "too many arguments");
        goto done;
    }
    if (first) {
        Py_INCREF(first);
        args[0] = first; // released with the other arguments below
    }
    if (decode_args(in, inlen, nargs, args + skip) < 0) goto done;
    t->case_index = 0;
    t->phase = SKY_PHASE_SCORE;
    t->run_ns = -1;
    sky_scratch *saved_capture;
    uintptr_t saved_context;
    uint64_t saved_running;
    begin_call(t, s, token, capture, context, &saved_capture, &saved_context, &saved_running);
    res = PyObject_Vectorcall(fn, args, (size_t)(nargs + skip), NULL); // new ref
    sky_exit_if_forked();
    end_call(t, saved_capture, saved_context, saved_running);
    if (!res) goto done;
    if (sky_encode(&s->out, res, 0) < 0) goto done;
    rc = SKY_OK;
done:
    if (rc != SKY_OK) sky_fetch_error(&s->out);
    Py_XDECREF(res);
    for (int i = 0; i < SKY_MAX_ARGS; i++) Py_XDECREF(args[i]);
    return rc;
}

int sky_call_gil(sky_scratch *s, PyObject *fn, const char *in, size_t inlen, int nargs,
                 uint64_t token, int capture, uintptr_t context) {
    int entered = sky_enter();
    if (entered < 0) return SKY_NOTHREAD;
    int rc = sky_call(s, fn, NULL, in, inlen, nargs, token, capture, context);
    sky_leave(entered);
    return rc;
}

// sky_call_obj is sky_call for setup code that needs the result as an object.
int sky_call_obj(sky_scratch *s, PyObject *fn, const char *in, size_t inlen, int nargs,
                 PyObject **result) {
    PyObject *args[SKY_MAX_ARGS] = {NULL};
    *result = NULL;
    int rc = SKY_PYERR;
    s->out.len = 0;
    if (nargs < 0 || nargs > SKY_MAX_ARGS) {
        PyErr_SetString(PyExc_ValueError, "too many arguments");
        goto done;
    }
    if (decode_args(in, inlen, nargs, args) < 0) goto done;
    *result = PyObject_Vectorcall(fn, args, (size_t)nargs, NULL); // new ref, owned by the caller
    sky_exit_if_forked();
    if (*result) rc = SKY_OK;
done:
    if (rc != SKY_OK) sky_fetch_error(&s->out);
    for (int i = 0; i < SKY_MAX_ARGS; i++) Py_XDECREF(args[i]);
    return rc;
}

// sky_exec_module runs source as a new module registered in sys.modules.
int sky_exec_module(sky_scratch *s, const char *name, const char *filename, const char *source,
                    PyObject **result) {
    *result = NULL;
    s->out.len = 0;
    PyObject *code = Py_CompileString(source, filename, Py_file_input); // new ref
    if (!code) goto fail;
    PyObject *mod = PyImport_ExecCodeModuleEx(name, code, filename); // new ref
    sky_exit_if_forked(); // import-time code forked
    Py_DECREF(code);
    if (!mod) goto fail;
    *result = mod;
    return SKY_OK;
fail:
    sky_fetch_error(&s->out);
    return SKY_PYERR;
}

int sky_getattr(sky_scratch *s, PyObject *obj, const char *name, PyObject **result) {
    s->out.len = 0;
    *result = PyObject_GetAttrString(obj, name); // new ref, owned by the caller
    sky_exit_if_forked(); // a property or __getattr__ is Python code
    if (*result) return SKY_OK;
    sky_fetch_error(&s->out);
    return SKY_PYERR;
}

int sky_encode_obj(sky_scratch *s, PyObject *obj) {
    s->out.len = 0;
    int rc = sky_encode(&s->out, obj, 0); // a __repr__ it calls is Python code
    sky_exit_if_forked();
    if (rc == 0) return SKY_OK;
    sky_fetch_error(&s->out);
    return SKY_PYERR;
}

void sky_decref(PyObject *o) {
    Py_XDECREF(o);
    sky_exit_if_forked(); // a __del__ is Python code
}
