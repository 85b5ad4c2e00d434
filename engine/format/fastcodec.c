/* The produce path's per-record loops in C: engine.format.native has the same functions in
 * pure Python (used when this module is not built) and tests/unit/format/test_native.py checks
 * that both give identical results. Every function answers None where its input is not the
 * plain case it handles; the caller then takes the general Python path. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define MAX_BODY ((Py_ssize_t)1 << 31) /* offsets are int32: larger goes the general way */

static Py_ssize_t pad8(Py_ssize_t n) { return (n + 7) & ~(Py_ssize_t)7; }

/* Sizes of a binary column of n items (NULL: a None item); -1 when an item is not bytes. */
static int column_sizes(PyObject **items, Py_ssize_t n, int nulls_ok, Py_ssize_t *data,
                        Py_ssize_t *nulls) {
    Py_ssize_t total = 0, none = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = items[i];
        if (o == Py_None) {
            if (!nulls_ok) return -1;
            none++;
        } else if (PyBytes_CheckExact(o)) {
            total += PyBytes_GET_SIZE(o);
            if (total >= MAX_BODY) return -1;
        } else {
            return -1;
        }
    }
    *data = total;
    *nulls = none;
    return 0;
}

/* Write a column as engine.format.encode._binary_column does; returns the bytes written. */
static Py_ssize_t write_column(char *out, PyObject **items, Py_ssize_t n, Py_ssize_t data,
                               Py_ssize_t nulls) {
    char *p = out;
    if (nulls) { /* validity bitmap, LSB first, bit set when not None */
        Py_ssize_t nb = (n + 7) / 8;
        memset(p, 0, pad8(nb));
        if (nulls != n)
            for (Py_ssize_t i = 0; i < n; i++)
                if (items[i] != Py_None) p[i >> 3] |= (char)(1 << (i & 7));
        p += pad8(nb);
    }
    Py_ssize_t no = 4 * (n + 1);
    memset(p, 0, pad8(no));
    if (nulls == n) /* all None: bitmap and zero offsets, no data buffer */
        return (p + pad8(no)) - out;
    int32_t *offs = (int32_t *)p;
    char *d = p + pad8(no);
    int32_t at = 0;
    offs[0] = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = items[i];
        if (o != Py_None) {
            Py_ssize_t len = PyBytes_GET_SIZE(o);
            memcpy(d + at, PyBytes_AS_STRING(o), len);
            at += (int32_t)len;
        }
        offs[i + 1] = at;
    }
    memset(d + at, 0, pad8(data) - data);
    return (d + pad8(data)) - out;
}

static Py_ssize_t column_bytes(Py_ssize_t n, Py_ssize_t data, Py_ssize_t nulls) {
    Py_ssize_t size = pad8(4 * (n + 1));
    if (nulls) size += pad8((n + 7) / 8);
    if (nulls != n) size += pad8(data);
    return size;
}

/* plain_body(keys, values, reserve) -> (buffer, key_nulls) | None: a bytearray of ``reserve``
 * zero bytes (the batch header, packed in place later) and the key and value columns of a
 * batch whose keys are bytes or None and values bytes (lists or tuples). */
static PyObject *plain_body(PyObject *self, PyObject *args) {
    PyObject *keys, *values;
    Py_ssize_t reserve = 0;
    if (!PyArg_ParseTuple(args, "OO|n", &keys, &values, &reserve)) return NULL;
    if (reserve < 0 || reserve > 4096) Py_RETURN_NONE;
    if (!(PyList_CheckExact(keys) || PyTuple_CheckExact(keys)) ||
        !(PyList_CheckExact(values) || PyTuple_CheckExact(values)))
        Py_RETURN_NONE;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(values);
    if (n == 0 || PySequence_Fast_GET_SIZE(keys) != n) Py_RETURN_NONE;
    PyObject **ks = PySequence_Fast_ITEMS(keys), **vs = PySequence_Fast_ITEMS(values);
    Py_ssize_t kdata, knulls, vdata, vnulls;
    if (column_sizes(ks, n, 1, &kdata, &knulls) < 0 || column_sizes(vs, n, 0, &vdata, &vnulls) < 0)
        Py_RETURN_NONE;
    Py_ssize_t size = column_bytes(n, kdata, knulls) + column_bytes(n, vdata, 0);
    if (size >= MAX_BODY) Py_RETURN_NONE;
    PyObject *body = PyByteArray_FromStringAndSize(NULL, reserve + size);
    if (body == NULL) return NULL;
    char *p = PyByteArray_AS_STRING(body);
    memset(p, 0, reserve);
    p += reserve;
    p += write_column(p, ks, n, kdata, knulls);
    write_column(p, vs, n, vdata, 0);
    return Py_BuildValue("(NO)", body, knulls ? Py_True : Py_False);
}

/* record_columns(records) -> (keys, values) | None: the key and value lists of Records (or
 * 6-tuples) with no headers, timestamp or partition of their own. */
static PyObject *record_columns(PyObject *self, PyObject *arg) {
    if (!PyList_CheckExact(arg)) Py_RETURN_NONE;
    Py_ssize_t n = PyList_GET_SIZE(arg);
    PyObject *keys = PyList_New(n), *values = PyList_New(n);
    if (keys == NULL || values == NULL) goto fail;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *r = PyList_GET_ITEM(arg, i);
        if (!PyTuple_Check(r) || PyTuple_GET_SIZE(r) != 6) goto plain_not;
        PyObject *h = PyTuple_GET_ITEM(r, 2);
        if (h != Py_None) {
            if (!(PyTuple_CheckExact(h) || PyList_CheckExact(h)) || PySequence_Fast_GET_SIZE(h))
                goto plain_not;
        }
        if (PyTuple_GET_ITEM(r, 3) != Py_None || PyTuple_GET_ITEM(r, 5) != Py_None)
            goto plain_not;
        PyObject *k = PyTuple_GET_ITEM(r, 0), *v = PyTuple_GET_ITEM(r, 1);
        Py_INCREF(k);
        Py_INCREF(v);
        PyList_SET_ITEM(keys, i, k);
        PyList_SET_ITEM(values, i, v);
    }
    return Py_BuildValue("(NN)", keys, values);
