/* The msgpack of the one shape _native.c knows: readers that return 0 at anything else,
 * and writers that write what msgpack.Packer(use_bin_type=True) writes. Included once,
 * by _native.c, which defines VERSION and AGENT_STEP before it. */
#include <stdint.h>
#include <string.h>

/* ---- reading the known shape; each reader returns 0 at anything else ---------------- */
typedef struct { const unsigned char *at, *end; } Reader;

static int take(Reader *r, size_t n, const unsigned char **out) {
    if ((size_t)(r->end - r->at) < n) return 0;
    *out = r->at;
    r->at += n;
    return 1;
}

static uint64_t big_endian(const unsigned char *p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v = (v << 8) | p[i];
    return v;
}

/* An int of int64's range in any msgpack int encoding (a larger uint64: not the shape). */
static int read_int(Reader *r, int64_t *out) {
    const unsigned char *p;
    if (!take(r, 1, &p)) return 0;
    unsigned char tag = *p;
    if (tag <= 0x7f) { *out = tag; return 1; }
    if (tag >= 0xe0) { *out = (int8_t)tag; return 1; }
    static const int widths[] = {1, 2, 4, 8};
    if (tag >= 0xcc && tag <= 0xcf) {
        int n = widths[tag - 0xcc];
        if (!take(r, n, &p)) return 0;
        uint64_t v = big_endian(p, n);
        if (v > INT64_MAX) return 0;
        *out = (int64_t)v;
        return 1;
    }
    if (tag >= 0xd0 && tag <= 0xd3) {
        int n = widths[tag - 0xd0];
        if (!take(r, n, &p)) return 0;
        uint64_t v = big_endian(p, n);
        if (n < 8 && (v >> (8 * n - 1))) v |= ~(uint64_t)0 << (8 * n);  /* sign-extend */
        *out = (int64_t)v;
        return 1;
    }
    return 0;
}

/* A float32 or float64; ``is_int`` set (and ``whole`` filled) when it is an int instead. */
static int read_number(Reader *r, double *out, int *is_int, int64_t *whole) {
    if (r->at < r->end && (*r->at == 0xca || *r->at == 0xcb)) {
        const unsigned char *p;
        int n = *r->at == 0xca ? 4 : 8;
        r->at++;
        if (!take(r, n, &p)) return 0;
        uint64_t bits = big_endian(p, n);
        if (n == 4) { uint32_t b = (uint32_t)bits; float f; memcpy(&f, &b, 4); *out = f; }
        else memcpy(out, &bits, 8);
        *is_int = 0;
        return 1;
    }
    if (!read_int(r, whole)) return 0;
    *is_int = 1;
    return 1;
}

static int read_array(Reader *r, Py_ssize_t *count) {
    const unsigned char *p;
    if (!take(r, 1, &p)) return 0;
    if ((*p & 0xf0) == 0x90) { *count = *p & 0x0f; return 1; }
    int n = *p == 0xdc ? 2 : *p == 0xdd ? 4 : 0;
    if (!n || !take(r, n, &p)) return 0;
    *count = (Py_ssize_t)big_endian(p, n);
    return 1;
}

/* A str; NULL without an exception when the frame is not the shape, NULL with one when
 * Python could not build it (memory). Invalid UTF-8 is not the shape. */
static PyObject *read_str(Reader *r) {
    const unsigned char *p;
    size_t length;
    if (!take(r, 1, &p)) return NULL;
    if ((*p & 0xe0) == 0xa0) length = *p & 0x1f;
    else {
        int n = *p == 0xd9 ? 1 : *p == 0xda ? 2 : *p == 0xdb ? 4 : 0;
        if (!n || !take(r, n, &p)) return NULL;
        length = big_endian(p, n);
    }
    if (!take(r, length, &p)) return NULL;
    PyObject *text = PyUnicode_DecodeUTF8((const char *)p, (Py_ssize_t)length, "strict");
    if (text == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) PyErr_Clear();
    return text;
}

/* [ints, doubles, chars, []] as a Value (``value_type``, a NamedTuple); NULL without an
 * exception when the frame is not the shape. */
static PyObject *read_value(Reader *r, PyTypeObject *value_type) {
    Py_ssize_t count, i;
    int64_t whole;
    double real;
    int is_int;
    PyObject *ints = NULL, *doubles = NULL, *chars = NULL, *value;
    if (!read_array(r, &count) || count != 4 || !read_array(r, &count)) return NULL;
    if (!(ints = PyTuple_New(count))) return NULL;
    for (i = 0; i < count; i++) {
        PyObject *item;
        if (!read_int(r, &whole) || !(item = PyLong_FromLongLong(whole))) goto fail;
        PyTuple_SET_ITEM(ints, i, item);
    }
    if (!read_array(r, &count) || !(doubles = PyTuple_New(count))) goto fail;
    for (i = 0; i < count; i++) {
        PyObject *item;
        if (!read_number(r, &real, &is_int, &whole)) goto fail;
        item = is_int ? PyLong_FromLongLong(whole) : PyFloat_FromDouble(real);
        if (!item) goto fail;
        PyTuple_SET_ITEM(doubles, i, item);
    }
    if (!(chars = read_str(r)) || !read_array(r, &count) || count != 0) goto fail;
    if (!(value = value_type->tp_alloc(value_type, 4))) goto fail;
    PyObject *empty = PyTuple_New(0);
    if (!empty) { Py_DECREF(value); goto fail; }
    PyTuple_SET_ITEM(value, 0, ints);
    PyTuple_SET_ITEM(value, 1, doubles);
    PyTuple_SET_ITEM(value, 2, chars);
    PyTuple_SET_ITEM(value, 3, empty);
    return value;
fail:
    Py_XDECREF(ints);
    Py_XDECREF(doubles);
    Py_XDECREF(chars);
    return NULL;
}

