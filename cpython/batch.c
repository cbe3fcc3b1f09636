// batch.c: score many cases under one GIL hold. Each case's outcome lands in
// its own slot and is published with a release store, so a watchdog thread
// can read finished slots while a later case is still running (or stuck).
#include "host.h"
#include <string.h>
#include <time.h>
#include <math.h>

int sky_decode_args(const char *in, size_t inlen, int nargs, PyObject **args);
void begin_call(sky_thread *t, sky_scratch *s, uint64_t token, int capture, uintptr_t context,
                sky_scratch **saved_capture, uintptr_t *saved_context, uint64_t *saved_running);
void end_call(sky_thread *t, sky_scratch *saved_capture, uintptr_t saved_context,
              uint64_t saved_running);

#define SKY_MAX_ARGS 8

int64_t sky_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

// batch_clock reads CLOCK_MONOTONIC nanoseconds for a batch's per-case
// timing at a third of the cost on x86-64: the TSC (what the vDSO clock
// reads anyway), scaled by a ratio calibrated against CLOCK_MONOTONIC over
// earlier batches, and re-anchored to the real clock every few milliseconds
// so its error stays microseconds. Elsewhere, and until calibrated, it is
// CLOCK_MONOTONIC itself.
typedef struct {
    int64_t ns0;
    uint64_t tsc0;
    double ns_per_tick; // 0: read the real clock
} batch_clock;

#if defined(__x86_64__)
#include <x86intrin.h>
static uint64_t ns_per_tick_bits; // the calibrated ratio's bits; 0 until calibrated
#define REANCHOR_NS 5000000

static void clock_begin(batch_clock *c) {
    uint64_t bits = __atomic_load_n(&ns_per_tick_bits, __ATOMIC_RELAXED);
    memcpy(&c->ns_per_tick, &bits, sizeof bits);
    c->ns0 = sky_now_ns();
    c->tsc0 = __rdtsc();
}

static int64_t clock_now(batch_clock *c) {
    if (c->ns_per_tick == 0) return sky_now_ns();
    double ns = (double)(__rdtsc() - c->tsc0) * c->ns_per_tick;
    if (ns >= 0 && ns < REANCHOR_NS) return c->ns0 + (int64_t)ns;
    c->ns0 = sky_now_ns(); // long case (or a clock going odd): back to the real clock
    c->tsc0 = __rdtsc();
    return c->ns0;
}

// clock_end calibrates the ratio over the batch, when it was long enough
// to measure it well.
static void clock_end(batch_clock *c) {
    int64_t ns = sky_now_ns() - c->ns0;
    uint64_t ticks = __rdtsc() - c->tsc0;
    if (ns < 50000 || ticks == 0) return;
    double r = (double)ns / (double)ticks;
    if (!(r > 0.01 && r < 100)) return;
    uint64_t bits;
    memcpy(&bits, &r, sizeof bits);
    __atomic_store_n(&ns_per_tick_bits, bits, __ATOMIC_RELAXED);
}
#else
static void clock_begin(batch_clock *c) { c->ns0 = sky_now_ns(); c->ns_per_tick = 0; }
static int64_t clock_now(batch_clock *c) { return sky_now_ns(); }
static void clock_end(batch_clock *c) {}
#endif

sky_batch *sky_batch_new(int n) {
    sky_batch *b = calloc(1, sizeof *b + (size_t)n * sizeof(sky_slot));
    if (!b) return NULL;
    b->n = n;
    b->cap = n;
    b->current = -1;
    return b;
}

// Slot data lives in chunks that are never moved, so a watchdog may read a
// finished slot while later cases are still being written.
struct sky_chunk {
    sky_chunk *next;
    size_t cap, len;
    char data[];
};

void sky_batch_free(sky_batch *b) {
    if (!b) return;
    while (b->chunks) {
        sky_chunk *c = b->chunks;
        b->chunks = c->next;
        free(c);
    }
    free(b);
}

// sky_batch_reset makes a finished batch ready for n new cases, keeping its
// newest data chunk, so a stream of batches allocates nothing.
int sky_batch_reset(sky_batch *b, int n) {
    if (n > b->cap) return 0;
    sky_chunk *keep = b->chunks, *c = keep ? keep->next : NULL;
    while (c) {
        sky_chunk *next = c->next;
        free(c);
        c = next;
    }
    if (keep) {
        keep->next = NULL;
        keep->len = 0;
    }
    memset(b->slots, 0, (size_t)n * sizeof(sky_slot));
    b->n = n;
    b->current = -1;
    b->started_ns = 0;
    b->phase = 0;
    b->budget_ns = 0;
    b->took_ns = 0;
    return 1;
}

