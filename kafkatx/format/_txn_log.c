/*
 * kafkatx.format._txn_log -- the compiled decoder of kafkatx/format/txn_log.py's usual records.
 *
 *   txn_log_decode(key, value) -> (transactional_id, fields | None) | None
 */
#include "_wire.h"

/* ----------------------------------------------------------------- __transaction_state records */

/* The C twin of kafkatx.format.txn_log.decode_txn_log_key / decode_txn_log_value for the
 * records TransactionLog.keyToBytes / valueToBytes write (value versions 0 and 1, known tags).
 * Returns (transactional_id, fields) with fields None for a tombstone, else the tuple
 * (version, producer_id, producer_epoch, timeout_ms, state, partitions, last_update, start,
 *  previous_producer_id, next_producer_id, client_transaction_version, next_producer_epoch);
 * returns None whenever anything is unusual (bad bytes, unknown tags or versions, invalid
 * UTF-8): the Python decoder then decides, with its error messages and positions, so the two
 * paths give the same answer on every input. */

typedef struct { const uint8_t *d; Py_ssize_t n, p; } tl_rd;

static int tl_need(tl_rd *r, Py_ssize_t k) { return k >= 0 && r->n - r->p >= k; }
static int64_t tl_be(tl_rd *r, int k)
{
    uint64_t v = 0;
    for (int i = 0; i < k; i++)
        v = (v << 8) | r->d[r->p + i];
    r->p += k;
    if (k < 8 && (v >> (8 * k - 1)) & 1)
        v |= ~(uint64_t)0 << (8 * k);  /* sign-extend */
    return (int64_t)v;
}
static int tl_uvarint(tl_rd *r, uint32_t *out)
{
    uint64_t v = 0;
    for (int i = 0; i < 5; i++) {
        if (r->p >= r->n)
            return -1;
        uint8_t b = r->d[r->p++];
        v |= (uint64_t)(b & 0x7F) << (7 * i);
        if (!(b & 0x80)) {
            *out = (uint32_t)(v & 0xFFFFFFFFu);
            return 0;
        }
    }
    return -1;
}
/* a string of len bytes at the read position, strict UTF-8; NULL with no error set on bad bytes */
static PyObject *tl_str(tl_rd *r, Py_ssize_t len)
{
    if (!tl_need(r, len))
        return NULL;
    PyObject *s = PyUnicode_DecodeUTF8((const char *)r->d + r->p, len, "strict");
    if (s == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
            return NULL;
        PyErr_Clear();
        return NULL;
    }
    r->p += len;
    return s;
}
static int tl_skip_tags(tl_rd *r)
{
    uint32_t count, tag, size;
    if (tl_uvarint(r, &count) < 0)
        return -1;
    for (uint32_t i = 0; i < count; i++) {
        if (tl_uvarint(r, &tag) < 0 || tl_uvarint(r, &size) < 0 || !tl_need(r, size))
            return -1;
        r->p += size;
    }
    return 0;
}

static PyObject *
tl_partitions(tl_rd *r, int flexible)
{
    Py_ssize_t count;
    if (flexible) {
        uint32_t raw;
        if (tl_uvarint(r, &raw) < 0)
            return NULL;
        if (raw == 0)
            Py_RETURN_NONE;
        count = (Py_ssize_t)raw - 1;
    } else {
        if (!tl_need(r, 4))
            return NULL;
        count = (Py_ssize_t)tl_be(r, 4);
        if (count == -1)
            Py_RETURN_NONE;
        if (count < 0)
            return NULL;
    }
    if (count > r->n - r->p)  /* each element takes bytes */
        return NULL;
    PyObject *out = PyTuple_New(count);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_ssize_t tlen, ids;
        if (flexible) {
            uint32_t raw;
            if (tl_uvarint(r, &raw) < 0 || raw == 0 || raw - 1 > 0x7FFF)
                goto fail;
            tlen = (Py_ssize_t)raw - 1;
        } else {
            if (!tl_need(r, 2))
                goto fail;
            tlen = (Py_ssize_t)tl_be(r, 2);
            if (tlen < 0)
                goto fail;
        }
        PyObject *topic = tl_str(r, tlen);
        if (topic == NULL)
            goto fail;
        if (flexible) {
            uint32_t raw;
            if (tl_uvarint(r, &raw) < 0 || raw == 0) {
                Py_DECREF(topic);
                goto fail;
            }
            ids = (Py_ssize_t)raw - 1;
        } else {
            ids = tl_need(r, 4) ? (Py_ssize_t)tl_be(r, 4) : -1;
        }
        if (ids < 0 || !tl_need(r, ids * 4)) {
            Py_DECREF(topic);
            goto fail;
        }
        PyObject *idt = PyTuple_New(ids);
        if (idt == NULL) {
            Py_DECREF(topic);
            goto fail;
        }
        for (Py_ssize_t j = 0; j < ids; j++) {
            PyObject *v = PyLong_FromLongLong(tl_be(r, 4));
            if (v == NULL) {
                Py_DECREF(topic);
                Py_DECREF(idt);
                goto fail;
            }
            PyTuple_SET_ITEM(idt, j, v);
        }
        if (flexible && tl_skip_tags(r) < 0) {
            Py_DECREF(topic);
            Py_DECREF(idt);
            goto fail;
        }
        PyObject *pair = PyTuple_Pack(2, topic, idt);
        Py_DECREF(topic);
        Py_DECREF(idt);
        if (pair == NULL)
            goto fail;
        PyTuple_SET_ITEM(out, i, pair);
    }
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

