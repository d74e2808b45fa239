/*
 * kafkatx/format/_txn_log.h -- the __transaction_state record decoder of kafkatx/format/_txn_log.c, as
 * static functions, so that kafkatx/coordinator/_coordinator.c (the load, TxnFold's C twin) decodes a record
 * where it lies in the segment buffer: no bytes object for its key and value, no call through Python.
 * txn_log_decode (format/_txn_log.c) is tl_decode over two buffers; txn_fold calls tl_decode with a
 * tl_cache that hands back the partitions tuple of the last value whose partition bytes were the same
 * (equal bytes parse to an equal tuple: one tuple shared by the ids of a run, not five objects each).
 * Everything here is static: each module including it gets its own copy (as _wire.h).
 */
#ifndef KAFKATX_TXN_LOG_H
#define KAFKATX_TXN_LOG_H

#include "_wire.h"

/* The C twin of kafkatx.format.txn_log.decode_txn_log_key / decode_txn_log_value for the
 * records TransactionLog.keyToBytes / valueToBytes write (value versions 0 and 1, known tags).
 * Gives (transactional_id, fields) with fields None for a tombstone, else the tuple
 * (version, producer_id, producer_epoch, timeout_ms, state, partitions, last_update, start,
 *  previous_producer_id, next_producer_id, client_transaction_version, next_producer_epoch);
 * "unusual" whenever anything is unusual (bad bytes, unknown tags or versions, invalid
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

/* The partitions array at r's position (TransactionLogValue.transactionPartitions: a nullable array of
 * (topic, partition ids), compact in the flexible version), walked once whatever is asked of it: with out,
 * parsed into a tuple of (topic, ids tuple) pairs or None (*out, a new reference); without, only framed (no
 * object made, no topic's UTF-8 checked: tl_partitions_len). 0, or -1 when it does not frame, a topic is not
 * UTF-8, or an object cannot be made (an exception set then). */
static inline __attribute__((always_inline)) int /* inlined: the framing-only walk keeps no object code */
tl_partitions_walk(tl_rd *r, int flexible, PyObject **out)
{
    Py_ssize_t count;
    if (out != NULL)
        *out = NULL;
    if (flexible) {
        uint32_t raw;
        if (tl_uvarint(r, &raw) < 0)
            return -1;
        if (raw == 0)
            goto none;
        count = (Py_ssize_t)raw - 1;
    } else {
        if (!tl_need(r, 4))
            return -1;
        count = (Py_ssize_t)tl_be(r, 4);
        if (count == -1)
            goto none;
        if (count < 0)
            return -1;
    }
    if (count > r->n - r->p)  /* each element takes bytes */
        return -1;
    PyObject *list = NULL, *topic = NULL;
    if (out != NULL && (list = PyTuple_New(count)) == NULL)
        return -1;
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
        if (out != NULL) {
            if ((topic = tl_str(r, tlen)) == NULL)
                goto fail;
        } else {
            if (!tl_need(r, tlen))
                goto fail;
            r->p += tlen;
        }
        if (flexible) {
            uint32_t raw;
            if (tl_uvarint(r, &raw) < 0 || raw == 0)
                goto fail;
            ids = (Py_ssize_t)raw - 1;
        } else {
            ids = tl_need(r, 4) ? (Py_ssize_t)tl_be(r, 4) : -1;
        }
        if (ids < 0 || !tl_need(r, ids * 4))
            goto fail;
        if (out == NULL) {
            r->p += ids * 4;
        } else {
            PyObject *idt = PyTuple_New(ids);
            if (idt == NULL)
                goto fail;
            for (Py_ssize_t j = 0; j < ids; j++) {
                PyObject *v = PyLong_FromLongLong(tl_be(r, 4));
                if (v == NULL) {
                    Py_DECREF(idt);
                    goto fail;
                }
                PyTuple_SET_ITEM(idt, j, v);
            }
            PyObject *pair = PyTuple_Pack(2, topic, idt);
            Py_DECREF(idt);
            Py_CLEAR(topic);
            if (pair == NULL)
                goto fail;
            PyTuple_SET_ITEM(list, i, pair);
        }
        if (flexible && tl_skip_tags(r) < 0)
            goto fail;
    }
    if (out != NULL)
        *out = list;
    return 0;
none:
    if (out != NULL)
        *out = Py_NewRef(Py_None);
    return 0;
fail:
    Py_XDECREF(topic);
    Py_XDECREF(list);
    return -1;
}

static PyObject *
tl_partitions_parse(tl_rd *r, int flexible)
{
    PyObject *parts;
    return tl_partitions_walk(r, flexible, &parts) < 0 ? NULL : parts;
}

/* The last partitions array parsed (its bytes, still in the caller's buffer, and its tuple or None),
 * for tl_decode: the same bytes again (in a value of the same flexibility) give that object again. */
#define TL_FIELDS 12 /* the fields tuple's length (txn_log.TxnLogFields) */