plain_not:
    Py_DECREF(keys);
    Py_DECREF(values);
    Py_RETURN_NONE;
fail:
    Py_XDECREF(keys);
    Py_XDECREF(values);
    return NULL;
}

static uint32_t murmur2(const unsigned char *data, Py_ssize_t length) {
    const uint32_t m = 0x5bd1e995;
    uint32_t h = 0x9747b28cu ^ (uint32_t)length;
    Py_ssize_t n4 = length & ~(Py_ssize_t)3;
    for (Py_ssize_t i = 0; i < n4; i += 4) {
        uint32_t k = (uint32_t)data[i] | (uint32_t)data[i + 1] << 8 | (uint32_t)data[i + 2] << 16 |
                     (uint32_t)data[i + 3] << 24;
        k *= m;
        k ^= k >> 24;
        k *= m;
        h *= m;
        h ^= k;
    }
    switch (length & 3) {
    case 3: h ^= (uint32_t)data[n4 + 2] << 16; /* fall through */
    case 2: h ^= (uint32_t)data[n4 + 1] << 8; /* fall through */
    case 1: h ^= data[n4]; h *= m;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return h;
}

/* key_partitions(keys, count) -> list[int] | None: Kafka's default partitioner for keys that
 * are all bytes (None where a key is None: the caller picks the sticky partition). */
static PyObject *key_partitions(PyObject *self, PyObject *args) {
    PyObject *keys;
    Py_ssize_t count;
    if (!PyArg_ParseTuple(args, "On", &keys, &count)) return NULL;
    if (count <= 0 || count > INT32_MAX || !(PyList_CheckExact(keys) || PyTuple_CheckExact(keys))) Py_RETURN_NONE;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(keys);
    PyObject **ks = PySequence_Fast_ITEMS(keys);
    PyObject *out = PyList_New(n);
    if (out == NULL) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *k = ks[i], *p;
        if (k == Py_None) {
            p = Py_None;
            Py_INCREF(p);
        } else if (PyBytes_CheckExact(k)) {
            uint32_t h = murmur2((const unsigned char *)PyBytes_AS_STRING(k), PyBytes_GET_SIZE(k));
            p = PyLong_FromSsize_t((Py_ssize_t)((h & 0x7fffffffu) % (uint32_t)count));
            if (p == NULL) { Py_DECREF(out); return NULL; }
        } else {
            Py_DECREF(out);
            Py_RETURN_NONE;
        }
        PyList_SET_ITEM(out, i, p);
    }
    return out;
}


/* ---------------------------------------------------------------- Arrow columns */

typedef struct {
    int kind; /* 0 fixed bytes, 1 binary column, 2 all-null binary column */
    Py_buffer a, b, c; /* fixed: a; binary: a validity (may be empty), b offsets, c data */
    int has_a, has_b, has_c;
    Py_ssize_t start, n, byte_start, byte_len, bit_offset;
    int nulls;
    int32_t o0, o1; /* binary: offsets[start], offsets[start + n] */
} ColSpec;

static void release_spec(ColSpec *c) {
    if (c->has_a) PyBuffer_Release(&c->a);
    if (c->has_b) PyBuffer_Release(&c->b);
    if (c->has_c) PyBuffer_Release(&c->c);
}

static int get_buf(PyObject *o, Py_buffer *view, int *flag) {
    if (o == Py_None) return 0;
    if (PyObject_GetBuffer(o, view, PyBUF_SIMPLE) < 0) return -1;
    *flag = 1;
    return 0;
}

/* Parse one column descriptor (see arrow_body); 1 when it is not usable, -1 on error. */
static int parse_spec(PyObject *d, ColSpec *c) {
    memset(c, 0, sizeof(*c));
    if (!PyTuple_Check(d) || PyTuple_GET_SIZE(d) < 1) return 1;
    const char *kind = PyUnicode_Check(PyTuple_GET_ITEM(d, 0))
                           ? PyUnicode_AsUTF8(PyTuple_GET_ITEM(d, 0)) : NULL;
    if (kind == NULL) return 1;
    if (strcmp(kind, "fixed") == 0) {
        PyObject *buf;
        if (!PyArg_ParseTuple(d, "sOnn", &kind, &buf, &c->byte_start, &c->byte_len)) return -1;
        if (get_buf(buf, &c->a, &c->has_a) < 0) return -1;
        if (!c->has_a || c->byte_start < 0 || c->byte_len < 0 ||
            c->byte_start + c->byte_len > c->a.len)
            return 1;
        c->kind = 0;
        return 0;
    }
    if (strcmp(kind, "null") == 0) {
        if (!PyArg_ParseTuple(d, "sn", &kind, &c->n)) return -1;
        c->kind = 2;
        return c->n > 0 ? 0 : 1;
    }
    if (strcmp(kind, "binary") != 0) return 1;
    PyObject *valid, *offs, *data;
    if (!PyArg_ParseTuple(d, "sOnOOnn", &kind, &valid, &c->bit_offset, &offs, &data, &c->start,
                          &c->n))
        return -1;
    if (get_buf(valid, &c->a, &c->has_a) < 0 || get_buf(offs, &c->b, &c->has_b) < 0 ||
        get_buf(data, &c->c, &c->has_c) < 0)
        return -1;
    c->kind = 1;
    c->nulls = c->has_a;
    if (!c->has_b || c->start < 0 || c->n <= 0 || c->bit_offset < 0) return 1;
    if ((c->start + c->n + 1) * 4 > c->b.len) return 1;
    if (c->nulls && (c->bit_offset + c->start + c->n + 7) / 8 > c->a.len) return 1;
    const int32_t *o = (const int32_t *)c->b.buf;
    c->o0 = o[c->start];
    c->o1 = o[c->start + c->n];
    if (c->o0 < 0 || c->o1 < c->o0) return 1;
    if (c->o1 > c->o0 && (!c->has_c || c->o1 > c->c.len)) return 1;
    for (Py_ssize_t i = c->start; i < c->start + c->n; i++) /* (never trust a buffer) */
        if (o[i + 1] < o[i]) return 1;
    return 0;
}