/* The envelope [1, 22, seq, episode, body...]; the body follows at r->at. */
static int read_envelope(Reader *r, int64_t *seq, int64_t *episode) {
    Py_ssize_t count;
    int64_t version, type;
    return read_array(r, &count) && count == 5 && read_int(r, &version) && version == VERSION
           && read_int(r, &type) && type == AGENT_STEP && read_int(r, seq)
           && read_int(r, episode);
}

/* ---- writing, as msgpack.Packer(use_bin_type=True) writes ----------------------------- */
typedef struct { unsigned char *data; size_t size, capacity; } Writer;

static int reserve(Writer *w, size_t n) {
    if (w->size + n <= w->capacity) return 1;
    size_t capacity = (w->capacity + n) * 2;
    unsigned char *data = PyMem_Realloc(w->data, capacity);
    if (!data) { PyErr_NoMemory(); return 0; }
    w->data = data;
    w->capacity = capacity;
    return 1;
}

static int put(Writer *w, unsigned char tag, uint64_t v, int n) {
    if (!reserve(w, 1 + n)) return 0;
    w->data[w->size++] = tag;
    for (int i = n - 1; i >= 0; i--) w->data[w->size++] = (unsigned char)(v >> (8 * i));
    return 1;
}

static int write_int(Writer *w, int64_t v) {
    if (v >= 0) {
        if (v < 0x80) return put(w, (unsigned char)v, 0, 0);
        if (v <= 0xff) return put(w, 0xcc, v, 1);
        if (v <= 0xffff) return put(w, 0xcd, v, 2);
        if (v <= 0xffffffffLL) return put(w, 0xce, v, 4);
        return put(w, 0xcf, v, 8);
    }
    if (v >= -32) return put(w, (unsigned char)(int8_t)v, 0, 0);
    if (v >= -128) return put(w, 0xd0, (uint8_t)v, 1);
    if (v >= -32768) return put(w, 0xd1, (uint16_t)v, 2);
    if (v >= -2147483648LL) return put(w, 0xd2, (uint32_t)v, 4);
    return put(w, 0xd3, (uint64_t)v, 8);
}

static int write_array(Writer *w, Py_ssize_t n) {
    if (n < 16) return put(w, 0x90 | (unsigned char)n, 0, 0);
    if (n < 65536) return put(w, 0xdc, n, 2);
    return put(w, 0xdd, n, 4);
}

/* 1 written, 0 not the shape (no exception), -1 an exception. */
static int write_value(Writer *w, PyObject *value, PyTypeObject *value_type) {
    if (Py_TYPE(value) != value_type || PyTuple_GET_SIZE(value) != 4) return 0;
    PyObject *ints = PyTuple_GET_ITEM(value, 0), *doubles = PyTuple_GET_ITEM(value, 1);
    PyObject *chars = PyTuple_GET_ITEM(value, 2), *arrays = PyTuple_GET_ITEM(value, 3);
    if (!PyTuple_CheckExact(ints) || !PyTuple_CheckExact(doubles) || !PyUnicode_CheckExact(chars)
        || !PyTuple_CheckExact(arrays) || PyTuple_GET_SIZE(arrays) != 0) return 0;
    Py_ssize_t n = PyTuple_GET_SIZE(ints), i;
    if (!write_array(w, 4) || !write_array(w, n)) return -1;
    for (i = 0; i < n; i++) {
        PyObject *item = PyTuple_GET_ITEM(ints, i);
        int overflow;
        if (!PyLong_CheckExact(item)) return 0;
        long long v = PyLong_AsLongLongAndOverflow(item, &overflow);
        if (overflow) return 0;
        if (!write_int(w, v)) return -1;
    }
    n = PyTuple_GET_SIZE(doubles);
    if (!write_array(w, n)) return -1;
    for (i = 0; i < n; i++) {
        PyObject *item = PyTuple_GET_ITEM(doubles, i);
        if (!PyFloat_CheckExact(item)) return 0;
        double d = PyFloat_AS_DOUBLE(item);
        uint64_t bits;
        memcpy(&bits, &d, 8);
        if (!put(w, 0xcb, bits, 8)) return -1;
    }
    Py_ssize_t length;
    const char *text = PyUnicode_AsUTF8AndSize(chars, &length);
    if (text == NULL) {  /* lone surrogates: msgpack refuses them, on the Python path */
        PyErr_Clear();
        return 0;
    }
    int ok = length < 32 ? put(w, 0xa0 | (unsigned char)length, 0, 0)
             : length < 256 ? put(w, 0xd9, length, 1)
             : length < 65536 ? put(w, 0xda, length, 2) : put(w, 0xdb, length, 4);
    if (!ok || !reserve(w, length + 1)) return -1;
    memcpy(w->data + w->size, text, length);
    w->size += length;
    return write_array(w, 0) ? 1 : -1;
}