/* A partitions array parsed before, its bytes copied: one of TL_SLOTS in a table the caller owns and keeps
 * across buffers (coordinator/_coordinator.c's TxnTable, for a whole partition), found by the hash of the bytes. The
 * ids of a coordinator partition name the same few partition lists again and again: each list is one tuple. */
#define TL_SLOT_BITS 12
#define TL_SLOTS (1 << TL_SLOT_BITS) /* a broker's open transactions name thousands of partitions */
#define TL_SLOT_BYTES 512 /* longer lists are parsed each time */

typedef struct {
    uint8_t *raw; /* TL_SLOT_BYTES bytes, allocated at first use (PyMem) */
    Py_ssize_t len;
    int flexible;
    PyObject *parts; /* owned; NULL: none yet */
} tl_slot;

static WIRE_UNUSED void tl_slots_free(tl_slot *slots)
{
    if (slots == NULL)
        return;
    for (int i = 0; i < TL_SLOTS; i++) {
        Py_CLEAR(slots[i].parts);
        PyMem_Free(slots[i].raw);
    }
    PyMem_Free(slots);
}

typedef struct {
    tl_slot *slots; /* NULL: none (only the last array parsed is remembered) */
    const uint8_t *raw;
    Py_ssize_t len;
    int flexible;
    PyObject *parts; /* owned; NULL: none yet */
    /* per field of the fields tuple, the int of the last value decoded (owned; NULL: none yet): the same
     * number again is that object again (a timeout, an epoch, a version repeat from record to record; an
     * int is immutable, so sharing it changes no answer and saves an allocation per field) */
    long long num[TL_FIELDS];
    PyObject *num_obj[TL_FIELDS];
} tl_cache;

static WIRE_UNUSED void tl_cache_clear(tl_cache *c)
{
    Py_CLEAR(c->parts);
    c->raw = NULL;
    c->len = 0;
    for (int i = 0; i < TL_FIELDS; i++)
        Py_CLEAR(c->num_obj[i]);
}

/* the int ``x`` for field ``i``: the cached object when it is that number, else a new one (cached) */
static PyObject *
tl_number(tl_cache *cache, int i, long long x)
{
    if (cache == NULL)
        return PyLong_FromLongLong(x);
    if (cache->num_obj[i] != NULL && cache->num[i] == x) {
        Py_INCREF(cache->num_obj[i]);
        return cache->num_obj[i];
    }
    PyObject *v = PyLong_FromLongLong(x);
    if (v != NULL) {
        Py_INCREF(v);
        Py_XSETREF(cache->num_obj[i], v);
        cache->num[i] = x;
    }
    return v;
}

/* The length of the partitions array at r's position as tl_partitions_parse reads it (tl_partitions_walk
 * framing it, nothing made); -1 when it does not frame. Only a key for the slots: a slot is taken when its
 * bytes are the bytes here, which parse to the same answer whatever this says. */
static Py_ssize_t
tl_partitions_len(tl_rd r, int flexible)
{
    Py_ssize_t from = r.p;
    return tl_partitions_walk(&r, flexible, NULL) < 0 ? -1 : r.p - from;
}

static PyObject *
tl_partitions(tl_rd *r, int flexible, tl_cache *cache)
{
    if (cache != NULL && cache->slots != NULL) {
        Py_ssize_t len = tl_partitions_len(*r, flexible);
        if (len > 0 && len <= TL_SLOT_BYTES) {
            const uint8_t *at = r->d + r->p;
            uint64_t h = (uint64_t)len << 1 | (uint64_t)flexible, w; /* 8 bytes a step, multiply-xorshift */
            Py_ssize_t i = 0;
            for (; i + 8 <= len; i += 8) {
                memcpy(&w, at + i, 8);
                h = (h ^ w) * 0x9E3779B97F4A7C15ull;
                h ^= h >> 29;
            }
            w = 0;
            memcpy(&w, at + i, (size_t)(len - i));
            h = (h ^ w) * 0x9E3779B97F4A7C15ull;
            tl_slot *slot = &cache->slots[h >> (64 - TL_SLOT_BITS)];
            if (slot->parts != NULL && slot->len == len && slot->flexible == flexible &&
                memcmp(slot->raw, at, (size_t)len) == 0) {
                r->p += len; /* the parser reads exactly those bytes again: the same answer */
                return Py_NewRef(slot->parts);
            }
            Py_ssize_t from = r->p;
            PyObject *parts = tl_partitions_parse(r, flexible);
            if (parts != NULL && r->p - from == len) {
                if (slot->raw == NULL)
                    slot->raw = PyMem_Malloc(TL_SLOT_BYTES);
                if (slot->raw != NULL) {
                    memcpy(slot->raw, at, (size_t)len);
                    slot->len = len;
                    slot->flexible = flexible;
                    Py_XSETREF(slot->parts, Py_NewRef(parts));
                }
            }
            return parts;
        }
    }
    if (cache != NULL && cache->parts != NULL && cache->flexible == flexible && r->n - r->p >= cache->len &&
        memcmp(r->d + r->p, cache->raw, (size_t)cache->len) == 0) {
        r->p += cache->len; /* the parser reads exactly those bytes again: the same answer */
        Py_INCREF(cache->parts);
        return cache->parts;
    }
    Py_ssize_t from = r->p;
    PyObject *parts = tl_partitions_parse(r, flexible);
    if (parts != NULL && cache != NULL) {
        Py_INCREF(parts);
        Py_XSETREF(cache->parts, parts);
        cache->raw = r->d + from;
        cache->len = r->p - from;
        cache->flexible = flexible;
    }
    return parts;
}

