// aio.c: `async def score` on one event loop. The driver (engine/aio.py)
// runs the loop; it asks Go for cases and model replies (aio_poll) when the
// wake-up pipe Go writes to is readable or a task ends, and hands each
// case's result to Go (aio_done). A case's task carries an AioCase in
// _skynet_host.case, which is how the skynet module and print() capture
// find their case on a loop that interleaves many.
#include "host.h"
#include <string.h>

void begin_call(sky_thread *t, sky_scratch *s, uint64_t token, int capture, uintptr_t context,
                sky_scratch **saved_capture, uintptr_t *saved_context, uint64_t *saved_running);
void end_call(sky_thread *t, sky_scratch *saved_capture, uintptr_t saved_context,
              uint64_t saved_running);

// Go's side (aio.go).
extern int skyAioPoll(uintptr_t host, int room, sky_buf *out);
extern void skyAioDone(uintptr_t host, uint64_t token, int status, char *data, size_t len, char *logs,
                       size_t logs_len, int cut, int64_t elapsed_ns, int64_t run_ns);

// Results' status, as aio_done is told: score returned, raised, overran its
// time, or run (a program case) raised.
enum { AIO_VALUE = 0, AIO_RAISED = 1, AIO_TIMEOUT = 2, AIO_RUN_RAISED = 3 };

int sky_aio_serve(sky_scratch *s, PyObject *driver, PyObject *fn, PyObject *run, int efd, int limit,
                  double timeout, double run_timeout, size_t logs_limit, uint64_t token, uintptr_t context,
                  uintptr_t host) {
    int entered = sky_enter();
    if (entered < 0) return SKY_NOTHREAD;
    sky_thread *t = sky_current_thread();
    sky_aio aio;
    memset(&aio, 0, sizeof aio);
    aio.host = host;
    t->aio = &aio;
    t->case_index = -1;
    sky_scratch *saved_capture;
    uintptr_t saved_context;
    uint64_t saved_running;
    // No thread capture: each case's output goes to its AioCase.
    begin_call(t, s, token, 0, context, &saved_capture, &saved_context, &saved_running);
    PyObject *res = PyObject_CallFunction(driver, "OOiiddn", fn, run ? run : Py_None, efd, limit, timeout,
                                          run_timeout, (Py_ssize_t)logs_limit); // new ref
    sky_exit_if_forked();
    end_call(t, saved_capture, saved_context, saved_running);
    int rc = res ? SKY_OK : SKY_PYERR;
    s->out.len = 0;
    if (!res) sky_fetch_error(&s->out);
    Py_XDECREF(res);
    Py_CLEAR(aio.new_call);
    t->aio = NULL;
    sky_buf_free(&aio.feed);
    sky_buf_free(&aio.out);
    sky_leave(entered);
    return rc;
}

// aio_of is the calling thread's event loop state, or NULL with an exception set.
static sky_aio *aio_of(void) {
    sky_thread *t = sky_current_thread();
    if (!t || !t->aio) {
        PyErr_SetString(PyExc_RuntimeError, "_skynet_host: no event loop is scoring on this thread");
        return NULL;
    }
    return t->aio;
}

int sky_case_of(sky_thread *t, int64_t *index, int *in_run, int64_t *run_ns) {
    *in_run = t->phase == SKY_PHASE_RUN;
    *run_ns = t->run_ns;
    if (!t->aio) {
        *index = t->case_index;
        return 1;
    }
    PyObject *c = NULL;
    if (PyContextVar_Get(sky_main.case_var, NULL, &c) < 0) { // new ref, or NULL when unset
        PyErr_Clear();
        return 0;
    }
    if (!c) return 0;
    int ok = 0;
    PyObject *tok = PyObject_GetAttrString(c, "token"), *run = PyObject_GetAttrString(c, "in_run"),
             *ns = PyObject_GetAttrString(c, "run_ns"); // new refs
    if (tok && run && ns) {
        *index = (int64_t)PyLong_AsLongLong(tok);
        *in_run = PyObject_IsTrue(run) == 1;
        *run_ns = (int64_t)PyLong_AsLongLong(ns);
        ok = !PyErr_Occurred();
    }
    PyErr_Clear();
    Py_XDECREF(tok);
    Py_XDECREF(run);
    Py_XDECREF(ns);
    Py_DECREF(c);
    return ok;
}