static PyObject *
sp_txn_log_decode(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *key_arg, *value_arg;
    if (wire_args("txn_log_decode", args, nargs, "OO", &key_arg, &value_arg) < 0)
        return NULL;
    Py_buffer kv, vv;
    PyObject *tid = NULL, *parts = NULL, *result = NULL;
    if (PyObject_GetBuffer(key_arg, &kv, PyBUF_SIMPLE) < 0)
        return NULL;
    tl_rd k = {(const uint8_t *)kv.buf, kv.len, 0};
    if (tl_need(&k, 4) && tl_be(&k, 2) == 0) {
        Py_ssize_t len = (Py_ssize_t)tl_be(&k, 2);
        if (len >= 0 && len == k.n - k.p)
            tid = tl_str(&k, len);
    }
    PyBuffer_Release(&kv);
    if (tid == NULL) {
        if (PyErr_Occurred())
            return NULL;
        Py_RETURN_NONE;
    }
    if (value_arg == Py_None) {
        result = PyTuple_Pack(2, tid, Py_None);
        Py_DECREF(tid);
        return result;
    }
    if (PyObject_GetBuffer(value_arg, &vv, PyBUF_SIMPLE) < 0) {
        Py_DECREF(tid);
        return NULL;
    }
    tl_rd r = {(const uint8_t *)vv.buf, vv.len, 0};
    int64_t version, pid, epoch, timeout, state, last, start;
    int64_t prev = -1, next = -1, ctv = 0, next_epoch = -1;
    if (!tl_need(&r, 2 + 8 + 2 + 4 + 1))
        goto unusual;
    version = tl_be(&r, 2);
    if (version != 0 && version != 1)
        goto unusual;
    pid = tl_be(&r, 8);
    epoch = tl_be(&r, 2);
    timeout = tl_be(&r, 4);
    state = tl_be(&r, 1);
    if (state < 0 || state > 7)
        goto unusual;
    parts = tl_partitions(&r, version >= 1);
    if (parts == NULL)
        goto unusual;
    if (!tl_need(&r, 16))
        goto unusual;
    last = tl_be(&r, 8);
    start = tl_be(&r, 8);
    if (version >= 1) {
        uint32_t count, tag, size;
        int64_t prev_tag = -1;
        if (tl_uvarint(&r, &count) < 0)
            goto unusual;
        for (uint32_t i = 0; i < count; i++) {
            if (tl_uvarint(&r, &tag) < 0 || tl_uvarint(&r, &size) < 0 || !tl_need(&r, size))
                goto unusual;
            if ((int64_t)tag <= prev_tag)
                goto unusual;  /* a repeated or unordered tag: Python's decoder decides */
            prev_tag = tag;
            if ((tag == 0 || tag == 1) && size == 8) {
                int64_t v = tl_be(&r, 8);
                if (tag == 0)
                    prev = v;
                else
                    next = v;
            } else if ((tag == 2 || tag == 3) && size == 2) {
                int64_t v = tl_be(&r, 2);
                if (tag == 2)
                    ctv = v;
                else
                    next_epoch = v;
            } else {
                goto unusual;  /* unknown tags are kept raw by the Python decoder */
            }
        }
    }
    if (r.p != r.n)
        goto unusual;
    PyBuffer_Release(&vv);
    {
        PyObject *fields = Py_BuildValue("(LLLLLOLLLLLL)", (long long)version, (long long)pid, (long long)epoch,
                                         (long long)timeout, (long long)state, parts, (long long)last,
                                         (long long)start, (long long)prev, (long long)next, (long long)ctv,
                                         (long long)next_epoch);
        Py_DECREF(parts);
        if (fields == NULL) {
            Py_DECREF(tid);
            return NULL;
        }
        result = PyTuple_Pack(2, tid, fields);
        Py_DECREF(tid);
        Py_DECREF(fields);
        return result;
    }
unusual:
    PyBuffer_Release(&vv);
    Py_XDECREF(parts);
    Py_DECREF(tid);
    if (PyErr_Occurred())
        return NULL;
    Py_RETURN_NONE;
}


static PyMethodDef tl_methods[] = {
    {"txn_log_decode", (PyCFunction)(void (*)(void))sp_txn_log_decode, METH_FASTCALL,
     "txn_log_decode(key, value) -> (transactional_id, fields | None) | None (None: let Python decode)"},
    {NULL, NULL, 0, NULL}};

static PyModuleDef_Slot tl_slots[] = {
    {Py_mod_exec, wire_exec},
#ifdef Py_mod_multiple_interpreters
    {Py_mod_multiple_interpreters, Py_MOD_PER_INTERPRETER_GIL_SUPPORTED},
#endif
    {0, NULL}};

static struct PyModuleDef tl_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "kafkatx.format._txn_log",
    .m_doc = "Compiled __transaction_state record decoding for kafkatx.format.txn_log (optional; see _txn_log.c).",
    .m_size = 0, /* no state: nothing is registered */
    .m_methods = tl_methods,
    .m_slots = tl_slots,
};

PyMODINIT_FUNC
PyInit__txn_log(void)
{
    return PyModuleDef_Init(&tl_module);
}