// reserve returns n bytes of slot data in the batch's chunks.
static char *reserve(sky_batch *b, size_t n) {
    sky_chunk *c = b->chunks;
    if (!c || c->len + n > c->cap) {
        size_t cap = n > 16384 ? n : 16384;
        c = malloc(sizeof *c + cap);
        if (!c) return NULL;
        c->cap = cap;
        c->len = 0;
        c->next = b->chunks;
        b->chunks = c;
    }
    char *d = c->data + c->len;
    c->len += n;
    return d;
}

static char *copy_out(sky_batch *b, const char *p, size_t n) {
    char *d = reserve(b, n);
    if (d && n) memcpy(d, p, n);
    return d;
}

// sky_slot_claim takes a case that has not started away from the batch, for
// cancellation or to hand it to another worker. 1 means it was taken.
int sky_slot_claim(sky_batch *b, int i) {
    int want = SKY_SLOT_PENDING;
    return __atomic_compare_exchange_n(&b->slots[i].state, &want, SKY_SLOT_ABANDONED, 0,
                                       __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

sky_slot *sky_batch_slot(sky_batch *b, int i) { return &b->slots[i]; }

int sky_slot_state(sky_batch *b, int i) { return __atomic_load_n(&b->slots[i].state, __ATOMIC_ACQUIRE); }

int64_t sky_batch_current(sky_batch *b, int64_t *started_ns) {
    int64_t cur = __atomic_load_n(&b->current, __ATOMIC_ACQUIRE);
    *started_ns = __atomic_load_n(&b->started_ns, __ATOMIC_ACQUIRE);
    return cur;
}

enum { KIND_NONE = 0, KIND_IMMUTABLE = 1, KIND_FLAT_DICT = 2, KIND_UNCACHEABLE = 3 };

sky_argcache *sky_argcache_new(void) { return calloc(1, sizeof(sky_argcache)); }

// sky_argcache_free drops the cached objects; it takes the GIL itself. Without
// a thread state to take it with, the objects are left: a leak, not a crash.
void sky_argcache_free(sky_argcache *c) {
    if (!c) return;
    int entered = sky_enter();
    if (entered >= 0) {
        for (int32_t i = 0; i < c->cap; i++) Py_XDECREF(c->e[i].obj);
        sky_leave(entered);
    }
    free(c->e);
    free(c);
}

static int immutable_scalar(PyObject *o) {
    return o == Py_None || PyUnicode_CheckExact(o) || PyLong_CheckExact(o) || PyFloat_CheckExact(o) ||
           PyBool_Check(o) || PyBytes_CheckExact(o);
}

static int immutable(PyObject *o, int depth) {
    if (immutable_scalar(o)) return 1;
    if (!PyTuple_CheckExact(o) || depth > 8) return 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(o); i++)
        if (!immutable(PyTuple_GET_ITEM(o, i), depth + 1)) return 0; // borrowed
    return 1;
}

// The dict version tag changes on every modification. Python 3.14 removed it;
// there dicts are simply not reused.
#if PY_VERSION_HEX < 0x030E0000
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static uint64_t dict_version(PyObject *d) { return ((PyDictObject *)d)->ma_version_tag; }
#pragma GCC diagnostic pop
#define SKY_DICT_VERSIONS 1
#else
#define SKY_DICT_VERSIONS 0
static uint64_t dict_version(PyObject *d) { return 0; }
#endif

static int classify(PyObject *o) {
    if (immutable(o, 0)) return KIND_IMMUTABLE;
    if (!SKY_DICT_VERSIONS || !PyDict_CheckExact(o)) return KIND_UNCACHEABLE;
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(o, &pos, &k, &v)) // borrowed
        if (!PyUnicode_CheckExact(k) || !immutable(v, 0)) return KIND_UNCACHEABLE;
    return KIND_FLAT_DICT;
}