static Py_ssize_t spec_size(ColSpec *c) {
    if (c->kind == 0) return pad8(c->byte_len);
    if (c->kind == 2) return pad8((c->n + 7) / 8) + pad8(4 * (c->n + 1));
    Py_ssize_t size = pad8(4 * (c->n + 1)) + pad8((Py_ssize_t)c->o1 - c->o0);
    if (c->nulls) size += pad8((c->n + 7) / 8);
    return size;
}

static char *write_spec(char *p, ColSpec *c) {
    if (c->kind == 0) {
        memcpy(p, (const char *)c->a.buf + c->byte_start, c->byte_len);
        memset(p + c->byte_len, 0, pad8(c->byte_len) - c->byte_len);
        return p + pad8(c->byte_len);
    }
    if (c->kind == 2) {
        Py_ssize_t size = pad8((c->n + 7) / 8) + pad8(4 * (c->n + 1));
        memset(p, 0, size);
        return p + size;
    }
    if (c->nulls) { /* the validity bits of rows start..start+n, from bit 0, padding zeroed */
        Py_ssize_t nb = (c->n + 7) / 8;
        const unsigned char *v = (const unsigned char *)c->a.buf;
        Py_ssize_t first = c->bit_offset + c->start;
        memset(p, 0, pad8(nb));
        for (Py_ssize_t i = 0; i < c->n; i++) {
            Py_ssize_t j = first + i;
            if (v[j >> 3] >> (j & 7) & 1) p[i >> 3] |= (char)(1 << (i & 7));
        }
        p += pad8(nb);
    }
    const int32_t *o = (const int32_t *)c->b.buf + c->start;
    int32_t *out = (int32_t *)p;
    for (Py_ssize_t i = 0; i <= c->n; i++) out[i] = o[i] - c->o0;
    Py_ssize_t no = 4 * (c->n + 1);
    memset(p + no, 0, pad8(no) - no);
    p += pad8(no);
    Py_ssize_t len = (Py_ssize_t)c->o1 - c->o0;
    if (len) memcpy(p, (const char *)c->c.buf + c->o0, len);
    memset(p + len, 0, pad8(len) - len);
    return p + pad8(len);
}

/* arrow_body(reserve, columns) -> bytearray | None: ``reserve`` zero bytes, then each column
 * as the batch body lays it out, straight from Arrow buffers. A column is
 *   ("fixed", buffer, byte_start, byte_len)             bytes as they are (timestamps)
 *   ("binary", validity|None, bit_offset, offsets, data|None, start, n)   rows start..start+n
 *   ("null", n)                                          a binary column of n nulls */
static PyObject *arrow_body(PyObject *self, PyObject *args) {
    Py_ssize_t reserve;
    PyObject *cols;
    if (!PyArg_ParseTuple(args, "nO", &reserve, &cols)) return NULL;
    if (reserve < 0 || reserve > 4096 || !PyList_CheckExact(cols) || PyList_GET_SIZE(cols) > 8)
        Py_RETURN_NONE;
    Py_ssize_t k = PyList_GET_SIZE(cols), size = reserve;
    ColSpec specs[8];
    Py_ssize_t parsed = 0;
    PyObject *result = NULL;
    for (; parsed < k; parsed++) {
        int r = parse_spec(PyList_GET_ITEM(cols, parsed), &specs[parsed]);
        if (r != 0) {
            release_spec(&specs[parsed]);
            if (r < 0) goto done;
            result = Py_None;
            Py_INCREF(result);
            goto done;
        }
        size += spec_size(&specs[parsed]);
        if (size - reserve >= MAX_BODY) {
            parsed++;
            result = Py_None;
            Py_INCREF(result);
            goto done;
        }
    }
    result = PyByteArray_FromStringAndSize(NULL, size);
    if (result != NULL) {
        char *p = PyByteArray_AS_STRING(result);
        memset(p, 0, reserve);
        p += reserve;
        for (Py_ssize_t i = 0; i < k; i++) p = write_spec(p, &specs[i]);
    }
done:
    for (Py_ssize_t i = 0; i < parsed; i++) release_spec(&specs[i]);
    return result;
}

/* arrow_key_partitions(validity|None, bit_offset, offsets, data|None, start, n, count, other)
 * -> bytes (int32 per row) | None: Kafka's partition of each key, ``other`` for a null key. */
static PyObject *arrow_key_partitions(PyObject *self, PyObject *args) {
    PyObject *valid, *offs, *data;
    Py_ssize_t bit_offset, start, n, count, other;
    if (!PyArg_ParseTuple(args, "OnOOnnnn", &valid, &bit_offset, &offs, &data, &start, &n,
                          &count, &other))
        return NULL;
    PyObject *t = Py_BuildValue("(sOnOOnn)", "binary", valid, bit_offset, offs, data, start, n);
    if (t == NULL) return NULL;
    ColSpec c;
    int r = parse_spec(t, &c);
    Py_DECREF(t);
    if (r != 0 || count <= 0 || count > INT32_MAX || other < 0 || other >= count) {
        release_spec(&c);
        if (r < 0) return NULL;
        Py_RETURN_NONE;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, 4 * n);
    if (out != NULL) {
        int32_t *parts = (int32_t *)PyBytes_AS_STRING(out);
        const int32_t *o = (const int32_t *)c.b.buf + c.start;
        const unsigned char *v = c.nulls ? (const unsigned char *)c.a.buf : NULL;
        const unsigned char *d = c.has_c ? (const unsigned char *)c.c.buf : (const unsigned char *)"";
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_ssize_t j = bit_offset + start + i;
            if (v != NULL && !(v[j >> 3] >> (j & 7) & 1)) {
                parts[i] = (int32_t)other;
            } else {
                uint32_t h = murmur2(d + o[i], (Py_ssize_t)o[i + 1] - o[i]);
                parts[i] = (int32_t)((h & 0x7fffffffu) % (uint32_t)count);
            }
        }
    }
    release_spec(&c);
    return out;
}

/* ---------------------------------------------------------------- decoding */

/* A binary column's offsets checked: monotonic from 0, within the data. */
static int offsets_ok(const char *body, Py_ssize_t size, Py_ssize_t n, Py_ssize_t opos,
                      Py_ssize_t dpos, Py_ssize_t dend) {
    if (opos < 0 || opos + 4 * (n + 1) > size || dpos < 0 || dend < dpos || dend > size) return 0;
    const int32_t *o = (const int32_t *)(body + opos);
    if (o[0] != 0 || o[n] != dend - dpos) return 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (o[i + 1] < o[i]) return 0;
    return 1;
}

