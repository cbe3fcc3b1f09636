// host.h: the C half of package cpython. C owns every PyObject; Go sees only
// opaque pointers, byte buffers and status codes.
#ifndef SKYNET_HOST_H
#define SKYNET_HOST_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stddef.h>

// sky_buf is a growable byte buffer owned by C and reused across calls.
typedef struct {
    char *data;
    size_t len, cap;
} sky_buf;

// sky_worker is one OS thread's Python thread state plus its per-call scratch.
typedef struct {
    PyThreadState *tstate;
    unsigned long tid;       // PyThread_get_thread_ident() of the owning thread
    uint64_t running;        // token of the call in progress, 0 when idle (GIL held)
    int interrupt_posted;    // an async exception was posted (GIL held)
    int capturing;           // sys.stdout/sys.stderr writes go to logs
    sky_buf out;             // encoded result or error of the last call
    sky_buf logs;            // captured output of the current call
    size_t logs_limit;
    int logs_truncated;
} sky_worker;

// Status codes of calls into Python.
enum { SKY_OK = 0, SKY_PYERR = 1 };

int sky_initialize(const char *program_name, const char *home, int argc, char **argv,
                   const char *bootstrap, sky_buf *err);
void sky_buf_free(sky_buf *b);

sky_worker *sky_worker_new(size_t logs_limit);
void sky_worker_enter(sky_worker *w);
void sky_worker_leave(sky_worker *w);
void sky_worker_free(sky_worker *w);
int sky_interrupt(sky_worker *w, uint64_t token);

int sky_call(sky_worker *w, PyObject *fn, PyObject *first, const char *in, size_t inlen,
             int nargs, uint64_t token, int capture);
int sky_call_obj(sky_worker *w, PyObject *fn, const char *in, size_t inlen, int nargs,
                 PyObject **result);
int sky_exec_module(sky_worker *w, const char *name, const char *filename, const char *source,
                    PyObject **result);
int sky_getattr(sky_worker *w, PyObject *obj, const char *name, PyObject **result);
int sky_encode_obj(sky_worker *w, PyObject *obj);
void sky_decref(PyObject *o);

// Codec (codec.c).
PyObject *sky_decode(const char **p, const char *end, int depth);
int sky_encode(sky_buf *b, PyObject *o, int depth);
int sky_buf_put_str(sky_buf *b, const char *s, size_t n);
void sky_fetch_error(sky_buf *out);

#endif
