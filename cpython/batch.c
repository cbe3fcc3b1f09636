// batch.c: score many cases under one GIL hold. Each case's outcome lands in
// its own slot and is published with a release store, so a watchdog thread
// can read finished slots while a later case is still running (or stuck).
#include "host.h"
#include <string.h>
#include <time.h>

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

sky_batch *sky_batch_new(int n) {
    sky_batch *b = calloc(1, sizeof *b + (size_t)n * sizeof(sky_slot));
    if (!b) return NULL;
    b->n = n;
    b->current = -1;
    return b;
}

void sky_batch_free(sky_batch *b) {
    if (!b) return;
    for (int i = 0; i < b->n; i++) {
        free(b->slots[i].data);
        free(b->slots[i].logs);
    }
    free(b);
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

static char *copy_out(const char *p, size_t n) {
    char *d = malloc(n ? n : 1);
    if (d && n) memcpy(d, p, n);
    return d;
}

// sky_score_batch runs fn on each pending case: its nargs arguments start at
// in + offsets[i]. It stops early once budget_ns has passed, leaving the rest
// PENDING for the caller to hand out again. Returns how many it finished.
int sky_score_batch(sky_scratch *s, sky_batch *b, PyObject *fn, int nargs, const char *in,
                    size_t inlen, const size_t *offsets, uint64_t token_base, int capture,
                    uintptr_t context) {
    if (nargs < 0 || nargs > SKY_MAX_ARGS) return 0;
    int entered = sky_enter();
    if (entered < 0) return 0;
    sky_thread *t = sky_current_thread();
    int64_t begin = sky_now_ns();
    int finished = 0;
    for (int i = 0; i < b->n; i++) {
        sky_slot *slot = &b->slots[i];
        if (b->budget_ns > 0 && finished > 0 && sky_now_ns() - begin > b->budget_ns) break;
        int want = SKY_SLOT_PENDING;
        if (!__atomic_compare_exchange_n(&slot->state, &want, SKY_SLOT_RUNNING, 0, __ATOMIC_ACQ_REL,
                                         __ATOMIC_ACQUIRE))
            continue; // cancelled or taken back
        int64_t start = sky_now_ns();
        __atomic_store_n(&b->started_ns, start, __ATOMIC_RELEASE);
        __atomic_store_n(&b->current, (int64_t)i, __ATOMIC_RELEASE);

        PyObject *args[SKY_MAX_ARGS] = {NULL};
        PyObject *res = NULL;
        int rc = SKY_PYERR;
        size_t end = i + 1 < b->n ? offsets[i + 1] : inlen;
        s->out.len = 0;
        if (sky_decode_args(in + offsets[i], end - offsets[i], nargs, args) == 0) {
            sky_scratch *saved_capture;
            uintptr_t saved_context;
            uint64_t saved_running;
            begin_call(t, s, token_base + (uint64_t)i, capture, context, &saved_capture, &saved_context,
                       &saved_running);
            t->case_index = i;
            res = PyObject_Vectorcall(fn, args, (size_t)nargs, NULL); // new ref
            end_call(t, saved_capture, saved_context, saved_running);
            if (res && sky_encode(&s->out, res, 0) == 0) rc = SKY_OK;
        }
        if (rc != SKY_OK) sky_fetch_error(&s->out);
        Py_XDECREF(res);
        for (int k = 0; k < nargs; k++) Py_XDECREF(args[k]);

        slot->status = rc;
        slot->elapsed_ns = sky_now_ns() - start;
        slot->data = copy_out(s->out.data, s->out.len);
        slot->len = slot->data ? s->out.len : 0;
        if (capture && s->logs.len > 0) {
            slot->logs = copy_out(s->logs.data, s->logs.len);
            slot->logs_len = slot->logs ? s->logs.len : 0;
            slot->logs_truncated = s->logs_truncated;
        }
        __atomic_store_n(&b->current, (int64_t)-1, __ATOMIC_RELEASE);
        __atomic_store_n(&slot->state, SKY_SLOT_DONE, __ATOMIC_RELEASE);
        finished++;
    }
    sky_leave(entered);
    return finished;
}