static PyObject *item(const char *body, const int32_t *o, const unsigned char *valid,
                      Py_ssize_t dpos, Py_ssize_t i) {
    if (valid != NULL && !(valid[i >> 3] >> (i & 7) & 1)) Py_RETURN_NONE;
    return PyBytes_FromStringAndSize(body + dpos + o[i], o[i + 1] - o[i]);
}

/* decode_plain(Record, body, n, base, first_ts, ts_pos, kv, ko, kd, ke, vv, vo, vd, ve,
 *              partition) -> list[Record] | None: the records of a batch body without
 * explicit offsets or headers (positions as engine.format.decode.layout finds them; -1:
 * absent). None when a column does not check out: the Python path then says why. */
static PyObject *decode_plain(PyObject *self, PyObject *args) {
    PyObject *rtype, *bodyobj, *partition;
    Py_ssize_t n, tspos, kv, ko, kd, ke, vv, vo, vd, ve;
    long long base, first_ts;
    if (!PyArg_ParseTuple(args, "OOnLLnnnnnnnnnO", &rtype, &bodyobj, &n, &base, &first_ts, &tspos,
                          &kv, &ko, &kd, &ke, &vv, &vo, &vd, &ve, &partition))
        return NULL;
    if (!PyType_Check(rtype) || !PyType_IsSubtype((PyTypeObject *)rtype, &PyTuple_Type) || n <= 0)
        Py_RETURN_NONE;
    PyTypeObject *type = (PyTypeObject *)rtype;
    Py_buffer view;
    if (PyObject_GetBuffer(bodyobj, &view, PyBUF_SIMPLE) < 0) return NULL;
    const char *body = (const char *)view.buf;
    Py_ssize_t size = view.len;
    PyObject *out = NULL, *empty = NULL, *ts = NULL;
    if (!offsets_ok(body, size, n, ko, kd, ke) || !offsets_ok(body, size, n, vo, vd, ve) ||
        (kv >= 0 && kv + (n + 7) / 8 > size) || (vv >= 0 && vv + (n + 7) / 8 > size) ||
        (tspos >= 0 && tspos + 8 * n > size)) {
        PyBuffer_Release(&view);
        Py_RETURN_NONE;
    }
    const int32_t *kof = (const int32_t *)(body + ko), *vof = (const int32_t *)(body + vo);
    const unsigned char *kval = kv >= 0 ? (const unsigned char *)body + kv : NULL;
    const unsigned char *vval = vv >= 0 ? (const unsigned char *)body + vv : NULL;
    empty = PyTuple_New(0);
    ts = tspos < 0 ? PyLong_FromLongLong(first_ts) : NULL;
    out = PyList_New(n);
    if (empty == NULL || out == NULL || (tspos < 0 && ts == NULL)) goto fail;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *r = type->tp_alloc(type, 6);
        if (r == NULL) goto fail;
        PyList_SET_ITEM(out, i, r);
        PyObject *k = item(body, kof, kval, kd, i), *v = item(body, vof, vval, vd, i);
        PyObject *t;
        if (tspos >= 0) {
            int64_t tv;
            memcpy(&tv, body + tspos + 8 * i, 8);
            t = PyLong_FromLongLong(tv);
        } else {
            t = ts;
            Py_INCREF(t);
        }
        PyObject *off = PyLong_FromLongLong(base + i);
        Py_INCREF(empty);
        Py_INCREF(partition);
        PyTuple_SET_ITEM(r, 0, k);
        PyTuple_SET_ITEM(r, 1, v);
        PyTuple_SET_ITEM(r, 2, empty);
        PyTuple_SET_ITEM(r, 3, t);
        PyTuple_SET_ITEM(r, 4, off);
        PyTuple_SET_ITEM(r, 5, partition);
        if (k == NULL || v == NULL || t == NULL || off == NULL) goto fail;
    }
    Py_DECREF(empty);
    Py_XDECREF(ts);
    PyBuffer_Release(&view);
    return out;
fail:
    Py_XDECREF(out);
    Py_XDECREF(empty);
    Py_XDECREF(ts);
    PyBuffer_Release(&view);
    return NULL;
}

/* acks(partition, base, count) -> [(partition, base), (partition, base + 1), ...] */
static PyObject *acks(PyObject *self, PyObject *args) {
    PyObject *partition;
    long long base;
    Py_ssize_t count;
    if (!PyArg_ParseTuple(args, "OLn", &partition, &base, &count)) return NULL;
    if (count < 0) count = 0;
    PyObject *out = PyList_New(count);
    if (out == NULL) return NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *off = PyLong_FromLongLong(base + i);
        PyObject *t = off != NULL ? PyTuple_New(2) : NULL;
        if (t == NULL) {
            Py_XDECREF(off);
            Py_DECREF(out);
            return NULL;
        }
        Py_INCREF(partition);
        PyTuple_SET_ITEM(t, 0, partition);
        PyTuple_SET_ITEM(t, 1, off);
        PyList_SET_ITEM(out, i, t);
    }
    return out;
}

/* ---------------------------------------------------------------- Kafka record batches */

/* Kafka's records (magic 2) to and from a rivven batch body. engine.format.native has the
 * pure-Python twins (py_kafka_body, py_kafka_records): both answer None for anything that is
 * not a well-formed input, and the caller's Python path then says what is wrong
 * (engine.format.kafka_batch). Every varint and length read is checked against the buffer. */

/* A zigzag varint of at most 64 bits at *pos (before end): 0, or -1 when cut short or wider
 * than 64 bits. */
