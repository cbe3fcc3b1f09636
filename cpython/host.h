// host.h: the C half of package cpython. C owns every PyObject; Go sees only
// opaque pointers, byte buffers and status codes.
#ifndef SKYNET_HOST_H
#define SKYNET_HOST_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stddef.h>
#include <unistd.h>

// sky_interp is what the host keeps of the process's one interpreter (the
// main one, sky_main): objects C caches across calls, made once at start-up.
typedef struct sky_interp {
    PyInterpreterState *interp;
    PyObject *interrupt_type;   // _skynet_host.Interrupted
    PyObject *format_exception; // traceback.format_exception
    PyObject *k_feedback, *k_scores; // interned keys of the score record (batch.c)
    PyObject *case_var;         // _skynet_host.case: the async case a task runs for (aio.c)
} sky_interp;

extern sky_interp sky_main;

// sky_buf is a growable byte buffer owned by C and reused across calls.
typedef struct {
    char *data;
    size_t len, cap;
} sky_buf;

// sky_scratch holds one call's results. Go owns one per goroutine that makes
// calls, so a result stays valid after the GIL is released and whatever OS
// thread ran the call moves on.
typedef struct {
    sky_buf out;          // encoded result, or an error as three strings
    sky_buf logs;         // output the call wrote to sys.stdout/sys.stderr
    size_t logs_limit;
    int logs_truncated;
} sky_scratch;

// sky_thread is the Python thread state of one OS thread. It is made the
// first time the thread calls into Python and kept for the thread's life, so
// no call pays for PyGILState_Ensure creating and destroying one. The thread
// that initialised in main-thread mode keeps the main thread state instead,
// the one PyGILState_Ensure finds there (sky_initialize).
typedef struct sky_thread {
    PyThreadState *tstate;
    unsigned long tid;         // PyThread_get_thread_ident()
    int inside;                // holds the GIL through sky_enter
    uint64_t running;          // token of the call in progress, 0 when idle (atomic; written with the GIL)
    int interrupt_posted;      // an async exception is pending (GIL held)
    sky_scratch *capture;      // where the running call's output goes, or NULL
    uintptr_t context;         // the running call's host value (a cgo.Handle), 0 outside calls
    int64_t case_index;        // which case of a batch is running, for context lookups
    int phase;                 // SKY_PHASE_* of the call running
    int64_t run_ns;            // the running case's measured run time, -1 if none
    int untrusted;             // the running call is in untrusted mode (audit.c)
    struct sky_aio *aio;       // the event loop this thread runs (aio.c), or NULL
    struct sky_thread *next;   // all threads, for sky_interrupt
} sky_thread;

// sky_forked_child is set (by a pthread_atfork handler sky_initialize
// registers) in the child of every fork() of this process. That child is a
// copy of the Go runtime with one thread; returning into Go there would run
// the host a second time (duplicate results, a second summary, an orphan
// holding the parent's pipes). Children that exec (subprocess) or end with
// os._exit (multiprocessing's fork workers) never get back to our code, so
// the check costs them nothing.
extern int sky_forked_child;

// sky_exit_if_forked ends a forked child, writing nothing, wherever control
// would go from Python back into Go: after each call into Python that Go
// made, before returning to Go, and before a C trampoline calls a Go
// callback. One load of a global on the hot path.
static inline void sky_exit_if_forked(void) {
    if (__builtin_expect(sky_forked_child, 0)) _exit(0);
}

// Status codes of calls into Python.
enum { SKY_OK = 0, SKY_PYERR = 1, SKY_NOTHREAD = 2, SKY_RUNERR = 3 };

// What a case is doing: scoring, or running the program that makes its output.
enum { SKY_PHASE_SCORE = 0, SKY_PHASE_RUN = 1 };

// sky_initialize starts the interpreter on the calling OS thread. With
// main_thread set, that is the process's main thread and stays its Python
// main thread: Python gets python3's signal handlers and the main thread
// state is this thread's sky_thread. On return the GIL is released.
int sky_initialize(const char *program_name, const char *home, int argc, char **argv,
                   const char *bootstrap, size_t memory_limit, int main_thread, sky_buf *err);
