// memlimit.c: an opt-in cap on the memory Python allocates. Python's object
// and memory domains are wrapped so each block carries its size in a
// 16-byte header; an allocation that would pass the cap fails, and Python
// raises MemoryError in the code that asked for it, instead of the whole
// process being killed. The cap is the process's; its counter is atomic,
// which costs little and stays right where no GIL serialises allocations
// (free-threaded builds).
#include "host.h"
#include <string.h>

#define HDR 16

typedef struct {
    PyMemAllocatorEx inner;
} limited;

static limited obj_domain, mem_domain;
static size_t used, limit;

// take counts n more bytes if they fit under the cap.
static int take(size_t n) {
    if (n > limit) return 0;
    if (__atomic_add_fetch(&used, n, __ATOMIC_RELAXED) <= limit) return 1;
    __atomic_sub_fetch(&used, n, __ATOMIC_RELAXED);
    return 0;
}

static void give(size_t n) { __atomic_sub_fetch(&used, n, __ATOMIC_RELAXED); }

static void *lim_malloc(void *ctx, size_t n) {
    limited *l = ctx;
    if (!take(n)) return NULL;
    char *p = l->inner.malloc(l->inner.ctx, n + HDR);
    if (!p) {
        give(n);
        return NULL;
    }
    memcpy(p, &n, sizeof n);
    return p + HDR;
}

static void *lim_calloc(void *ctx, size_t count, size_t size) {
    if (size && count > (SIZE_MAX - HDR) / size) return NULL;
    void *p = lim_malloc(ctx, count * size);
    if (p) memset(p, 0, count * size);
    return p;
}

static void lim_free(void *ctx, void *p) {
    limited *l = ctx;
    if (!p) return;
    char *base = (char *)p - HDR;
    size_t n;
    memcpy(&n, base, sizeof n);
    give(n);
    l->inner.free(l->inner.ctx, base);
}

static void *lim_realloc(void *ctx, void *p, size_t n) {
    limited *l = ctx;
    if (!p) return lim_malloc(ctx, n);
    char *base = (char *)p - HDR;
    size_t old;
    memcpy(&old, base, sizeof old);
    if (n > old && !take(n - old)) return NULL;
    char *q = l->inner.realloc(l->inner.ctx, base, n + HDR);
    if (!q) {
        if (n > old) give(n - old);
        return NULL;
    }
    memcpy(q, &n, sizeof n);
    if (n < old) give(old - n);
    return q + HDR;
}

static void wrap(PyMemAllocatorDomain domain, limited *l) {
    PyMem_GetAllocator(domain, &l->inner);
    PyMemAllocatorEx a = {l, lim_malloc, lim_calloc, lim_realloc, lim_free};
    PyMem_SetAllocator(domain, &a);
}

// sky_limit_memory installs the cap. It must run after pre-initialisation
// and before the interpreter starts, when no block exists yet in these domains.
void sky_limit_memory(size_t bytes) {
    limit = bytes;
    wrap(PYMEM_DOMAIN_MEM, &mem_domain);
    wrap(PYMEM_DOMAIN_OBJ, &obj_domain);
}