static int rd_varint(const unsigned char *p, Py_ssize_t *pos, Py_ssize_t end, int64_t *out) {
    uint64_t result = 0;
    int shift = 0;
    Py_ssize_t i = *pos;
    if (i + 1 < end && p[i] < 0x80) { /* (most are one byte, or two) */
        *out = (int64_t)(p[i] >> 1) ^ -(int64_t)(p[i] & 1);
        *pos = i + 1;
        return 0;
    }
    if (i + 2 < end && p[i + 1] < 0x80) {
        result = (uint64_t)(p[i] & 0x7f) | (uint64_t)p[i + 1] << 7;
        *out = (int64_t)((result >> 1) ^ (~(result & 1) + 1));
        *pos = i + 2;
        return 0;
    }
    for (;;) {
        if (i >= end) return -1;
        unsigned char b = p[i++];
        if (shift == 63 && (b & 0x7e)) return -1; /* bits past the 64th */
        result |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) break;
        shift += 7;
        if (shift > 63) return -1;
    }
    *out = (int64_t)((result >> 1) ^ (~(result & 1) + 1));
    *pos = i;
    return 0;
}

/* Strict UTF-8 (what Python's bytes.decode() accepts): 1 when valid. */
static int utf8_ok(const unsigned char *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        if (c < 0x80) { i++; continue; }
        int len;
        unsigned char lo = 0x80, hi = 0xbf;
        if (c >= 0xc2 && c <= 0xdf) len = 2;
        else if (c == 0xe0) { len = 3; lo = 0xa0; }
        else if ((c >= 0xe1 && c <= 0xec) || c == 0xee || c == 0xef) len = 3;
        else if (c == 0xed) { len = 3; hi = 0x9f; }
        else if (c == 0xf0) { len = 4; lo = 0x90; }
        else if (c >= 0xf1 && c <= 0xf3) len = 4;
        else if (c == 0xf4) { len = 4; hi = 0x8f; }
        else return 0;
        if (i + len > n) return 0;
        if (s[i + 1] < lo || s[i + 1] > hi) return 0;
        for (int k = 2; k < len; k++)
            if (s[i + k] < 0x80 || s[i + k] > 0xbf) return 0;
        i += len;
    }
    return 1;
}

/* A length-prefixed field (-1: null) within [*pos, end): its start (or -1) and length. */
static int rd_field(const unsigned char *p, Py_ssize_t *pos, Py_ssize_t end, Py_ssize_t *at,
                    Py_ssize_t *len) {
    int64_t n;
    if (rd_varint(p, pos, end, &n) < 0) return -1;
    if (n < 0) {
        if (n != -1) return -1;
        *at = -1;
        *len = 0;
        return 0;
    }
    if (n > end - *pos) return -1;
    *at = *pos;
    *len = (Py_ssize_t)n;
    *pos += (Py_ssize_t)n;
    return 0;
}

typedef struct {
    Py_ssize_t data, nulls; /* bytes of the non-null items, null items */
} ColSize;

/* The bytes a binary column of n items takes (engine.format.encode._binary_column). */
static Py_ssize_t col_bytes(Py_ssize_t n, ColSize c) {
    return (c.nulls ? pad8((n + 7) / 8) : 0) + pad8(4 * (n + 1)) + pad8(c.data);
}

/* A column being written: validity (or NULL), offsets, data cursor. */
typedef struct {
    unsigned char *valid;
    int32_t *offs;
    char *data;
    int32_t at;
} ColOut;

static char *col_start(char *p, Py_ssize_t n, ColSize c, ColOut *o) {
    o->valid = NULL;
    if (c.nulls) {
        o->valid = (unsigned char *)p;
        p += pad8((n + 7) / 8);
    }
    o->offs = (int32_t *)p;
    o->offs[0] = 0;
    p += pad8(4 * (n + 1));
    o->data = p;
    o->at = 0;
    return p + pad8(c.data);
}

static void col_put(ColOut *o, Py_ssize_t i, const unsigned char *src, Py_ssize_t at,
                    Py_ssize_t len) {
    if (at >= 0) {
        if (o->valid != NULL) o->valid[i >> 3] |= (unsigned char)(1 << (i & 7));
        memcpy(o->data + o->at, src + at, len);
        o->at += (int32_t)len;
    }
    o->offs[i + 1] = o->at;
}

/* One Kafka record parsed (positions in the records buffer; -1: null). */
typedef struct {
    int64_t ts_delta;
    Py_ssize_t kat, klen, vat, vlen, hpos, end;
    int64_t nh;
} KRec;

/* Parse record i at *pos (the checks engine.format.kafka_batch.records makes). */
static int rd_record(const unsigned char *p, Py_ssize_t *pos, Py_ssize_t total, Py_ssize_t i,
                     KRec *r) {
    int64_t length, odelta;
    if (rd_varint(p, pos, total, &length) < 0) return -1;
    if (length < 6 || length > total - *pos) return -1;
    Py_ssize_t end = *pos + (Py_ssize_t)length;
    *pos += 1; /* attributes (unused) */
    if (rd_varint(p, pos, end, &r->ts_delta) < 0 || rd_varint(p, pos, end, &odelta) < 0)
        return -1;
    if (odelta != i) return -1;
    if (rd_field(p, pos, end, &r->kat, &r->klen) < 0 || rd_field(p, pos, end, &r->vat, &r->vlen) < 0)
        return -1;
    if (rd_varint(p, pos, end, &r->nh) < 0) return -1;
    if (r->nh < 0 || r->nh > end - *pos) return -1;
    r->hpos = *pos;
    r->end = end;
    return 0;
}

/* A bound of a body's bytes (native.py's twin splits by the same): PART_BOUND, and per record
 * 22 and its key and value (a timestamp, two offsets, a header list offset, validity bits,
 * padding), per header 9 and its key and value. */
#define PART_BOUND 160

/* One part of a batch's records: the rivven batch body it becomes. */
typedef struct {
    Py_ssize_t start, n, hc, pos; /* first record, records, headers, its byte position */
    ColSize ks, vs, hks, hvs;
    int64_t first, top;
    int uniform;
} Part;

static Py_ssize_t part_size(const Part *pt) {
    Py_ssize_t n = pt->n, hc = pt->hc;
    Py_ssize_t size = (pt->uniform ? 0 : 8 * n) + col_bytes(n, pt->ks) + col_bytes(n, pt->vs);
    if (hc) size += pad8(4 * (n + 1)) + col_bytes(hc, pt->hks) + col_bytes(hc, pt->hvs);
    return size;
}

/* Write a part's body (its records checked when measured) at out (size bytes, zeroed here).
 * No Python API: called without the GIL. */