void sky_limit_memory(size_t bytes);
void sky_buf_free(sky_buf *b);

// sky_enter takes the GIL for this OS thread: 1 when it took it, 0 when
// this thread already held it (a nested call), -1 on failure (no thread
// state).
int sky_enter(void);
void sky_leave(int entered);
int sky_interrupt(uint64_t token);
// sky_current_thread is the thread state of the call running on this OS
// thread, or NULL outside calls.
sky_thread *sky_current_thread(void);
int sky_allow_writes(const char *dir);
int sky_install_audit_hook(void);
// sky_protect makes os.kill and os.killpg refuse to signal process pid or
// its process group pgid, from any thread: a worker's parent.
void sky_protect(long pid, long pgid);
void sky_set_untrusted(int on);
int sky_take_cwd_moved(void); // 1 once after Python changed the working directory

sky_scratch *sky_scratch_new(size_t logs_limit);
void sky_scratch_free(sky_scratch *s);

// sky_call_gil takes the GIL, calls, and releases it: one crossing per call.
int sky_call_gil(sky_scratch *s, PyObject *fn, const char *in, size_t inlen, int nargs,
                 uint64_t token, int capture, uintptr_t context);

// These need the GIL (sky_enter). fn, first and obj are borrowed. On SKY_OK,
// *result, where there is one, is a new reference the caller owns (release it with sky_decref);
// on an error it is NULL and s->out holds the encoded error.
int sky_call(sky_scratch *s, PyObject *fn, PyObject *first, const char *in, size_t inlen,
             int nargs, uint64_t token, int capture, uintptr_t context);
int sky_call_obj(sky_scratch *s, PyObject *fn, const char *in, size_t inlen, int nargs,
                 PyObject **result /* new reference */);
int sky_exec_module(sky_scratch *s, const char *name, const char *filename, const char *source,
                    PyObject **result /* new reference */);
int sky_getattr(sky_scratch *s, PyObject *obj, const char *name,
                PyObject **result /* new reference */);
int sky_encode_obj(sky_scratch *s, PyObject *obj);
void sky_decref(PyObject *o); // steals o's reference; NULL is ignored

// Batches (batch.c): many calls of one function under one GIL hold, with
// per-case results published as they finish so a watchdog on another thread
// can see progress, time a case out and take back cases not yet started.
enum { SKY_SLOT_PENDING = 0, SKY_SLOT_RUNNING = 1, SKY_SLOT_DONE = 2, SKY_SLOT_ABANDONED = 3 };

typedef struct {
    int state;                 // SKY_SLOT_*, atomic
    int status;                // SKY_OK or SKY_PYERR once DONE
    char *data;                // encoded result or error, in the batch's chunks
    size_t len;
    char *logs;                // captured output, or NULL
    size_t logs_len;
    int logs_truncated;
    int64_t elapsed_ns;
    int64_t run_ns;            // run's wall time when the batch runs a program, else -1
} sky_slot;

typedef struct sky_chunk sky_chunk;

typedef struct {
    sky_chunk *chunks;         // where slot data and logs live; never moved
    int64_t current;           // index of the case running, -1 when none (atomic)
    int64_t started_ns;        // when its current phase started, CLOCK_MONOTONIC (atomic)
    int phase;                 // SKY_PHASE_* of the case running (atomic)
    int64_t budget_ns;         // stop starting new cases after this long (0: no limit)
    int64_t took_ns;           // the finished cases' elapsed_ns, summed (written by the scoring thread)
    int n;
    int cap;                   // slots allocated (a reused batch may hold fewer cases)
    sky_slot slots[];
} sky_batch;

// sky_argcache keeps Python objects for argument values that repeat across
// calls (an optimizer scores many candidates on one dataset), indexed by ids
// the Go side assigns. Only values a call cannot change are reused: immutable
// ones, and flat dicts whose version tag shows they were not modified.
typedef struct {
    PyObject *obj;
    uint64_t version;
    int kind;
} sky_cache_entry;

typedef struct {
    sky_cache_entry *e;
    int32_t cap;
} sky_argcache;

sky_argcache *sky_argcache_new(void);
void sky_argcache_free(sky_argcache *c);