// arg returns a new reference to argument at, reusing the cached object for
// id when it is still unchanged. Its bytes are at in + offsets[at], up to the
// next offset (the last to inlen); only a miss reads them, so a hit touches
// nothing the submitter wrote but the id.
static PyObject *arg(sky_argcache *c, int32_t id, const char *in, size_t inlen, const size_t *offsets,
                     size_t at, size_t total) {
    sky_cache_entry *en = NULL;
    if (c && id >= 0) {
        if (id >= c->cap) {
            int32_t cap = c->cap ? c->cap : 64;
            while (cap <= id) cap *= 2;
            sky_cache_entry *e = realloc(c->e, (size_t)cap * sizeof *e);
            if (e) {
                memset(e + c->cap, 0, (size_t)(cap - c->cap) * sizeof *e);
                c->e = e;
                c->cap = cap;
            }
        }
        if (id < c->cap) en = &c->e[id];
    }
    if (en && en->obj) {
        if (en->kind != KIND_FLAT_DICT || dict_version(en->obj) == en->version) {
            Py_INCREF(en->obj);
            return en->obj;
        }
        Py_CLEAR(en->obj); // modified by an earlier call: rebuild
    }
    const char *q = in + offsets[at], *end = in + (at + 1 < total ? offsets[at + 1] : inlen);
    PyObject *o = sky_decode(&q, end, 0); // new ref
    if (!o) return NULL;
    if (q != end) {
        Py_DECREF(o);
        PyErr_SetString(PyExc_ValueError, "skynet value buffer: trailing bytes");
        return NULL;
    }
    if (en) {
        if (en->kind == KIND_NONE) en->kind = classify(o);
        if (en->kind != KIND_UNCACHEABLE) {
            en->obj = Py_NewRef(o);
            en->version = en->kind == KIND_FLAT_DICT ? dict_version(o) : 0;
        }
    }
    return o;
}

// A score pair is the common return value, (number, {"feedback": str[,
// "scores": {str: number}]}) with finite numbers. score_pair recognises it
// and sizes its compact 'R' record; anything else returns 0 and is encoded
// in full for Go to validate and report. Every reference here is borrowed.
typedef struct {
    double score;
    const char *feedback;
    Py_ssize_t feedback_len;
    PyObject *scores; // NULL when the side info has no "scores"
    size_t size;      // of the record
} score_pair;

static char *put_f64(char *p, double d) {
    uint64_t bits;
    memcpy(&bits, &d, 8);
    return sky_put_u64(p, bits);
}

// utf8 views a str's UTF-8 without a copy; NULL (error cleared) if it has none.
static const char *utf8(PyObject *s, Py_ssize_t *n) {
    if (PyUnicode_IS_COMPACT_ASCII(s)) {
        *n = PyUnicode_GET_LENGTH(s);
        return (const char *)PyUnicode_DATA(s);
    }
    const char *p = PyUnicode_AsUTF8AndSize(s, n);
    if (!p) PyErr_Clear(); // lone surrogates: the full path escapes them
    return p;
}

static int is_key(PyObject *k, PyObject *interned, const char *name) {
    if (k == interned) return 1; // literal keys are interned: the usual case
    return PyUnicode_CheckExact(k) && PyUnicode_CompareWithASCIIString(k, name) == 0;
}

static int number(PyObject *x, double *d) {
    if (PyFloat_CheckExact(x)) *d = PyFloat_AS_DOUBLE(x);
    else if (PyLong_CheckExact(x)) {
        *d = PyLong_AsDouble(x);
        if (*d == -1.0 && PyErr_Occurred()) { PyErr_Clear(); return 0; }
    } else return 0;
    return isfinite(*d);
}

static int score_pair_of(sky_interp *in, PyObject *res, score_pair *p) {
    PyObject *v, *side;
    if (PyTuple_CheckExact(res) && PyTuple_GET_SIZE(res) == 2) {
        v = PyTuple_GET_ITEM(res, 0);
        side = PyTuple_GET_ITEM(res, 1);
    } else if (PyList_CheckExact(res) && PyList_GET_SIZE(res) == 2) {
        v = PyList_GET_ITEM(res, 0);
        side = PyList_GET_ITEM(res, 1);
    } else {
        return 0;
    }
    if (!number(v, &p->score) || !PyDict_CheckExact(side)) return 0;
    Py_ssize_t n = PyDict_GET_SIZE(side);
    if (n < 1 || n > 2) return 0;
    PyObject *fb = NULL, *k, *x;
    p->scores = NULL;
    Py_ssize_t pos = 0;
    while (PyDict_Next(side, &pos, &k, &x)) {
        if (is_key(k, in->k_feedback, "feedback")) fb = x;
        else if (is_key(k, in->k_scores, "scores")) p->scores = x;
        else return 0; // other keys: the full path passes them through
    }
    if (!fb || !PyUnicode_CheckExact(fb)) return 0;
    if (!(p->feedback = utf8(fb, &p->feedback_len)) || (size_t)p->feedback_len > (1u << 20)) return 0;
    size_t size = 1 + 8 + sky_uvarint_len((uint64_t)p->feedback_len) + (size_t)p->feedback_len;
    Py_ssize_t nscores = 0;
    if (p->scores) {
        if (!PyDict_CheckExact(p->scores)) return 0;
        nscores = PyDict_GET_SIZE(p->scores);
        pos = 0;
        while (PyDict_Next(p->scores, &pos, &k, &x)) {
            double d;
            Py_ssize_t kn;
            if (!PyUnicode_CheckExact(k) || !number(x, &d) || !utf8(k, &kn) || kn > (1 << 20)) return 0;
            size += sky_uvarint_len((uint64_t)kn) + (size_t)kn + 8;
        }
    }
    p->size = size + sky_uvarint_len((uint64_t)nscores);
    return 1;
}

