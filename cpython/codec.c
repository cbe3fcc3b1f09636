// codec.c: the value buffer format shared with codec.go (see the format
// description there). Decoding builds new references; encoding only borrows.
#include "host.h"
#include <string.h>
#include <math.h>

#define SKY_MAX_DEPTH 256
#define SKY_MAX_STR (1u << 20)   // longest string handed back to Go, in bytes
#define SKY_MAX_REPR 200

static int buf_grow(sky_buf *b, size_t need) {
    if (b->len + need <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + need) cap *= 2;
    char *d = realloc(b->data, cap);
    if (!d) { PyErr_NoMemory(); return -1; }
    b->data = d;
    b->cap = cap;
    return 0;
}

static int buf_put(sky_buf *b, const void *p, size_t n) {
    if (buf_grow(b, n) < 0) return -1;
    memcpy(b->data + b->len, p, n);
    b->len += n;
    return 0;
}

static int buf_byte(sky_buf *b, char c) { return buf_put(b, &c, 1); }

char *sky_buf_reserve(sky_buf *b, size_t n) {
    if (buf_grow(b, n) < 0) return NULL;
    char *d = b->data + b->len;
    b->len += n;
    return d;
}

static int buf_uvarint(sky_buf *b, uint64_t v) {
    char *d = sky_buf_reserve(b, sky_uvarint_len(v));
    if (!d) return -1;
    sky_put_uvarint(d, v);
    return 0;
}

static int buf_u64(sky_buf *b, uint64_t v) {
    char *d = sky_buf_reserve(b, 8);
    if (!d) return -1;
    sky_put_u64(d, v);
    return 0;
}

// sky_buf_put_str writes an untagged string (length + bytes), cutting very long
// ones at a UTF-8 boundary and appending a marker so the cut is visible.
int sky_buf_put_str(sky_buf *b, const char *s, size_t n) {
    if (n <= SKY_MAX_STR) {
        if (buf_uvarint(b, n) < 0) return -1;
        return buf_put(b, s, n);
    }
    size_t keep = SKY_MAX_STR;
    while (keep > 0 && ((unsigned char)s[keep] & 0xC0) == 0x80) keep--;
    char marker[96];
    int m = snprintf(marker, sizeof marker, "... [skynet: truncated, %zu more bytes]", n - keep);
    if (buf_uvarint(b, keep + (size_t)m) < 0) return -1;
    if (buf_put(b, s, keep) < 0) return -1;
    return buf_put(b, marker, (size_t)m);
}

// put_unicode writes a str as UTF-8; lone surrogates cannot be UTF-8, so they
// are written backslash-escaped rather than failing the whole value.
static int put_unicode(sky_buf *b, PyObject *o) {
    Py_ssize_t n;
    const char *s = PyUnicode_AsUTF8AndSize(o, &n);
    if (s) return sky_buf_put_str(b, s, (size_t)n);
    PyErr_Clear();
    PyObject *bytes = PyUnicode_AsEncodedString(o, "utf-8", "backslashreplace"); // new ref
    if (!bytes) return -1;
    int rc = sky_buf_put_str(b, PyBytes_AS_STRING(bytes), (size_t)PyBytes_GET_SIZE(bytes));
    Py_DECREF(bytes);
    return rc;
}

static int put_foreign(sky_buf *b, PyObject *o, const char *why) {
    PyTypeObject *t = Py_TYPE(o);
    PyObject *mod = PyObject_GetAttrString((PyObject *)t, "__module__"); // new ref
    PyObject *name = NULL;
    if (mod && PyUnicode_Check(mod) && PyUnicode_CompareWithASCIIString(mod, "builtins") != 0)
        name = PyUnicode_FromFormat("%U.%s", mod, t->tp_name);
    else
        name = PyUnicode_FromString(t->tp_name);
    Py_XDECREF(mod);
    PyErr_Clear();
    if (!name) return -1;
    if (buf_byte(b, 'o') < 0 || put_unicode(b, name) < 0) { Py_DECREF(name); return -1; }
    Py_DECREF(name);
    if (why) return sky_buf_put_str(b, why, strlen(why));
    PyObject *r = PyObject_Repr(o); // new ref; may run user code and fail
    if (!r) {
        PyErr_Clear();
        const char *u = "<unrepresentable>";
        return sky_buf_put_str(b, u, strlen(u));
    }
    Py_ssize_t n;
    const char *s = PyUnicode_AsUTF8AndSize(r, &n);
    if (!s) { PyErr_Clear(); s = "<unrepresentable>"; n = (Py_ssize_t)strlen(s); }
    if (n > SKY_MAX_REPR) n = SKY_MAX_REPR;
    while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80) n--;
    int rc = sky_buf_put_str(b, s, (size_t)n);
    Py_DECREF(r);
    return rc;
}