PyObject *sky_aio_new_call(sky_thread *t, uint64_t *id) {
    if (!t->aio || !t->aio->new_call) {
        PyErr_SetString(PyExc_RuntimeError, "skynet.allm() needs the event loop Skynet runs `async def score` on");
        return NULL;
    }
    PyObject *pair = PyObject_CallNoArgs(t->aio->new_call); // new ref: (id, future)
    if (!pair) return NULL;
    PyObject *fut = NULL;
    if (PyTuple_Check(pair) && PyTuple_GET_SIZE(pair) == 2) {
        *id = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(pair, 0));
        if (!PyErr_Occurred()) fut = Py_NewRef(PyTuple_GET_ITEM(pair, 1));
    } else {
        PyErr_SetString(PyExc_RuntimeError, "skynet.allm(): the driver's hook returned no (id, future)");
    }
    Py_DECREF(pair);
    return fut;
}

PyObject *sky_aio_hook(PyObject *self, PyObject *arg) {
    sky_aio *aio = aio_of();
    if (!aio) return NULL;
    Py_XSETREF(aio->new_call, arg == Py_None ? NULL : Py_NewRef(arg));
    Py_RETURN_NONE;
}

// The feed skyAioPoll writes, little-endian: u32 replies, u32 cases, u8 stop;
// each reply: u64 id, u8 ok, u8 no_model, u32 n, n bytes (text or message);
// each case: u64 token, u32 nargs, then per argument u32 n and n bytes of an
// encoded value.
static int take_u32(const char **p, const char *end, uint32_t *v) {
    if (end - *p < 4) return 0;
    memcpy(v, *p, 4);
    *p += 4;
    return 1;
}

static int take_u64(const char **p, const char *end, uint64_t *v) {
    if (end - *p < 8) return 0;
    memcpy(v, *p, 8);
    *p += 8;
    return 1;
}

// aio_poll(room) -> (replies, cases, stop): the model replies that came in,
// each (id, ok, text or message, no_model); up to room new cases, each
// (token, args); and whether the loop should stop.
PyObject *sky_aio_poll(PyObject *self, PyObject *arg) {
    sky_aio *aio = aio_of();
    if (!aio) return NULL;
    long room = PyLong_AsLong(arg);
    if (room == -1 && PyErr_Occurred()) return NULL;
    aio->feed.len = 0;
    int stop;
    Py_BEGIN_ALLOW_THREADS // Go takes locks the submitters hold briefly
    stop = skyAioPoll(aio->host, room < 0 ? 0 : (int)room, &aio->feed);
    Py_END_ALLOW_THREADS
    sky_exit_if_forked();
    if (stop < 0) return PyErr_NoMemory();
    const char *p = aio->feed.data, *end = p + aio->feed.len;
    PyObject *replies = NULL, *cases = NULL, *res = NULL;
    uint32_t nrep = 0, ncase = 0;
    if (!take_u32(&p, end, &nrep) || !take_u32(&p, end, &ncase)) goto bad;
    if (!(replies = PyList_New(nrep)) || !(cases = PyList_New(ncase))) goto done;
    for (uint32_t i = 0; i < nrep; i++) {
        uint64_t id;
        uint32_t n;
        if (!take_u64(&p, end, &id) || end - p < 2) goto bad;
        int ok = p[0], no_model = p[1];
        p += 2;
        if (!take_u32(&p, end, &n) || (size_t)(end - p) < n) goto bad;
        PyObject *item = Py_BuildValue("(KOs#O)", (unsigned long long)id, ok ? Py_True : Py_False, p,
                                       (Py_ssize_t)n, no_model ? Py_True : Py_False); // new ref
        if (!item) goto done;
        PyList_SET_ITEM(replies, i, item); // steals
        p += n;
    }
    for (uint32_t i = 0; i < ncase; i++) {
        uint64_t token;
        uint32_t nargs;
        if (!take_u64(&p, end, &token) || !take_u32(&p, end, &nargs) || nargs > 8) goto bad;
        PyObject *args = PyTuple_New(nargs); // new ref
        if (!args) goto done;
        for (uint32_t k = 0; k < nargs; k++) {
            uint32_t n;
            if (!take_u32(&p, end, &n) || (size_t)(end - p) < n) {
                Py_DECREF(args);
                goto bad;
            }
            const char *q = p, *vend = p + n;
            PyObject *v = sky_decode(&q, vend, 0); // new ref
            if (!v) {
                Py_DECREF(args);
                goto done;
            }
            PyTuple_SET_ITEM(args, k, v); // steals
            p = vend;
        }
        PyObject *item = Py_BuildValue("(KN)", (unsigned long long)token, args); // new ref; steals args
        if (!item) goto done;
        PyList_SET_ITEM(cases, i, item); // steals
    }
    res = Py_BuildValue("(OOO)", replies, cases, stop ? Py_True : Py_False);
    goto done;
bad:
    PyErr_SetString(PyExc_RuntimeError, "_skynet_host.aio_poll: malformed feed from the host");
done:
    Py_XDECREF(replies);
    Py_XDECREF(cases);
    return res;
}

