/* The produce path's per-record loops in C: engine.format.native has the same functions in
 * pure Python (used when this module is not built) and tests/test_native.py checks that both
 * give identical results. Every function answers None where its input is not the plain case
 * it handles; the caller then takes the general Python path. */
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

static PyMethodDef methods[] = {
    {"plain_body", plain_body, METH_VARARGS, "Key and value columns of a plain batch."},
    {"record_columns", record_columns, METH_O, "Keys and values of plain Records."},
    {"key_partitions", key_partitions, METH_VARARGS, "Kafka's murmur2 partition per key."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fastcodec", NULL, -1, methods};

PyMODINIT_FUNC PyInit__fastcodec(void) { return PyModule_Create(&module); }
