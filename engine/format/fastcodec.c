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

static PyMethodDef methods[] = {
    {"plain_body", plain_body, METH_VARARGS, "Key and value columns of a plain batch."},
    {"record_columns", record_columns, METH_O, "Keys and values of plain Records."},
    {"key_partitions", key_partitions, METH_VARARGS, "Kafka's murmur2 partition per key."},
    {"arrow_body", arrow_body, METH_VARARGS, "Batch body columns from Arrow buffers."},
    {"decode_plain", decode_plain, METH_VARARGS, "Records of a plain batch body."},
    {"acks", acks, METH_VARARGS, "(partition, offset) per record of an append."},
    {"arrow_key_partitions", arrow_key_partitions, METH_VARARGS, "Partitions of Arrow keys."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "fastcodec", NULL, -1, methods};

PyMODINIT_FUNC PyInit_fastcodec(void) { return PyModule_Create(&module); }