sky_batch *sky_batch_new(int n);
int sky_batch_reset(sky_batch *b, int n); // reuse for n <= cap cases; 0 when it cannot
void sky_batch_free(sky_batch *b);
int sky_score_batch(sky_scratch *s, sky_batch *b, PyObject *fn, PyObject *run, int nargs,
                    const char *in, size_t inlen, const size_t *offsets, const int32_t *ids,
                    sky_argcache *cache, uint64_t token_base, int flags, uintptr_t context);
int sky_batch_phase(sky_batch *b);

// sky_score_batch flags.
enum { SKY_CAPTURE = 1, SKY_UNTRUSTED = 2 };
int sky_slot_claim(sky_batch *b, int i);
sky_slot *sky_batch_slot(sky_batch *b, int i);
int sky_slot_state(sky_batch *b, int i);
int64_t sky_batch_current(sky_batch *b, int64_t *started_ns);
int64_t sky_now_ns(void);

// Async scoring (aio.c): `async def score` runs as tasks on one event loop,
// on the thread that calls sky_aio_serve. Go feeds it cases and model replies
// and takes each case's result through exported callbacks (skyAioPoll,
// skyAioDone), so Python never waits on Go and Go never touches Python.
typedef struct sky_aio {
    uintptr_t host;     // the Go side (a cgo.Handle), for skyAioPoll/skyAioDone
    sky_buf feed;       // what skyAioPoll wrote
    sky_buf out;        // a result being encoded
    PyObject *new_call; // the driver's hook for skynet.allm: () -> (id, future)
} sky_aio;

// sky_aio_serve runs driver(fn, run, efd, limit, timeout, logs_limit) with the
// GIL, context set for the skynet module, until it returns (Go said stop).
// Returns SKY_OK, or SKY_PYERR with the error in s->out.
int sky_aio_serve(sky_scratch *s, PyObject *driver, PyObject *fn, PyObject *run, int efd, int limit,
                  double timeout, double run_timeout, size_t logs_limit, uint64_t token, uintptr_t context,
                  uintptr_t host);
// sky_case_of is the case the calling code runs for: a batch's case index,
// or, on an event loop, the token of the task's case (from its context);
// whether run (not score) is running, and run's measured time (-1: none).
// 0: no case. Needs the GIL.
int sky_case_of(sky_thread *t, int64_t *index, int *in_run, int64_t *run_ns);
// sky_aio_new_call registers a model call of an async case with the driver:
// a new reference to its future, and its id. NULL with an exception set.
PyObject *sky_aio_new_call(sky_thread *t, uint64_t *id);
// _skynet_host's functions for the driver (aio.c).
PyObject *sky_aio_poll(PyObject *self, PyObject *arg);
PyObject *sky_aio_done(PyObject *self, PyObject *args);
PyObject *sky_aio_hook(PyObject *self, PyObject *arg);
// sky_encode_result encodes a score call's value as a batch slot does: the
// compact score record when it is one, else in full. -1 with an exception set.
int sky_encode_result(sky_buf *out, PyObject *res);

// Codec (codec.c).
PyObject *sky_decode(const char **p, const char *end, int depth);
int sky_encode(sky_buf *b, PyObject *o, int depth);
int sky_buf_put_str(sky_buf *b, const char *s, size_t n);
char *sky_buf_reserve(sky_buf *b, size_t n); // n bytes appended, to be written; NULL: no memory
void sky_fetch_error(sky_buf *out);
void sky_fetch_error_append(sky_buf *out);

// The value buffer's two number encodings, written to memory the caller
// sized: shared by the codec's buffer writers and the batch's score record.
static inline size_t sky_uvarint_len(uint64_t v) {
    size_t n = 1;
    while (v >= 0x80) { v >>= 7; n++; }
    return n;
}

static inline char *sky_put_uvarint(char *p, uint64_t v) {
    while (v >= 0x80) { *p++ = (char)(v | 0x80); v >>= 7; }
    *p++ = (char)v;
    return p;
}

static inline char *sky_put_u64(char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (char)(v >> (8 * i)); // little-endian, as Go reads it
    return p + 8;
}

#endif