/* A value as TransactionLog.valueToBytes writes it, read into its numbers and its partitions object
 * (tl_value_read); tl_value_fields makes the fields tuple of it (txn_log.TxnLogFields order). The compiled
 * fold (coordinator/_coordinator.c) keeps a value packed as these numbers, and makes the tuple only when asked. */
typedef struct {
    int64_t version, pid, epoch, timeout, state, last, start, prev, next, ctv, next_epoch;
    PyObject *parts; /* owned: a tuple of (topic, ids) pairs or None */
} tl_value;

/* The key k[0:kn] (TransactionLog.keyToBytes: version 0, then the id's string): 1 with its id's bytes
 * (*id, *len; UTF-8 not yet checked), 0 unusual (Python decides). */
static WIRE_UNUSED int
tl_key_bytes(const uint8_t *kd, Py_ssize_t kn, const uint8_t **id, Py_ssize_t *len)
{
    tl_rd k = {kd, kn, 0};
    if (!tl_need(&k, 4) || tl_be(&k, 2) != 0)
        return 0;
    Py_ssize_t n = (Py_ssize_t)tl_be(&k, 2);
    if (n < 0 || n != k.n - k.p)
        return 0;
    *id = kd + k.p;
    *len = n;
    return 1;
}

/* The value v[0:vn]: 1 with *out set (out->parts a new reference), 0 unusual (Python decides), -1 an
 * exception (memory). */
static WIRE_UNUSED int
tl_value_read(const uint8_t *vd, Py_ssize_t vn, tl_cache *cache, tl_value *out)
{
    PyObject *parts = NULL;
    tl_rd r = {vd, vn, 0};
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
    parts = tl_partitions(&r, version >= 1, cache);
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
    *out = (tl_value){version, pid, epoch, timeout, state, last, start, prev, next, ctv, next_epoch, parts};
    return 1;
unusual:
    Py_XDECREF(parts);
    return PyErr_Occurred() ? -1 : 0;
}

/* The fields tuple of v (txn_log.TxnLogFields: version, producer_id, producer_epoch, timeout_ms, state,
 * partitions, last_update, start, previous_producer_id, next_producer_id, client_transaction_version,
 * next_producer_epoch); a new reference, NULL with an exception. v->parts is borrowed. */
static WIRE_UNUSED PyObject *
tl_value_fields(const tl_value *v, tl_cache *cache)
{
    PyObject *fields = PyTuple_New(TL_FIELDS);
    if (fields == NULL)
        return NULL;
    const int64_t nums[TL_FIELDS] = {v->version, v->pid, v->epoch, v->timeout, v->state, 0, v->last, v->start,
                                     v->prev, v->next, v->ctv, v->next_epoch};
    for (int i = 0; i < TL_FIELDS; i++) {
        PyObject *o;
        if (i == 5) {
            o = Py_NewRef(v->parts);
        } else if (i == 7 && v->start == v->last) { /* an open transaction's start is its last update */
            o = Py_NewRef(PyTuple_GET_ITEM(fields, 6));
        } else if ((o = tl_number(cache, i, (long long)nums[i])) == NULL) {
            Py_DECREF(fields);
            return NULL;
        }
        PyTuple_SET_ITEM(fields, i, o);
    }
    return fields;
}

/* One record: key k[0:kn], value v[0:vn] (v NULL: a tombstone). 1: *tid and *fields set (new
 * references; *fields Py_None for a tombstone); 0: unusual (Python decides), nothing set; -1: an
 * exception (memory). */
static WIRE_UNUSED int
tl_decode(const uint8_t *kd, Py_ssize_t kn, const uint8_t *vd, Py_ssize_t vn, tl_cache *cache,
          PyObject **tid_out, PyObject **fields_out)
{
    const uint8_t *id;
    Py_ssize_t len;
    if (!tl_key_bytes(kd, kn, &id, &len))
        return 0;
    tl_rd k = {id, len, 0};
    PyObject *tid = tl_str(&k, len);
    if (tid == NULL)
        return PyErr_Occurred() ? -1 : 0;
    if (vd == NULL) {
        *tid_out = tid;
        *fields_out = Py_NewRef(Py_None);
        return 1;
    }
    tl_value v;
    int got = tl_value_read(vd, vn, cache, &v);
    if (got <= 0) {
        Py_DECREF(tid);
        return got;
    }
    PyObject *fields = tl_value_fields(&v, cache);
    Py_DECREF(v.parts);
    if (fields == NULL) {
        Py_DECREF(tid);
        return -1;
    }
    *tid_out = tid;
    *fields_out = fields;
    return 1;
}

#endif