// put_score_pair writes p's record to d (p->size bytes).
static void put_score_pair(char *d, const score_pair *p) {
    *d++ = 'R';
    d = put_f64(d, p->score);
    d = sky_put_uvarint(d, (uint64_t)p->feedback_len);
    memcpy(d, p->feedback, (size_t)p->feedback_len);
    d += p->feedback_len;
    d = sky_put_uvarint(d, p->scores ? (uint64_t)PyDict_GET_SIZE(p->scores) : 0);
    Py_ssize_t pos = 0, kn;
    PyObject *k, *x;
    while (p->scores && PyDict_Next(p->scores, &pos, &k, &x)) { // checked by score_pair_of
        double v;
        const char *ks = utf8(k, &kn);
        number(x, &v);
        d = sky_put_uvarint(d, (uint64_t)kn);
        memcpy(d, ks, (size_t)kn);
        d = put_f64(d + kn, v);
    }
}

// buf_score_pair appends res's record to out if res is a score pair.
static int buf_score_pair(sky_interp *in, sky_buf *out, PyObject *res) {
    score_pair p;
    if (!score_pair_of(in, res, &p)) return 0;
    char *d = sky_buf_reserve(out, p.size);
    if (!d) { PyErr_Clear(); return 0; }
    put_score_pair(d, &p);
    return 1;
}

int sky_encode_result(sky_buf *out, PyObject *res) {
    if (buf_score_pair(&sky_main, out, res)) return 0;
    return sky_encode(out, res, 0);
}

int sky_batch_phase(sky_batch *b) { return __atomic_load_n(&b->phase, __ATOMIC_ACQUIRE); }

static void set_phase(sky_batch *b, sky_thread *t, int phase, int64_t now) {
    t->phase = phase;
    __atomic_store_n(&b->started_ns, now, __ATOMIC_RELEASE);
    __atomic_store_n(&b->phase, phase, __ATOMIC_RELEASE);
}