// Past this many digits a huge int's exact digit count would cost a power of
// ten as large as the int (about 50 ms here); beyond it the count is an estimate.
#define SKY_EXACT_DIGITS 300000

// put_huge_int writes an 'H' record for an int too long for str() (past
// sys.get_int_max_str_digits()): its sign and number of decimal digits, from
// its bit length. Only int's own C slots run, never a subclass's methods.
static int put_huge_int(sky_buf *b, PyObject *o) {
    PyObject *zero = NULL, *neg = NULL, *bl = NULL, *mag = NULL, *ten = NULL, *exp = NULL, *pow = NULL;
    int rc = -1;
    if (!(zero = PyLong_FromLong(0))) goto done;
    if (!(neg = PyLong_Type.tp_richcompare(o, zero, Py_LT))) goto done; // new ref: a bool
    if (!(bl = PyObject_CallMethod((PyObject *)&PyLong_Type, "bit_length", "O", o))) goto done; // new ref
    long long bits = PyLong_AsLongLong(bl);
    if (bits == -1 && PyErr_Occurred()) goto done;
    // |o| is in [2^(bits-1), 2^bits), so its digit count is between those of
    // the two bounds, floor(k log10 2) + 1; the margins absorb rounding.
    const double log10_2 = 0.30102999566398119521;
    uint64_t lo = (uint64_t)floor((double)(bits - 1) * log10_2 - 1e-6) + 1;
    uint64_t hi = (uint64_t)floor((double)bits * log10_2 + 1e-6) + 1;
    uint64_t digits = lo;
    int about = 0;
    if (hi > SKY_EXACT_DIGITS) {
        digits = hi;
        about = lo != hi;
    } else if (lo < hi) {
        if (!(mag = PyLong_Type.tp_as_number->nb_absolute(o)) || !(ten = PyLong_FromLong(10))) goto done;
        // digits(|o|) > d exactly when |o| >= 10^d.
        for (; digits < hi; digits++) {
            Py_CLEAR(exp);
            Py_CLEAR(pow);
            if (!(exp = PyLong_FromUnsignedLongLong(digits)) || !(pow = PyNumber_Power(ten, exp, Py_None))) goto done;
            int ge = PyObject_RichCompareBool(mag, pow, Py_GE); // both exact ints: no user code
            if (ge < 0) goto done;
            if (!ge) break;
        }
    }
    if (buf_byte(b, 'H') < 0 || buf_byte(b, (char)((neg == Py_True ? 1 : 0) | (about ? 2 : 0))) < 0 ||
        buf_uvarint(b, digits) < 0)
        goto done;
    rc = 0;
done:
    Py_XDECREF(zero);
    Py_XDECREF(neg);
    Py_XDECREF(bl);
    Py_XDECREF(mag);
    Py_XDECREF(ten);
    Py_XDECREF(exp);
    Py_XDECREF(pow);
    return rc;
}

static int put_int(sky_buf *b, PyObject *o) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (!overflow) {
        if (buf_byte(b, 'i') < 0) return -1;
        return buf_u64(b, (uint64_t)v);
    }
    PyObject *s = PyObject_Str(o); // new ref: decimal digits
    if (!s) {
        // Python 3.11+ (and 3.10.7+) refuse to convert an int of more than
        // sys.get_int_max_str_digits() digits (4300 by default) with a ValueError.
        if (!PyErr_ExceptionMatches(PyExc_ValueError)) return -1;
        PyErr_Clear();
        return put_huge_int(b, o);
    }
    int rc = buf_byte(b, 'I');
    if (rc == 0) rc = put_unicode(b, s);
    Py_DECREF(s);
    return rc;
}