// aio_done(token, status, value, output, elapsed_ns, run_ns, logs, cut): a
// case's result, encoded as a batch slot holds it, to Go. value is score's
// return value (AIO_VALUE) or the exception raised (AIO_RAISED,
// AIO_RUN_RAISED); output is what run returned, for a program case.
PyObject *sky_aio_done(PyObject *self, PyObject *args) {
    sky_aio *aio = aio_of();
    if (!aio) return NULL;
    unsigned long long token;
    int status, cut;
    PyObject *value, *output;
    long long elapsed, run_ns;
    const char *logs;
    Py_ssize_t logs_len;
    if (!PyArg_ParseTuple(args, "KiOOLLy#p", &token, &status, &value, &output, &elapsed, &run_ns, &logs,
                          &logs_len, &cut))
        return NULL;
    sky_buf *out = &aio->out;
    out->len = 0;
    int rc = SKY_PYERR;
    switch (status) {
    case AIO_VALUE:
        if (output != Py_None && sky_encode(out, output, 0) < 0) {
            out->len = 0;
            sky_fetch_error(out); // the output cannot be reported: a run error, as in a batch
            rc = SKY_RUNERR;
            break;
        }
        {
            size_t mark = out->len;
            if (sky_encode_result(out, value) == 0) {
                rc = SKY_OK;
            } else {
                out->len = mark;
                sky_fetch_error_append(out);
            }
        }
        break;
    case AIO_RAISED:
    case AIO_RUN_RAISED:
        if (status == AIO_RAISED && output != Py_None && sky_encode(out, output, 0) < 0) {
            out->len = 0;
            sky_fetch_error(out);
            rc = SKY_RUNERR;
            break;
        }
        if (!PyExceptionInstance_Check(value)) {
            PyErr_SetString(PyExc_TypeError, "_skynet_host.aio_done: not an exception");
            return NULL;
        }
        // PyErr_Restore steals all three.
        PyErr_Restore(Py_NewRef((PyObject *)Py_TYPE(value)), Py_NewRef(value), PyException_GetTraceback(value));
        if (status == AIO_RAISED) {
            sky_fetch_error_append(out);
        } else {
            sky_fetch_error(out);
            rc = SKY_RUNERR;
        }
        break;
    case AIO_TIMEOUT:
        rc = -1;
        break;
    default:
        PyErr_SetString(PyExc_ValueError, "_skynet_host.aio_done: bad status");
        return NULL;
    }
    skyAioDone(aio->host, token, rc, out->data, out->len, (char *)logs, (size_t)logs_len, cut, elapsed, run_ns);
    Py_RETURN_NONE;
}