// sky_score_batch runs fn on each pending case. Case i's arguments start at
// offsets[i*nargs + k] (k = 0..nargs-1), each running to the next offset (the
// last to inlen); ids[i*nargs + k] names the value in cache (-1: not cached).
//
// With run set, a case is a program evaluation: its arguments are (artifact,
// input[, expected]); run(artifact, input) makes the output, timed here, and
// fn is called as fn(input, output[, expected]). The slot then holds the
// encoded output followed by fn's result or error (status SKY_OK/SKY_PYERR),
// or run's error alone (status SKY_RUNERR).
//
// It stops early once budget_ns has passed, leaving the rest PENDING for the
// caller to hand out again. Returns how many cases it finished.
int sky_score_batch(sky_scratch *s, sky_batch *b, PyObject *fn, PyObject *run, int nargs,
                    const char *in, size_t inlen, const size_t *offsets, const int32_t *ids,
                    sky_argcache *cache, uint64_t token_base, int flags, uintptr_t context) {
    int capture = flags & SKY_CAPTURE;
    if (nargs < 0 || nargs > SKY_MAX_ARGS || (run && nargs < 2)) return 0;
    int entered = sky_enter();
    if (entered < 0) return 0;
    sky_thread *t = sky_current_thread();
    sky_interp *interp = &sky_main;
    batch_clock clock;
    clock_begin(&clock);
    int64_t begin = clock.ns0, now = begin;
    int finished = 0;
    size_t total = (size_t)b->n * (size_t)nargs;
    for (int i = 0; i < b->n; i++) {
        sky_slot *slot = &b->slots[i];
        if (b->budget_ns > 0 && finished > 0 && now - begin > b->budget_ns) break;
        int want = SKY_SLOT_PENDING;
        if (!__atomic_compare_exchange_n(&slot->state, &want, SKY_SLOT_RUNNING, 0, __ATOMIC_ACQ_REL,
                                         __ATOMIC_ACQUIRE))
            continue; // cancelled or taken back
        int64_t start = now;
        set_phase(b, t, run ? SKY_PHASE_RUN : SKY_PHASE_SCORE, start);
        __atomic_store_n(&b->current, (int64_t)i, __ATOMIC_RELEASE);

        PyObject *args[SKY_MAX_ARGS] = {NULL};
        PyObject *res = NULL, *output = NULL;
        int64_t returned = -1; // when the call returned
        char *direct = NULL; // the result record, written straight into the batch
        size_t pair_size = 0;
        int rc = SKY_PYERR, ok = 1;
        s->out.len = 0;
        slot->run_ns = -1;
        for (int k = 0; k < nargs && ok; k++) {
            size_t at = (size_t)i * nargs + k;
            args[k] = arg(cache, ids ? ids[at] : -1, in, inlen, offsets, at, total);
            ok = args[k] != NULL;
        }
        sky_scratch *saved_capture;
        uintptr_t saved_context;
        uint64_t saved_running;
        if (ok) {
            begin_call(t, s, token_base + (uint64_t)i, capture, context, &saved_capture, &saved_context,
                       &saved_running);
            t->case_index = i;
            t->run_ns = -1;
            if (flags & SKY_UNTRUSTED) sky_set_untrusted(1);
            if (run) {
                output = PyObject_Vectorcall(run, args, 2, NULL); // new ref: run(artifact, input)
                sky_exit_if_forked(); // before the forked copy scores or reports anything
                int64_t ran = clock_now(&clock);
                slot->run_ns = ran - start;
                t->run_ns = slot->run_ns;
                if (!output) {
                    rc = SKY_RUNERR;
                } else {
                    set_phase(b, t, SKY_PHASE_SCORE, ran);
                    PyObject *sargs[3] = {args[1], output, nargs > 2 ? args[2] : NULL}; // borrowed
                    res = PyObject_Vectorcall(fn, sargs, (size_t)nargs, NULL);          // new ref
                    sky_exit_if_forked();
                }
            } else {
                res = PyObject_Vectorcall(fn, args, (size_t)nargs, NULL); // new ref
                sky_exit_if_forked(); // a forked child of score: it never reaches the next case or Go
            }
            end_call(t, saved_capture, saved_context, saved_running);
            t->untrusted = 0;
            t->phase = SKY_PHASE_SCORE;
            t->run_ns = -1;
            // The case's time ends when its call returns: encoding what it
            // returned (three million keys take 150 ms) is not counted in
            // its ms, and the watchdog's limit starts again for it, bounding
            // only a runaway __repr__ of a returned object.
            returned = clock_now(&clock);
            set_phase(b, t, SKY_PHASE_SCORE, returned);
            score_pair pair;
            if (!output && res && score_pair_of(interp, res, &pair) && (direct = reserve(b, pair.size))) {
                put_score_pair(direct, &pair); // straight into the slot: the common case
                pair_size = pair.size;
                rc = SKY_OK;
            } else if (rc != SKY_RUNERR) {
                if (output && sky_encode(&s->out, output, 0) < 0) {
                    rc = SKY_RUNERR; // the output cannot be reported: say so as a run error
                    Py_CLEAR(res);
                } else if (res) {
                    size_t mark = s->out.len; // after the output, when there is one
                    if (buf_score_pair(interp, &s->out, res) || sky_encode(&s->out, res, 0) == 0)
                        rc = SKY_OK;
                    else
                        s->out.len = mark; // drop the part written: the error goes right after the output
                }
            }
        }
        if (rc == SKY_RUNERR) {
            s->out.len = 0;
            sky_fetch_error(&s->out);
        } else if (rc != SKY_OK) {
            sky_fetch_error_append(&s->out); // after the output, when there is one
        }
        Py_XDECREF(res);
        Py_XDECREF(output);
        for (int k = 0; k < nargs; k++) Py_XDECREF(args[k]);

        now = clock_now(&clock);
        slot->status = rc;
        slot->elapsed_ns = (returned >= 0 ? returned : now) - start;
        b->took_ns += slot->elapsed_ns;
        if (direct) {
            slot->data = direct;
            slot->len = pair_size;
        } else {
            slot->data = copy_out(b, s->out.data, s->out.len);
            slot->len = slot->data ? s->out.len : 0;
        }
        if (capture && s->logs.len > 0) {
            slot->logs = copy_out(b, s->logs.data, s->logs.len);
            slot->logs_len = slot->logs ? s->logs.len : 0;
            slot->logs_truncated = s->logs_truncated;
        }
        __atomic_store_n(&b->current, (int64_t)-1, __ATOMIC_RELEASE);
        __atomic_store_n(&slot->state, SKY_SLOT_DONE, __ATOMIC_RELEASE);
        finished++;
    }
    clock_end(&clock);
    sky_leave(entered); // which ends a forked child before it returns the batch to Go
    return finished;
}