static int put_float(sky_buf *b, double d) {
    uint64_t bits;
    memcpy(&bits, &d, 8);
    if (buf_byte(b, 'f') < 0) return -1;
    return buf_u64(b, bits);
}

// sky_encode appends o to b. It fails only on memory errors; anything it cannot
// express becomes a tagged 'o' (foreign) value that Go reports by type name.
int sky_encode(sky_buf *b, PyObject *o, int depth) {
    if (depth > SKY_MAX_DEPTH) return put_foreign(b, o, "<nested too deeply>");
    if (o == Py_None) return buf_byte(b, 'N');
    if (o == Py_True) return buf_byte(b, 'T');
    if (o == Py_False) return buf_byte(b, 'F');
    if (PyFloat_Check(o)) return put_float(b, PyFloat_AS_DOUBLE(o));
    if (PyLong_Check(o)) return put_int(b, o);
    if (PyUnicode_Check(o)) {
        if (buf_byte(b, 's') < 0) return -1;
        return put_unicode(b, o);
    }
    if (PyDict_Check(o)) {
        // A dict subclass may run user code in PyDict_Next-free paths; keys are
        // borrowed from the dict for the duration of the loop.
        Py_ssize_t pos = 0;
        PyObject *k, *v;
        if (buf_byte(b, 'd') < 0 || buf_uvarint(b, (uint64_t)PyDict_GET_SIZE(o)) < 0) return -1;
        Py_ssize_t n = 0, want = PyDict_GET_SIZE(o);
        while (n < want && PyDict_Next(o, &pos, &k, &v)) {
            if (sky_encode(b, k, depth + 1) < 0 || sky_encode(b, v, depth + 1) < 0) return -1;
            n++;
        }
        // Padding keeps the count honest should the dict shrink underneath us.
        for (; n < want; n++) if (buf_byte(b, 'N') < 0 || buf_byte(b, 'N') < 0) return -1;
        return 0;
    }
    if (PyList_Check(o) || PyTuple_Check(o)) {
        PyObject *seq = PySequence_Fast(o, "sequence"); // new ref (same object for list/tuple)
        if (!seq) return -1;
        Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
        int rc = buf_byte(b, PyTuple_Check(o) ? 't' : 'l');
        if (rc == 0) rc = buf_uvarint(b, (uint64_t)n);
        for (Py_ssize_t i = 0; rc == 0 && i < n; i++)
            rc = sky_encode(b, PySequence_Fast_GET_ITEM(seq, i), depth + 1); // borrowed
        Py_DECREF(seq);
        return rc;
    }
    if (PyBytes_Check(o)) {
        if (buf_byte(b, 'y') < 0) return -1;
        return sky_buf_put_str(b, PyBytes_AS_STRING(o), (size_t)PyBytes_GET_SIZE(o));
    }
    // Numbers of other types (numpy scalars, Fraction, Decimal) count as numbers.
    PyNumberMethods *nb = Py_TYPE(o)->tp_as_number;
    if (nb && nb->nb_index && !PyComplex_Check(o)) {
        PyObject *i = PyNumber_Index(o); // new ref
        if (i) { int rc = put_int(b, i); Py_DECREF(i); return rc; }
        PyErr_Clear();
    }
    if (nb && nb->nb_float && !PyComplex_Check(o)) {
        double d = PyFloat_AsDouble(o);
        if (!(d == -1.0 && PyErr_Occurred())) return put_float(b, d);
        PyErr_Clear();
    }
    return put_foreign(b, o, NULL);
}

static int get_uvarint(const char **p, const char *end, uint64_t *v) {
    uint64_t x = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (*p >= end) return -1;
        unsigned char c = (unsigned char)*(*p)++;
        x |= (uint64_t)(c & 0x7F) << shift;
        if (c < 0x80) { *v = x; return 0; }
    }
    return -1;
}