static void fill_part(char *out, Py_ssize_t size, const unsigned char *p, Py_ssize_t total,
                      const Part *pt, int64_t base_ts) {
    Py_ssize_t n = pt->n, hc = pt->hc;
    memset(out, 0, size);
    char *q = out;
    int64_t *tsout = NULL;
    if (!pt->uniform) {
        tsout = (int64_t *)q;
        q += 8 * n;
    }
    ColOut ko, vo, hko, hvo;
    q = col_start(q, n, pt->ks, &ko);
    q = col_start(q, n, pt->vs, &vo);
    int32_t *lists = NULL;
    if (hc) {
        lists = (int32_t *)q;
        q += pad8(4 * (n + 1));
        q = col_start(q, hc, pt->hks, &hko);
        q = col_start(q, hc, pt->hvs, &hvo);
    }
    Py_ssize_t pos = pt->pos, hi = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        KRec r;
        rd_record(p, &pos, total, pt->start + i, &r);
        if (tsout != NULL) {
            int64_t ts = base_ts + r.ts_delta;
            memcpy(tsout + i, &ts, 8);
        }
        col_put(&ko, i, p, r.kat, r.klen);
        col_put(&vo, i, p, r.vat, r.vlen);
        if (lists != NULL) lists[i] = (int32_t)hi;
        for (int64_t h = 0; h < r.nh; h++) {
            Py_ssize_t at, len;
            rd_field(p, &pos, r.end, &at, &len);
            col_put(&hko, hi, p, at, len);
            rd_field(p, &pos, r.end, &at, &len);
            col_put(&hvo, hi, p, at, len);
            hi++;
        }
        pos = r.end;
    }
    if (lists != NULL) lists[n] = (int32_t)hc;
}

static PyObject *part_body(const unsigned char *p, Py_ssize_t total, Part *pt, int64_t base_ts,
                           Py_ssize_t reserve) {
    Py_ssize_t size = part_size(pt);
    PyObject *buf = PyByteArray_FromStringAndSize(NULL, reserve + size);
    if (buf == NULL) return NULL;
    char *out = PyByteArray_AS_STRING(buf);
    memset(out, 0, reserve);
    Py_BEGIN_ALLOW_THREADS /* (the records are immutable; the buffer is ours alone yet) */
    fill_part(out + reserve, size, p, total, pt, base_ts);
    Py_END_ALLOW_THREADS
    Py_ssize_t hc = pt->hc;
    long attrs = (pt->uniform ? 0x0400 : 0) | (pt->ks.nulls ? 0x0080 : 0) |
                 (pt->vs.nulls ? 0x0100 : 0) | (hc ? 0x0040 : 0) | (hc && pt->hvs.nulls ? 0x0800 : 0);
    return Py_BuildValue("(NlLLnn)", buf, attrs, (long long)pt->first, (long long)pt->top,
                         pt->start, pt->n);
}

/* Check and measure ``count`` records, cutting them into parts (see kafka_body): 0, 1 when a
 * record is malformed or a body would pass 2 GiB, 2 out of memory. No Python API: called
 * without the GIL; *parts is PyMem_RawMalloc'd. */
static int measure(const unsigned char *p, Py_ssize_t total, Py_ssize_t count, int64_t base_ts,
                   Py_ssize_t max_body, Part **parts_out, Py_ssize_t *nparts_out) {
    Part *parts = NULL, *pt = NULL;
    Py_ssize_t nparts = 0, cap = 0, pos = 0, bound = 0;
    int status = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_ssize_t at0 = pos;
        KRec r;
        if (rd_record(p, &pos, total, i, &r) < 0) { status = 1; break; }
        int64_t ts;
        if (__builtin_add_overflow(base_ts, r.ts_delta, &ts)) { status = 1; break; }
        Py_ssize_t rb = 18 + (r.kat < 0 ? 0 : r.klen) + (r.vat < 0 ? 0 : r.vlen) + 4;
        Py_ssize_t hpos = pos;
        for (int64_t h = 0; h < r.nh && status == 0; h++) { /* (the bound first) */
            Py_ssize_t at, len;
            if (rd_field(p, &pos, r.end, &at, &len) < 0 || at < 0 || !utf8_ok(p + at, len)) {
                status = 1;
                break;
            }
            rb += 9 + len;
            if (rd_field(p, &pos, r.end, &at, &len) < 0) { status = 1; break; }
            rb += at < 0 ? 0 : len;
        }
        if (status != 0 || pos != r.end) { status = 1; break; }
        if (pt == NULL || (max_body > 0 && bound + rb > max_body)) {
            if (nparts == cap) {
                cap = cap ? 2 * cap : 4;
                Part *grown = PyMem_RawRealloc(parts, cap * sizeof(Part));
                if (grown == NULL) { status = 2; break; }
                parts = grown;
            }
            pt = &parts[nparts++];
            memset(pt, 0, sizeof(*pt));
            pt->start = i;
            pt->pos = at0;
            pt->first = pt->top = ts;
            pt->uniform = 1;
            bound = PART_BOUND;
        }
        bound += rb;
        pt->n++;
        if (ts != pt->first) pt->uniform = 0;
        if (ts > pt->top) pt->top = ts;
        if (r.kat < 0) pt->ks.nulls++; else pt->ks.data += r.klen;
        if (r.vat < 0) pt->vs.nulls++; else pt->vs.data += r.vlen;
        pos = hpos;
        for (int64_t h = 0; h < r.nh; h++) {
            Py_ssize_t at, len;
            rd_field(p, &pos, r.end, &at, &len);
            pt->hks.data += len;
            rd_field(p, &pos, r.end, &at, &len);
            if (at < 0) pt->hvs.nulls++; else pt->hvs.data += len;
        }
        pt->hc += (Py_ssize_t)r.nh;
        if (bound >= MAX_BODY) { status = 1; break; } /* (the bound is above the body's size) */
    }
    if (status == 0 && pos != total) status = 1;
    *parts_out = parts;
    *nparts_out = nparts;
    return status;
}