static int get_u64(const char **p, const char *end, uint64_t *v) {
    if (end - *p < 8) return -1;
    uint64_t x = 0;
    for (int i = 0; i < 8; i++) x |= (uint64_t)(unsigned char)(*p)[i] << (8 * i);
    *p += 8;
    *v = x;
    return 0;
}

static int get_len(const char **p, const char *end, uint64_t *n) {
    if (get_uvarint(p, end, n) < 0 || *n > (uint64_t)(end - *p)) return -1;
    return 0;
}

static PyObject *bad(const char *what) {
    PyErr_Format(PyExc_ValueError, "skynet value buffer: %s", what);
    return NULL;
}

// sky_decode reads one value and returns a new reference, or NULL with a
// Python exception set. Strings may carry surrogates (WTF-8) from JSON escapes.
PyObject *sky_decode(const char **p, const char *end, int depth) {
    if (depth > SKY_MAX_DEPTH) return bad("nested too deeply");
    if (*p >= end) return bad("truncated");
    char tag = *(*p)++;
    uint64_t n, u;
    switch (tag) {
    case 'N': Py_RETURN_NONE;
    case 'T': Py_RETURN_TRUE;
    case 'F': Py_RETURN_FALSE;
    case 'i':
        if (get_u64(p, end, &u) < 0) return bad("truncated int");
        return PyLong_FromLongLong((long long)u);
    case 'f': {
        if (get_u64(p, end, &u) < 0) return bad("truncated float");
        double d;
        memcpy(&d, &u, 8);
        return PyFloat_FromDouble(d);
    }
    case 'I': {
        if (get_len(p, end, &n) < 0 || n == 0 || n > 4000) return bad("bad big int");
        char tmp[4001];
        memcpy(tmp, *p, n);
        tmp[n] = 0;
        *p += n;
        return PyLong_FromString(tmp, NULL, 10);
    }
    case 's': {
        if (get_len(p, end, &n) < 0) return bad("truncated str");
        const char *s = *p;
        *p += n;
        return PyUnicode_DecodeUTF8(s, (Py_ssize_t)n, "surrogatepass");
    }
    case 'y': {
        if (get_len(p, end, &n) < 0) return bad("truncated bytes");
        const char *s = *p;
        *p += n;
        return PyBytes_FromStringAndSize(s, (Py_ssize_t)n);
    }
    case 'l':
    case 't': {
        // Each element takes at least one byte, which bounds n by the input.
        if (get_len(p, end, &n) < 0) return bad("bad sequence length");
        PyObject *seq = tag == 'l' ? PyList_New((Py_ssize_t)n) : PyTuple_New((Py_ssize_t)n);
        if (!seq) return NULL;
        for (uint64_t i = 0; i < n; i++) {
            PyObject *item = sky_decode(p, end, depth + 1);
            if (!item) { Py_DECREF(seq); return NULL; }
            if (tag == 'l') PyList_SET_ITEM(seq, (Py_ssize_t)i, item); // steals item
            else PyTuple_SET_ITEM(seq, (Py_ssize_t)i, item);           // steals item
        }
        return seq;
    }
    case 'd': {
        if (get_len(p, end, &n) < 0) return bad("bad dict length");
        PyObject *d = PyDict_New();
        if (!d) return NULL;
        for (uint64_t i = 0; i < n; i++) {
            PyObject *k = sky_decode(p, end, depth + 1);
            if (!k) { Py_DECREF(d); return NULL; }
            if (PyUnicode_CheckExact(k)) PyUnicode_InternInPlace(&k); // keys repeat across cases
            PyObject *v = sky_decode(p, end, depth + 1);
            if (!v) { Py_DECREF(k); Py_DECREF(d); return NULL; }
            int rc = PyDict_SetItem(d, k, v); // does not steal
            Py_DECREF(k);
            Py_DECREF(v);
            if (rc < 0) { Py_DECREF(d); return NULL; }
        }
        return d;
    }
    default:
        return bad("unknown tag");
    }
}