/* kafka_body(records, count, base_timestamp, reserve, max_body) -> [(bytearray, attributes,
 * first_ts, max_ts, first, n), ...] | None: the ``count`` records of a Kafka batch
 * (decompressed) as rivven batch bodies after ``reserve`` zero bytes each, exactly as
 * engine.format.encode lays out their columns (keys, values, timestamps, headers);
 * ``attributes`` a body's column flags (engine.format.records.ATTR_*), ``first`` the index of
 * its first record, ``n`` its records. One body, unless ``max_body`` > 0: then a new one
 * starts where a body's bound (PART_BOUND) would pass it; ``max_body`` < 0: the records
 * checked only, no body made ([]). None when a record is malformed (the Python path says
 * how) or a column would pass 2 GiB. */
static PyObject *kafka_body(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t count, reserve, max_body = 0;
    long long base_ts;
    if (!PyArg_ParseTuple(args, "y*nLn|n", &view, &count, &base_ts, &reserve, &max_body))
        return NULL;
    const unsigned char *p = (const unsigned char *)view.buf;
    Py_ssize_t total = view.len;
    PyObject *result = NULL;
    Part *parts = NULL;
    Py_ssize_t nparts = 0;
    int status = 1;
    /* every record takes 7 bytes at least: more cannot be there */
    if (count > 0 && reserve >= 0 && reserve <= 4096 && count <= total / 7) {
        Py_BEGIN_ALLOW_THREADS /* (the records are immutable while held) */
        status = measure(p, total, count, (int64_t)base_ts, max_body, &parts, &nparts);
        Py_END_ALLOW_THREADS
    }
    if (status == 2) {
        PyErr_NoMemory();
        goto done;
    }
    if (status != 0) {
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    if (max_body < 0) nparts = 0; /* (checked only) */
    result = PyList_New(nparts);
    if (result == NULL) goto done;
    for (Py_ssize_t k = 0; k < nparts; k++) {
        PyObject *one = part_body(p, total, &parts[k], base_ts, reserve);
        if (one == NULL) {
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, k, one);
    }
done:
    PyMem_RawFree(parts);
    PyBuffer_Release(&view);
    return result;
}

static int zz_len(int64_t v) {
    uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    int n = 1;
    while (z > 0x7f) {
        z >>= 7;
        n++;
    }
    return n;
}

static unsigned char *zz_put(unsigned char *q, int64_t v) {
    uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    while (z > 0x7f) {
        *q++ = (unsigned char)((z & 0x7f) | 0x80);
        z >>= 7;
    }
    *q++ = (unsigned char)z;
    return q;
}

/* A column read: validity (or NULL), offsets, data. */
typedef struct {
    const unsigned char *valid;
    const int32_t *offs;
    const unsigned char *data;
} ColIn;

static int col_in(const char *body, Py_ssize_t size, Py_ssize_t n, Py_ssize_t vpos,
                  Py_ssize_t opos, Py_ssize_t dpos, Py_ssize_t dend, ColIn *c) {
    if (!offsets_ok(body, size, n, opos, dpos, dend)) return -1;
    if (vpos >= 0 && (vpos + (n + 7) / 8 > size)) return -1;
    c->valid = vpos >= 0 ? (const unsigned char *)body + vpos : NULL;
    c->offs = (const int32_t *)(body + opos);
    c->data = (const unsigned char *)body + dpos;
    return 0;
}

static int col_null(const ColIn *c, Py_ssize_t i) {
    return c->valid != NULL && !(c->valid[i >> 3] >> (i & 7) & 1);
}

/* A field's bytes in a Kafka record: its varint length (-1: null) and the bytes. */
static Py_ssize_t field_size(const ColIn *c, Py_ssize_t i) {
    if (col_null(c, i)) return 1;
    int32_t len = c->offs[i + 1] - c->offs[i];
    return zz_len(len) + len;
}

static unsigned char *field_put(unsigned char *q, const ColIn *c, Py_ssize_t i) {
    if (col_null(c, i)) {
        *q++ = 1; /* zigzag(-1) */
        return q;
    }
    int32_t len = c->offs[i + 1] - c->offs[i];
    q = zz_put(q, len);
    memcpy(q, c->data + c->offs[i], len);
    return q + len;
}

/* A rivven body being read as Kafka's records. */
typedef struct {
    ColIn kc, vc, hkc, hvc;
    const int32_t *deltas, *lists;
    const char *tsb;
    Py_ssize_t n;
    int64_t first_ts;
} KOut;

/* Kafka's record i of the body: its length (after the length varint), its timestamp delta,
 * offset delta and header range. */
static Py_ssize_t kout_record(const KOut *k, Py_ssize_t i, int64_t *ts, int64_t *delta,
                              int32_t *h0, int32_t *h1) {
    *ts = 0;
    *delta = i;
    if (k->tsb != NULL) {
        memcpy(ts, k->tsb + 8 * i, 8);
        *ts -= k->first_ts; /* (checked in kout_check) */
    }
    if (k->deltas != NULL) *delta = k->deltas[i];
    *h0 = k->lists ? k->lists[i] : 0;
    *h1 = k->lists ? k->lists[i + 1] : 0;
    Py_ssize_t rec = 1 + zz_len(*ts) + zz_len(*delta) + field_size(&k->kc, i) +
                     field_size(&k->vc, i) + zz_len(*h1 - *h0);
    for (int32_t j = *h0; j < *h1; j++) rec += field_size(&k->hkc, j) + field_size(&k->hvc, j);
    return rec;
}

/* Check the body's buffers (as fastcodec's decode_plain does, and the offset deltas, header
 * lists and header keys) and measure the records: their bytes, or -1 when something does not
 * check out. No Python API: called without the GIL. */
static Py_ssize_t kout_check(KOut *k, const char *body, Py_ssize_t size, long long last_delta,
                             Py_ssize_t od, Py_ssize_t tsp, Py_ssize_t kv, Py_ssize_t ko,
                             Py_ssize_t kd, Py_ssize_t ke, Py_ssize_t vv, Py_ssize_t vo,
                             Py_ssize_t vd, Py_ssize_t ve, Py_ssize_t hl, Py_ssize_t hko,
                             Py_ssize_t hkd, Py_ssize_t hke, Py_ssize_t hvv, Py_ssize_t hvo,
                             Py_ssize_t hvd, Py_ssize_t hve, Py_ssize_t hc) {
    Py_ssize_t n = k->n;
    if (col_in(body, size, n, kv, ko, kd, ke, &k->kc) < 0 ||
        col_in(body, size, n, vv, vo, vd, ve, &k->vc) < 0)
        return -1;
    if (tsp >= 0) {
        if (tsp + 8 * n > size) return -1;
        k->tsb = body + tsp;
        for (Py_ssize_t i = 0; i < n; i++) {
            int64_t ts;
            memcpy(&ts, k->tsb + 8 * i, 8);
            if (__builtin_sub_overflow(ts, k->first_ts, &ts)) return -1;
        }
    }
    if (od >= 0) { /* increasing from 0 or more to the header's last delta */
        if (od + 4 * n > size) return -1;
        k->deltas = (const int32_t *)(body + od);
        if (k->deltas[0] < 0 || k->deltas[n - 1] != last_delta) return -1;
        for (Py_ssize_t i = 1; i < n; i++)
            if (k->deltas[i] <= k->deltas[i - 1]) return -1;
    }
    if (hl >= 0) {
        if (hc < 0 || hl + 4 * (n + 1) > size) return -1;
        k->lists = (const int32_t *)(body + hl);
        if (k->lists[0] != 0 || k->lists[n] != hc) return -1;
        for (Py_ssize_t i = 0; i < n; i++)
            if (k->lists[i + 1] < k->lists[i]) return -1;
        if (col_in(body, size, hc, -1, hko, hkd, hke, &k->hkc) < 0 ||
            col_in(body, size, hc, hvv, hvo, hvd, hve, &k->hvc) < 0)
            return -1;
        for (Py_ssize_t j = 0; j < hc; j++)
            if (!utf8_ok(k->hkc.data + k->hkc.offs[j], k->hkc.offs[j + 1] - k->hkc.offs[j]))
                return -1;
    }
    Py_ssize_t out = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t ts, delta;
        int32_t h0, h1;
        Py_ssize_t rec = kout_record(k, i, &ts, &delta, &h0, &h1);
        out += zz_len(rec) + rec;
        if (out >= MAX_BODY) return -1;
    }
    return out;
}

static void kout_write(const KOut *k, unsigned char *q) {
    for (Py_ssize_t i = 0; i < k->n; i++) {
        int64_t ts, delta;
        int32_t h0, h1;
        Py_ssize_t rec = kout_record(k, i, &ts, &delta, &h0, &h1);
        q = zz_put(q, rec);
        *q++ = 0; /* attributes */
        q = zz_put(q, ts);
        q = zz_put(q, delta);
        q = field_put(q, &k->kc, i);
        q = field_put(q, &k->vc, i);
        q = zz_put(q, h1 - h0);
        for (int32_t j = h0; j < h1; j++) {
            q = field_put(q, &k->hkc, j);
            q = field_put(q, &k->hvc, j);
        }
    }
}

/* kafka_records(body, count, first_ts, last_delta, reserve, offset_deltas, timestamps,
 *               kv, ko, kd, ke, vv, vo, vd, ve, hl, hko, hkd, hke, hvv, hvo, hvd, hve,
 *               header_count) -> bytearray | None: the records of a rivven batch body (its
 * buffers where engine.format.decode.layout found them; -1: absent) as Kafka's records
 * (magic 2, the batch's base timestamp ``first_ts``), after ``reserve`` zero bytes (room for
 * the batch header). None when a column does not check out (the Python path says why) or a
 * header key is not UTF-8 (the Python path replaces what is not). */
static PyObject *kafka_records(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t n, reserve, od, tsp, kv, ko, kd, ke, vv, vo, vd, ve, hl, hko, hkd, hke, hvv, hvo,
        hvd, hve, hc;
    long long first_ts, last_delta;
    if (!PyArg_ParseTuple(args, "y*nLLnnnnnnnnnnnnnnnnnnnn", &view, &n, &first_ts, &last_delta,
                          &reserve, &od, &tsp, &kv, &ko, &kd, &ke, &vv, &vo, &vd, &ve, &hl, &hko,
                          &hkd, &hke, &hvv, &hvo, &hvd, &hve, &hc))
        return NULL;
    PyObject *result = NULL;
    KOut k;
    memset(&k, 0, sizeof(k));
    k.n = n;
    k.first_ts = (int64_t)first_ts;
    Py_ssize_t size = -1;
    if (n > 0 && reserve >= 0 && reserve <= 4096) {
        Py_BEGIN_ALLOW_THREADS /* (the body is immutable while held) */
        size = kout_check(&k, (const char *)view.buf, view.len, last_delta, od, tsp, kv, ko, kd,
                          ke, vv, vo, vd, ve, hl, hko, hkd, hke, hvv, hvo, hvd, hve, hc);
        Py_END_ALLOW_THREADS
    }
    if (size < 0 || reserve + size >= MAX_BODY) {
        result = Py_None;
        Py_INCREF(result);
    } else if ((result = PyByteArray_FromStringAndSize(NULL, reserve + size)) != NULL) {
        unsigned char *q = (unsigned char *)PyByteArray_AS_STRING(result);
        memset(q, 0, reserve);
        Py_BEGIN_ALLOW_THREADS
        kout_write(&k, q + reserve);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"plain_body", plain_body, METH_VARARGS, "Key and value columns of a plain batch."},
    {"record_columns", record_columns, METH_O, "Keys and values of plain Records."},
    {"key_partitions", key_partitions, METH_VARARGS, "Kafka's murmur2 partition per key."},
    {"arrow_body", arrow_body, METH_VARARGS, "Batch body columns from Arrow buffers."},
    {"decode_plain", decode_plain, METH_VARARGS, "Records of a plain batch body."},
    {"acks", acks, METH_VARARGS, "(partition, offset) per record of an append."},
    {"arrow_key_partitions", arrow_key_partitions, METH_VARARGS, "Partitions of Arrow keys."},
    {"kafka_body", kafka_body, METH_VARARGS, "Kafka records as a rivven batch body."},
    {"kafka_records", kafka_records, METH_VARARGS, "A rivven batch body as Kafka records."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "fastcodec", NULL, -1, methods};

PyMODINIT_FUNC PyInit_fastcodec(void) { return PyModule_Create(&module); }
