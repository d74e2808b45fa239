/* The coordinator's load of one __transaction_state segment, compiled.
 *
 * TransactionStateManager.loadTransactionMetadata reads every batch of a __transaction_state
 * partition and keeps the latest value per transactional id. kafkatx.coordinator.txn_fold.TxnFold is
 * that fold in Python (one record at a time: TxnFold.record). Here its state is a TxnTable (below): per id
 * its bytes and its latest record as numbers, the records kept as numbers too, no Python object per id
 * or record; TxnTable.record is TxnFold.record's twin, and txn_fold folds the batches of one segment buffer
 * into a table where they lie:
 *
 *   txn_fold(buf, pos, end, log_start, log_end, file, table) -> (next_pos, status)
 *
 * status 0: every batch up to end was folded; 1: the batch at next_pos starts at or past log_end
 * (the loader stops: TxnLoadWindow); 2: the batch at next_pos is one for Python (anything this loop
 * does not take as it is: a batch that does not frame as a whole magic-2 batch, a bad CRC (Python
 * reports it), a compressed batch, records with headers or bytes it does not read to the end, a key
 * or value the compiled decoder leaves to Python: tl_key_bytes / tl_value_read of format/_txn_log.h, its
 * very code, run on the record's bytes in the buffer, an id whose bytes are not UTF-8). Python decodes
 * that one batch and hands its records to TxnTable.record, then calls again after it: both paths give
 * the same answers, in the same order.
 *
 * Per record (TxnFold.record, stated once there): the first record of an id checks the id hashes to
 * this partition (TransactionStateManager.partitionFor: Utils.abs(String.hashCode) % n, hash over
 * UTF-16 code units, as txn_log.java_string_hash); a value after a value whose state is not one of
 * TransactionState.validPreviousStates of the new state is an illegal transition (state.VALID_TRANSITIONS,
 * handed in as the 'valid' frozenset of (previous, new) pairs); findings go to the list as tuples
 * (0, tid, expected, offset, position, file) / (1, tid, before_offset, before_fields, offset, fields,
 * position, file) that TxnFold turns into its Finding objects in place. History keeps every record of
 * the ids in history_for (None: all) and, for the others, the first record of each producer id; a table
 * made with keep_history false (coordinator.NO_HISTORY) keeps nothing but the latest record. */

#include "../format/_framer.h" /* kx_frame_here: the one batch framer */
#include "../format/_txn_log.h" /* tl_decode: txn_log_decode where the record lies; it includes _wire.h */

#define MAX_RECORDS 4096 /* records per batch this loop takes; more: Python */
#define N_STATES 8 /* TransactionState ids 0..7 (txn_log.TxnState) */

/* valid (a frozenset of (previous, new) state pairs) as a table over the states Kafka defines; -1 with
 * an exception when an element is not such a pair */
static int valid_table(PyObject *valid, unsigned char table[N_STATES][N_STATES])
{
    memset(table, 0, N_STATES * N_STATES);
    PyObject *it = PyObject_GetIter(valid), *pair;
    if (it == NULL)
        return -1;
    while ((pair = PyIter_Next(it)) != NULL) {
        long a = -1, b = -1;
        if (PyTuple_Check(pair) && PyTuple_GET_SIZE(pair) == 2) {
            a = PyLong_AsLong(PyTuple_GET_ITEM(pair, 0));
            b = PyLong_AsLong(PyTuple_GET_ITEM(pair, 1));
        }
        Py_DECREF(pair);
        if (PyErr_Occurred()) {
            Py_DECREF(it);
            return -1;
        }
        if (a >= 0 && a < N_STATES && b >= 0 && b < N_STATES)
            table[a][b] = 1;
    }
    Py_DECREF(it);
    return PyErr_Occurred() ? -1 : 0;
}

/* a zigzag varint of at most max_bytes (5 or 10) at *pp, before n, that fits int64; 0 or -1 */
static int zz(const uint8_t *d, Py_ssize_t n, Py_ssize_t *pp, int max_bytes, int64_t *out)
{
    i128 v;
    int why;
    if (read_zz(d, n, *pp, max_bytes, &v, pp, &why) < 0 || v < (i128)INT64_MIN || v > (i128)INT64_MAX)
        return -1;
    *out = (int64_t)v;
    return 0;
}

typedef struct {
    int64_t offset;
    const uint8_t *key, *val; /* val NULL: a tombstone */
    Py_ssize_t klen, vlen;
} rec_t;

/* The records of an uncompressed batch body d[0:n], each read whole and exactly; -1: Python's. */
static int scan_records(const uint8_t *d, Py_ssize_t n, int32_t count, int64_t base, rec_t *out)
{
    Py_ssize_t p = 0;
    for (int32_t i = 0; i < count; i++) {
        int64_t len, v, delta;
        if (zz(d, n, &p, 5, &len) < 0 || len < MIN_RECORD - 1 || len > n - p)
            return -1;
        Py_ssize_t end = p + (Py_ssize_t)len;
        p += 1; /* attributes */
        if (zz(d, end, &p, 10, &v) < 0) /* timestamp delta */
            return -1;
        if (zz(d, end, &p, 5, &delta) < 0)
            return -1;
        if ((delta > 0 && base > INT64_MAX - delta) || (delta < 0 && base < INT64_MIN - delta))
            return -1;
        out[i].offset = base + delta;
        if (zz(d, end, &p, 5, &v) < 0 || v < -1 || (v > 0 && v > end - p))
            return -1;
        out[i].key = v < 0 ? NULL : d + p;
        out[i].klen = v < 0 ? 0 : (Py_ssize_t)v;
        p += out[i].klen;
        if (zz(d, end, &p, 5, &v) < 0 || v < -1 || (v > 0 && v > end - p))
            return -1;
        out[i].val = v < 0 ? NULL : d + p;
        out[i].vlen = v < 0 ? 0 : (Py_ssize_t)v;
        p += out[i].vlen;
        if (zz(d, end, &p, 5, &v) < 0 || v != 0) /* headers: none on __transaction_state records */
            return -1;
        if (p != end)
            return -1;
    }
    return p == n ? 0 : -1;
}

/* Java's String.hashCode over UTF-16 code units (txn_log.java_string_hash) */
static int32_t java_hash(PyObject *s)
{
    uint32_t h = 0;
    Py_ssize_t len = PyUnicode_GET_LENGTH(s);
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    for (Py_ssize_t i = 0; i < len; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c >= 0x10000) {
            c -= 0x10000;
            h = 31 * h + (0xD800 + (c >> 10));
            h = 31 * h + (0xDC00 + (c & 0x3FF));
        } else {
            h = 31 * h + c;
        }
    }
    return (int32_t)h;
}

/* TransactionStateManager.partitionFor of a String.hashCode: Utils.abs(hash) % n (txn_log.coordinator_partition) */
static long partition_of_hash(int32_t h, long n)
{
    long a = h == INT32_MIN ? 0 : (h < 0 ? -(long)h : (long)h);
    return a % n;
}

static long partition_for(PyObject *tid, long n)
{
    return partition_of_hash(java_hash(tid), n);
}

/* partitionFor over an id's bytes when they are ASCII (its UTF-16 code units are its bytes) */
static long partition_for_ascii(const char *k, Py_ssize_t n, long parts)
{
    uint32_t h = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        h = 31 * h + (unsigned char)k[i];
    return partition_of_hash((int32_t)h, parts);
}

static struct PyModuleDef co_module;

/* ------------------------------------------------------------------------------------------------------
 * TxnTable: one __transaction_state partition's fold, packed. TxnFold's state (latest record per
 * id in first-seen order, the records kept per id, the findings) without a Python object per id or per
 * record: per id its UTF-8 bytes in one arena and its latest record as numbers (a tl_value and its offset);
 * the records kept (TxnFold's history rule) as the same numbers in a second array, chained per id. The
 * objects an answer reads ((offset, fields) items, ids as str) are made when asked (coordinator.TxnLatest,
 * coordinator.TxnHistory read it). TxnTable.record is TxnFold.record's twin (the rule stated there), and
 * txn_fold folds a segment's batches into it where they lie.
 * ------------------------------------------------------------------------------------------------------ */

enum { REC_TOMB = 0, REC_PACKED = 1, REC_OBJECT = 2 };

/* one record: its offset and its value's numbers in the widths TransactionLogValue writes them */
typedef struct {
    int64_t offset, pid, last, start, prev, next;
    int32_t timeout;
    int16_t version, epoch, ctv, next_epoch;
    int8_t state, kind;
    PyObject *obj; /* REC_PACKED: the partitions (a tuple or None); REC_OBJECT: a fields tuple the numbers do not
                    * hold; REC_TOMB: NULL. Owned. */
} prec;

/* a value read by tl_value_read as a record (its parts taken); its numbers fit: they were read in these widths */
static void prec_take_value(prec *r, int64_t offset, tl_value *v)
{
    *r = (prec){offset, v->pid, v->last, v->start, v->prev, v->next, (int32_t)v->timeout, (int16_t)v->version,
                (int16_t)v->epoch, (int16_t)v->ctv, (int16_t)v->next_epoch, (int8_t)v->state, REC_PACKED, v->parts};
    v->parts = NULL;
}

/* the value of a packed record (its parts borrowed) */
static tl_value prec_value(const prec *r)
{
    return (tl_value){r->version, r->pid, r->epoch, r->timeout, r->state, r->last, r->start, r->prev, r->next,
                      r->ctv, r->next_epoch, r->obj};
}

typedef struct {
    prec r;
    Py_ssize_t next; /* the id's next kept record (an index into hist); -1: none */
} hrec;

typedef struct {
    Py_hash_t hash;
    Py_ssize_t key;             /* the id's UTF-8 bytes: keys[key:key + klen] */
    int32_t klen;               /* at most 32767 from a record (an int16 length); tt_reserve checks int32 */
    int16_t keep_all;           /* history_for holds the id (or is None): every record kept */
    int16_t listed;             /* its records kept are a list even when one (TxnFold.record: its first record
                                 * was not kept, history[tid] = [], and one appended to it) */
    prec latest;
    Py_ssize_t first, last;     /* the records kept (indices into hist); -1: none */
    Py_ssize_t kept;            /* how many */
} ient;

typedef struct {
    PyObject_HEAD
    ient *ents;
    Py_ssize_t n, cap;
    uint64_t *index; /* open addressing over ents, mask + 1 slots: EMPTY, or the entry's index in the low 32 bits
                      * and its hash's high 32 bits above (a probe past another id reads no entry) */
    size_t mask;
    char *keys;
    Py_ssize_t klen, kcap;
    hrec *hist;
    Py_ssize_t nh, hcap;
    long partition, n_parts;
    int keep_history;
    PyObject *findings, *history_for, *valid; /* history_for: None (every record) or a container of ids */
    PyObject *members; /* history_for's ids as a tuple when it is a small set/frozenset/tuple/list; else NULL */
    unsigned char table[N_STATES][N_STATES];
} TxnTable;

static void prec_clear(prec *r)
{
    Py_CLEAR(r->obj);
    r->kind = REC_TOMB;
}

#define EMPTY UINT64_MAX
#define TAG(h) ((uint64_t)(h) >> 32 << 32)

static Py_hash_t key_hash(const char *k, Py_ssize_t n)
{
#if PY_VERSION_HEX >= 0x030E0000
    return Py_HashBuffer(k, n);
#else
    return _Py_HashBytes(k, n); /* SipHash with the interpreter's seed: no key set collides by design */
#endif
}

static int is_ascii(const char *k, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++)
        if ((unsigned char)k[i] >= 0x80)
            return 0;
    return 1;
}

/* the id as a str (the bytes are UTF-8: checked on the way in, or a str's own encoding) */
static PyObject *key_str(const char *k, Py_ssize_t n)
{
    if (is_ascii(k, n)) {
        PyObject *s = PyUnicode_New(n, 127);
        if (s != NULL)
            memcpy(PyUnicode_DATA(s), k, (size_t)n);
        return s;
    }
    return PyUnicode_DecodeUTF8(k, n, "surrogatepass");
}

/* a str's bytes as the table keeps ids (UTF-8; a lone surrogate, which no decoded id holds, as
 * surrogatepass writes it); *hold owns them when they are not the str's own; -1 with an exception */
static int str_key(PyObject *s, const char **k, Py_ssize_t *n, PyObject **hold)
{
    *hold = NULL;
    if (!PyUnicode_Check(s)) {
        PyErr_SetString(PyExc_TypeError, "a transactional id is a str");
        return -1;
    }
    *k = PyUnicode_AsUTF8AndSize(s, n);
    if (*k != NULL)
        return 0;
    if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError))
        return -1;
    PyErr_Clear();
    *hold = PyUnicode_AsEncodedString(s, "utf-8", "surrogatepass");
    if (*hold == NULL)
        return -1;
    *k = PyBytes_AS_STRING(*hold);
    *n = PyBytes_GET_SIZE(*hold);
    return 0;
}

static Py_ssize_t tt_find(const TxnTable *t, const char *k, Py_ssize_t n, Py_hash_t h)
{
    if (t->index == NULL)
        return -1;
    size_t i = (size_t)h & t->mask, perturb = (size_t)h;
    uint64_t tag = TAG(h);
    for (;;) {
        uint64_t slot = t->index[i];
        if (slot == EMPTY)
            return -1;
        if ((slot & ~(uint64_t)UINT32_MAX) == tag) {
            Py_ssize_t e = (Py_ssize_t)(slot & UINT32_MAX);
            const ient *en = &t->ents[e];
            if (en->hash == h && en->klen == n && memcmp(t->keys + en->key, k, (size_t)n) == 0)
                return e;
        }
        perturb >>= 5;
        i = (i * 5 + perturb + 1) & t->mask;
    }
}

static void tt_place(TxnTable *t, Py_ssize_t e)
{
    Py_hash_t h = t->ents[e].hash;
    size_t i = (size_t)h & t->mask, perturb = (size_t)h;
    while (t->index[i] != EMPTY) {
        perturb >>= 5;
        i = (i * 5 + perturb + 1) & t->mask;
    }
    t->index[i] = TAG(h) | (uint64_t)e;
}

/* room for one more id: entries, key bytes and an index at most two thirds full; -1 with an exception */
static int tt_reserve(TxnTable *t, Py_ssize_t klen)
{
    if (t->n >= (Py_ssize_t)UINT32_MAX - 1) { /* the index holds 32-bit entry numbers */
        PyErr_SetString(PyExc_MemoryError, "TxnTable: more than 2^32 - 2 transactional ids in one partition");
        return -1;
    }
    if (klen > INT32_MAX) { /* a key's length is an int16 (TransactionLog.keyToBytes): only a str handed in */
        PyErr_SetString(PyExc_ValueError, "TxnTable: a transactional id longer than 2^31 - 1 bytes");
        return -1;
    }
    if (t->n == t->cap) {
        Py_ssize_t cap = t->cap ? t->cap * 2 : 64;
        ient *ents = (size_t)cap <= PY_SSIZE_T_MAX / sizeof(ient) ? PyMem_Realloc(t->ents, (size_t)cap * sizeof(ient))
                                                                   : NULL;
        if (ents == NULL)
            return PyErr_NoMemory(), -1;
        t->ents = ents;
        t->cap = cap;
    }
    if (t->kcap - t->klen < klen) {
        Py_ssize_t cap = t->kcap ? t->kcap : 1024;
        while (cap - t->klen < klen) {
            if (cap > PY_SSIZE_T_MAX / 2)
                return PyErr_NoMemory(), -1;
            cap *= 2;
        }
        char *keys = PyMem_Realloc(t->keys, (size_t)cap);
        if (keys == NULL)
            return PyErr_NoMemory(), -1;
        t->keys = keys;
        t->kcap = cap;
    }
    if (t->index == NULL || (size_t)(t->n + 1) * 3 > (t->mask + 1) * 2) {
        size_t slots = t->index == NULL ? 128 : (t->mask + 1) * 2;
        uint64_t *index = slots <= PY_SSIZE_T_MAX / sizeof(uint64_t) ? PyMem_Malloc(slots * sizeof(uint64_t)) : NULL;
        if (index == NULL)
            return PyErr_NoMemory(), -1;
        memset(index, 0xFF, slots * sizeof(uint64_t)); /* EMPTY everywhere */
        PyMem_Free(t->index);
        t->index = index;
        t->mask = slots - 1;
        for (Py_ssize_t e = 0; e < t->n; e++)
            tt_place(t, e);
    }
    return 0;
}

/* the fields object of a record: a new reference (Py_None for a tombstone) */
static PyObject *prec_fields(const prec *r)
{
    if (r->kind == REC_TOMB)
        return Py_NewRef(Py_None);
    if (r->kind == REC_OBJECT)
        return Py_NewRef(r->obj);
    tl_value v = prec_value(r);
    return tl_value_fields(&v, NULL);
}

/* the (offset, fields) item of a record (coordinator.TxnItem) */
static PyObject *prec_item(const prec *r)
{
    PyObject *f = prec_fields(r);
    if (f == NULL)
        return NULL;
    PyObject *off = PyLong_FromLongLong(r->offset);
    if (off == NULL) {
        Py_DECREF(f);
        return NULL;
    }
    PyObject *item = PyTuple_Pack(2, off, f);
    Py_DECREF(off);
    Py_DECREF(f);
    return item;
}

/* a value handed in from Python (a fields 12-tuple or None) as a record: packed when every number fits
 * the width Kafka writes it in (TransactionLogValue: int16 version and epochs, int32 timeout, int8 state
 * within TransactionState's ids) and the partitions are a tuple or None; else kept as the object */
static int prec_of(PyObject *offset, PyObject *value, prec *r)
{
    memset(r, 0, sizeof(*r));
    r->offset = offset == NULL ? 0 : PyLong_AsLongLong(offset); /* NULL: a value alone, no offset asked */
    if (r->offset == -1 && PyErr_Occurred())
        return -1;
    if (value == Py_None) {
        r->kind = REC_TOMB;
        return 0;
    }
    if (!PyTuple_Check(value) || PyTuple_GET_SIZE(value) != TL_FIELDS) {
        PyErr_SetString(PyExc_TypeError, "a record's value is None or a 12-tuple of fields");
        return -1;
    }
    static const int64_t lo[TL_FIELDS] = {INT16_MIN, INT64_MIN, INT16_MIN, INT32_MIN, 0, 0,
                                          INT64_MIN, INT64_MIN, INT64_MIN, INT64_MIN, INT16_MIN, INT16_MIN};
    static const int64_t hi[TL_FIELDS] = {INT16_MAX, INT64_MAX, INT16_MAX, INT32_MAX, N_STATES - 1, 0,
                                          INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX, INT16_MAX, INT16_MAX};
    int64_t x[TL_FIELDS] = {0};
    int fits = 1;
    for (int i = 0; i < TL_FIELDS && fits; i++) {
        PyObject *o = PyTuple_GET_ITEM(value, i);
        if (i == 5) {
            fits = o == Py_None || PyTuple_CheckExact(o);
            continue;
        }
        if (!PyLong_CheckExact(o)) {
            fits = 0;
            break;
        }
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
        if (v == -1 && PyErr_Occurred())
            return -1;
        fits = !overflow && v >= lo[i] && v <= hi[i];
        x[i] = v;
    }
    if (!fits) {
        r->kind = REC_OBJECT;
        r->obj = Py_NewRef(value);
        return 0;
    }
    tl_value v = {x[0], x[1], x[2], x[3], x[4], x[6], x[7], x[8], x[9], x[10], x[11],
                  Py_NewRef(PyTuple_GET_ITEM(value, 5))};
    prec_take_value(r, r->offset, &v);
    return 0;
}

/* the state number of a live record as an object (the valid-pairs set's elements) */
static PyObject *prec_state(const prec *r)
{
    if (r->kind == REC_PACKED)
        return PyLong_FromLong(r->state);
    return Py_NewRef(PyTuple_GET_ITEM(r->obj, 4));
}

/* TxnFold.record's producer-id test (history_items: a kept tombstone never matches) */
static int same_producer(const prec *a, const prec *b)
{
    if (a->kind == REC_TOMB || b->kind == REC_TOMB)
        return 0;
    if (a->kind == REC_PACKED && b->kind == REC_PACKED)
        return a->pid == b->pid;
    PyObject *x = a->kind == REC_PACKED ? PyLong_FromLongLong(a->pid) : Py_NewRef(PyTuple_GET_ITEM(a->obj, 1));
    PyObject *y = b->kind == REC_PACKED ? PyLong_FromLongLong(b->pid) : Py_NewRef(PyTuple_GET_ITEM(b->obj, 1));
    int eq = x == NULL || y == NULL ? -1 : PyObject_RichCompareBool(x, y, Py_EQ);
    Py_XDECREF(x);
    Py_XDECREF(y);
    return eq;
}

/* whether history_for holds the id (its bytes k[0:n], its str tid when made: NULL otherwise) */
static int holds_id(TxnTable *t, const char *k, Py_ssize_t n, PyObject *tid)
{
    if (t->history_for == Py_None)
        return 1;
    if (t->members != NULL) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(t->members); i++) {
            const char *m;
            Py_ssize_t mn;
            PyObject *hold;
            if (str_key(PyTuple_GET_ITEM(t->members, i), &m, &mn, &hold) < 0)
                return -1;
            int eq = mn == n && memcmp(m, k, (size_t)n) == 0;
            Py_XDECREF(hold);
            if (eq)
                return 1;
        }
        return 0;
    }
    PyObject *s = tid != NULL ? Py_NewRef(tid) : key_str(k, n);
    if (s == NULL)
        return -1;
    int in = PySequence_Contains(t->history_for, s);
    Py_DECREF(s);
    return in;
}

static int add_finding(TxnTable *t, PyObject *ev)
{
    int r = ev == NULL ? -1 : PyList_Append(t->findings, ev);
    Py_XDECREF(ev);
    return r;
}

/* TxnFold.record's twin: one record (rec: owned, taken in every case) of the id k[0:n] (tid: its str when
 * the caller has it, else NULL), at position of file. 0, or -1 with an exception. */
static int tt_record(TxnTable *t, const char *k, Py_ssize_t n, PyObject *tid, prec *rec, PyObject *file,
                     Py_ssize_t position)
{
    PyObject *made = NULL;
    int rc = -1;
    Py_hash_t h = key_hash(k, n);
    if (h == -1 && PyErr_Occurred())
        goto done;
    Py_ssize_t e = tt_find(t, k, n, h);
    int fresh = e < 0;
    if (fresh) { /* first sight: the id's partition (TransactionStateManager.partitionFor) */
        long expected;
        if (tid == NULL && is_ascii(k, n)) {
            expected = partition_for_ascii(k, n, t->n_parts);
        } else {
            if (tid == NULL) {
                if ((made = key_str(k, n)) == NULL)
                    goto done;
                tid = made;
            }
            expected = partition_for(tid, t->n_parts);
        }
        if (expected != t->partition) {
            if (tid == NULL) {
                if ((made = key_str(k, n)) == NULL)
                    goto done;
                tid = made;
            }
            if (add_finding(t, Py_BuildValue("(iOlLnO)", 0, tid, expected, (long long)rec->offset, position,
                                             file)) < 0)
                goto done;
        }
        int keep_all = 1;
        if (t->keep_history && (keep_all = holds_id(t, k, n, tid)) < 0)
            goto done;
        if (tt_reserve(t, n) < 0)
            goto done;
        e = t->n++;
        ient *en = &t->ents[e];
        memset(en, 0, sizeof(*en));
        en->hash = h;
        en->key = t->klen;
        en->klen = n;
        en->first = en->last = -1;
        en->keep_all = keep_all;
        memcpy(t->keys + t->klen, k, (size_t)n);
        t->klen += n;
        tt_place(t, e);
    } else if (rec->kind != REC_TOMB && t->ents[e].latest.kind != REC_TOMB) {
        /* a value after a value: the move (TransactionState.validPreviousStates) */
        const prec *before = &t->ents[e].latest;
        int ok;
        if (before->kind == REC_PACKED && rec->kind == REC_PACKED) {
            ok = t->table[before->state][rec->state];
        } else {
            PyObject *a = prec_state(before), *b = prec_state(rec);
            PyObject *pair = a == NULL || b == NULL ? NULL : PyTuple_Pack(2, a, b);
            Py_XDECREF(a);
            Py_XDECREF(b);
            ok = pair == NULL ? -1 : PySet_Contains(t->valid, pair);
            Py_XDECREF(pair);
            if (ok < 0)
                goto done;
        }
        if (!ok) {
            if (tid == NULL) {
                if ((made = key_str(k, n)) == NULL)
                    goto done;
                tid = made;
            }
            PyObject *bf = prec_fields(before), *nf = prec_fields(rec);
            PyObject *ev = bf == NULL || nf == NULL ? NULL
                : Py_BuildValue("(iOLOLOnO)", 1, tid, (long long)before->offset, bf, (long long)rec->offset, nf,
                                position, file);
            Py_XDECREF(bf);
            Py_XDECREF(nf);
            if (add_finding(t, ev) < 0)
                goto done;
        }
    }
    if (t->keep_history) { /* the records kept: every one, or the first of each producer id */
        ient *en = &t->ents[e];
        int add = en->keep_all;
        if (!add && rec->kind != REC_TOMB) {
            add = 1;
            for (Py_ssize_t i = en->first; i >= 0 && add; i = t->hist[i].next) {
                int same = same_producer(&t->hist[i].r, rec);
                if (same < 0)
                    goto done;
                add = !same;
            }
        }
        if (add) {
            if (t->nh == t->hcap) {
                Py_ssize_t cap = t->hcap ? t->hcap * 2 : 64;
                hrec *hist = (size_t)cap <= PY_SSIZE_T_MAX / sizeof(hrec)
                                 ? PyMem_Realloc(t->hist, (size_t)cap * sizeof(hrec)) : NULL;
                if (hist == NULL) {
                    PyErr_NoMemory();
                    goto done;
                }
                t->hist = hist;
                t->hcap = cap;
            }
            hrec *hr = &t->hist[t->nh];
            hr->r = *rec;
            hr->next = -1;
            Py_XINCREF(rec->obj);
            if (en->last >= 0)
                t->hist[en->last].next = t->nh;
            else
                en->first = t->nh;
            en->last = t->nh++;
            en->kept++;
        } else if (fresh) {
            en->listed = 1; /* seen, nothing kept: [] */
        }
    }
    prec_clear(&t->ents[e].latest);
    t->ents[e].latest = *rec; /* taken */
    rec->kind = REC_TOMB;
    rec->obj = NULL;
    rc = 0;
done:
    prec_clear(rec);
    Py_XDECREF(made);
    return rc;
}

static void tt_release(TxnTable *t)
{
    for (Py_ssize_t e = 0; e < t->n; e++)
        prec_clear(&t->ents[e].latest);
    for (Py_ssize_t i = 0; i < t->nh; i++)
        prec_clear(&t->hist[i].r);
    PyMem_Free(t->ents);
    PyMem_Free(t->index);
    PyMem_Free(t->keys);
    PyMem_Free(t->hist);
    t->ents = NULL;
    t->index = NULL;
    t->keys = NULL;
    t->hist = NULL;
    t->n = t->cap = t->klen = t->kcap = t->nh = t->hcap = 0;
    t->mask = 0;
}

static void tt_dealloc(TxnTable *t)
{
    PyTypeObject *tp = Py_TYPE(t);
    tt_release(t);
    Py_XDECREF(t->findings);
    Py_XDECREF(t->history_for);
    Py_XDECREF(t->valid);
    Py_XDECREF(t->members);
    tp->tp_free((PyObject *)t);
    Py_DECREF(tp);
}

#define SMALL_MEMBERS 16

/* TxnTable(partition, n, findings, keep_history, history_for, valid) */
static PyObject *tt_new(PyTypeObject *tp, PyObject *args, PyObject *kw)
{
    long partition, n;
    int keep_history;
    PyObject *findings, *history_for, *valid;
    if (kw != NULL && PyDict_GET_SIZE(kw) > 0) {
        PyErr_SetString(PyExc_TypeError, "TxnTable() takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "llO!pOO!:TxnTable", &partition, &n, &PyList_Type, &findings, &keep_history,
                          &history_for, &PyFrozenSet_Type, &valid))
        return NULL;
    if (n <= 0) {
        PyErr_SetString(PyExc_ValueError, "TxnTable(): n > 0");
        return NULL;
    }
    TxnTable *t = (TxnTable *)tp->tp_alloc(tp, 0);
    if (t == NULL)
        return NULL;
    t->partition = partition;
    t->n_parts = n;
    t->keep_history = keep_history;
    t->findings = Py_NewRef(findings);
    t->history_for = Py_NewRef(history_for);
    t->valid = Py_NewRef(valid);
    if (valid_table(valid, t->table) < 0) {
        Py_DECREF(t);
        return NULL;
    }
    if (history_for != Py_None && (PyAnySet_CheckExact(history_for) || PyTuple_CheckExact(history_for) ||
                                   PyList_CheckExact(history_for))) {
        Py_ssize_t size = PyObject_Length(history_for);
        if (size < 0) {
            Py_DECREF(t);
            return NULL;
        }
        if (size <= SMALL_MEMBERS) { /* its ids (an element not a str is no id: it never holds one) */
            PyObject *all = PySequence_Tuple(history_for), *strs = all == NULL ? NULL : PyList_New(0);
            for (Py_ssize_t i = 0; strs != NULL && i < PyTuple_GET_SIZE(all); i++) {
                PyObject *o = PyTuple_GET_ITEM(all, i);
                if (PyUnicode_CheckExact(o) && PyList_Append(strs, o) < 0)
                    Py_CLEAR(strs);
            }
            Py_XDECREF(all);
            if (strs == NULL) {
                Py_DECREF(t);
                return NULL;
            }
            t->members = PyList_AsTuple(strs);
            Py_DECREF(strs);
            if (t->members == NULL) {
                Py_DECREF(t);
                return NULL;
            }
        }
    }
    return (PyObject *)t;
}

/* TxnTable.record(offset, tid, value, file, position): TxnFold.record's twin, for a record Python decoded */
static PyObject *tt_record_py(TxnTable *t, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "record() takes 5 arguments (offset, tid, value, file, position)");
        return NULL;
    }
    Py_ssize_t position = PyLong_AsSsize_t(args[4]);
    if (position == -1 && PyErr_Occurred())
        return NULL;
    const char *k;
    Py_ssize_t n;
    PyObject *hold;
    if (str_key(args[1], &k, &n, &hold) < 0)
        return NULL;
    prec rec;
    int r = prec_of(args[0], args[2], &rec);
    if (r == 0)
        r = tt_record(t, k, n, args[1], &rec, args[3], position);
    else
        prec_clear(&rec);
    Py_XDECREF(hold);
    if (r < 0)
        return NULL;
    Py_RETURN_NONE;
}

static Py_ssize_t tt_find_str(TxnTable *t, PyObject *tid)
{
    if (!PyUnicode_Check(tid))
        return -1;
    const char *k;
    Py_ssize_t n;
    PyObject *hold;
    if (str_key(tid, &k, &n, &hold) < 0)
        return -2;
    Py_hash_t h = key_hash(k, n);
    Py_ssize_t e = tt_find(t, k, n, h);
    Py_XDECREF(hold);
    return e;
}

static Py_ssize_t tt_len(TxnTable *t)
{
    return t->n;
}

static int tt_contains(TxnTable *t, PyObject *tid)
{
    Py_ssize_t e = tt_find_str(t, tid);
    return e == -2 ? -1 : e >= 0;
}

static PyObject *tt_getitem(TxnTable *t, PyObject *tid)
{
    Py_ssize_t e = tt_find_str(t, tid);
    if (e == -2)
        return NULL;
    if (e < 0) {
        PyErr_SetObject(PyExc_KeyError, tid);
        return NULL;
    }
    return prec_item(&t->ents[e].latest);
}

/* get(tid, default=None) */
static PyObject *tt_get(TxnTable *t, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1 || nargs > 2) {
        PyErr_SetString(PyExc_TypeError, "get() takes 1 or 2 arguments");
        return NULL;
    }
    Py_ssize_t e = tt_find_str(t, args[0]);
    if (e == -2)
        return NULL;
    if (e < 0)
        return Py_NewRef(nargs == 2 ? args[1] : Py_None);
    return prec_item(&t->ents[e].latest);
}

/* history_get(tid): the records kept for the id as TxnFold.history holds them (coordinator.TxnKept: one as
 * the item itself, more as a list, none as an empty list); None when the id is not in the table or the
 * table keeps no history */
static PyObject *tt_history_get(TxnTable *t, PyObject *tid)
{
    Py_ssize_t e = tt_find_str(t, tid);
    if (e == -2)
        return NULL;
    if (e < 0 || !t->keep_history)
        Py_RETURN_NONE;
    const ient *en = &t->ents[e];
    if (en->kept == 1 && !en->listed)
        return prec_item(&t->hist[en->first].r);
    PyObject *list = PyList_New(en->kept);
    if (list == NULL)
        return NULL;
    Py_ssize_t j = 0;
    for (Py_ssize_t i = en->first; i >= 0; i = t->hist[i].next) {
        PyObject *item = prec_item(&t->hist[i].r);
        if (item == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, j++, item);
    }
    return list;
}

/* tombstones(): {id: offset} of the ids whose latest record is a tombstone (TxnIds.tombstones) */
static PyObject *tt_tombstones(TxnTable *t, PyObject *unused)
{
    PyObject *out = PyDict_New();
    for (Py_ssize_t e = 0; out != NULL && e < t->n; e++) {
        const ient *en = &t->ents[e];
        if (en->latest.kind != REC_TOMB)
            continue;
        PyObject *k = key_str(t->keys + en->key, en->klen), *v = PyLong_FromLongLong(en->latest.offset);
        if (k == NULL || v == NULL || PyDict_SetItem(out, k, v) < 0)
            Py_CLEAR(out);
        Py_XDECREF(k);
        Py_XDECREF(v);
    }
    return out;
}

/* trim(): the arrays down to what they hold (the fold is done: the room to grow is memory nobody uses) */
static PyObject *tt_trim(TxnTable *t, PyObject *unused)
{
    if (t->n > 0 && t->n < t->cap) {
        ient *ents = PyMem_Realloc(t->ents, (size_t)t->n * sizeof(ient));
        if (ents != NULL) {
            t->ents = ents;
            t->cap = t->n;
        }
    }
    if (t->nh > 0 && t->nh < t->hcap) {
        hrec *hist = PyMem_Realloc(t->hist, (size_t)t->nh * sizeof(hrec));
        if (hist != NULL) {
            t->hist = hist;
            t->hcap = t->nh;
        }
    }
    if (t->klen > 0 && t->klen < t->kcap) {
        char *keys = PyMem_Realloc(t->keys, (size_t)t->klen);
        if (keys != NULL) {
            t->keys = keys;
            t->kcap = t->klen;
        }
    }
    Py_RETURN_NONE;
}

static PyObject *tt_clear(TxnTable *t, PyObject *unused)
{
    tt_release(t);
    Py_RETURN_NONE;
}

/* The ids in first-seen order (iter(table)) or (id, item) pairs (table.items()): an iterator over the
 * table, which holds it; an id added while it runs is met too (the table only grows, or is cleared). */
typedef struct {
    PyObject_HEAD
    TxnTable *t;
    Py_ssize_t i;
    int items;
} TxnTableIter;

static void tti_dealloc(TxnTableIter *it)
{
    PyTypeObject *tp = Py_TYPE(it);
    Py_XDECREF(it->t);
    tp->tp_free((PyObject *)it);
    Py_DECREF(tp);
}

static PyObject *tti_next(TxnTableIter *it)
{
    TxnTable *t = it->t;
    if (t == NULL || it->i >= t->n)
        return NULL;
    const ient *en = &t->ents[it->i++];
    PyObject *k = key_str(t->keys + en->key, en->klen);
    if (k == NULL || !it->items)
        return k;
    PyObject *item = prec_item(&en->latest);
    if (item == NULL) {
        Py_DECREF(k);
        return NULL;
    }
    PyObject *pair = PyTuple_Pack(2, k, item);
    Py_DECREF(k);
    Py_DECREF(item);
    return pair;
}

static PyType_Slot tti_slots[] = {
    {Py_tp_dealloc, tti_dealloc},
    {Py_tp_iter, PyObject_SelfIter},
    {Py_tp_iternext, tti_next},
    {0, NULL},
};

static PyType_Spec tti_spec = {
    .name = "kafkatx.coordinator._coordinator.TxnTableIterator",
    .basicsize = sizeof(TxnTableIter),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = tti_slots,
};

typedef struct {
    PyTypeObject *table_type, *iter_type, *rows_type;
    /* the partitions arrays parsed (tl_partitions' slots), shared by every fold: an id's partition list is
     * one tuple whichever __transaction_state partition holds it (immutable: sharing changes no answer) */
    tl_slot *slots;
} co_state;

static PyObject *tt_iterate(TxnTable *t, int items)
{
    PyObject *mod = PyType_GetModuleByDef(Py_TYPE(t), &co_module);
    if (mod == NULL)
        return NULL;
    co_state *st = PyModule_GetState(mod);
    TxnTableIter *it = PyObject_New(TxnTableIter, st->iter_type);
    if (it == NULL)
        return NULL;
    it->t = (TxnTable *)Py_NewRef(t);
    it->i = 0;
    it->items = items;
    return (PyObject *)it;
}

static PyObject *tt_iter(TxnTable *t)
{
    return tt_iterate(t, 0);
}

static PyObject *tt_items(TxnTable *t, PyObject *unused)
{
    return tt_iterate(t, 1);
}

static PyObject *tt_id_rows(TxnTable *t, PyObject *const *args, Py_ssize_t nargs); /* below: kafkatx scan's ID rows */

static PyMethodDef tt_methods[] = {
    {"record", (PyCFunction)(void (*)(void))tt_record_py, METH_FASTCALL,
     "record(offset, tid, value, file, position) -> None (TxnFold.record's twin)"},
    {"get", (PyCFunction)(void (*)(void))tt_get, METH_FASTCALL, "get(tid, default=None) -> (offset, fields)"},
    {"items", (PyCFunction)tt_items, METH_NOARGS, "items() -> iterator of (tid, (offset, fields)), first-seen order"},
    {"history_get", (PyCFunction)tt_history_get, METH_O, "history_get(tid) -> TxnKept | None"},
    {"tombstones", (PyCFunction)tt_tombstones, METH_NOARGS, "tombstones() -> {tid: offset}"},
    {"id_rows", (PyCFunction)(void (*)(void))tt_id_rows, METH_FASTCALL,
     "id_rows(kind, number, now, misplaced, states, two_pc_timeout, is_timed_out, dumps, protocol, named, tids, out) -> None"},
    {"clear", (PyCFunction)tt_clear, METH_NOARGS, "clear() -> None: every id let go"},
    {"trim", (PyCFunction)tt_trim, METH_NOARGS, "trim() -> None: the room to grow given back"},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot tt_slots[] = {
    {Py_tp_new, tt_new},
    {Py_tp_dealloc, tt_dealloc},
    {Py_tp_iter, tt_iter},
    {Py_mp_length, tt_len},
    {Py_mp_subscript, tt_getitem},
    {Py_sq_contains, tt_contains},
    {Py_tp_methods, tt_methods},
    {Py_tp_doc, "TxnTable(partition, n, findings, keep_history, history_for, valid): one __transaction_state "
                "partition's fold, packed (see _coordinator.c)"},
    {0, NULL},
};

static PyType_Spec tt_spec = {
    .name = "kafkatx.coordinator._coordinator.TxnTable",
    .basicsize = sizeof(TxnTable),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = tt_slots,
};

/* txn_fold(buf, pos, end, log_start, log_end, file, table) -> (next_pos, status): the batches of one
 * segment buffer folded into a TxnTable (see the module comment) */
typedef struct {
    const char *k;
    Py_ssize_t kn;
    PyObject *tid; /* the id's str when it had to be made to check its bytes (beyond ASCII); else NULL */
    prec rec;
    int keyed;
} dec_t;

static PyObject *
co_txn_fold(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    co_state *st = PyModule_GetState(self);
    PyObject *buf, *file, *table;
    Py_ssize_t pos, end;
    int64_t log_start, log_end;
    if (wire_args("txn_fold", args, nargs, "OnnLLOO", &buf, &pos, &end, &log_start, &log_end, &file, &table) < 0)
        return NULL;
    if (!PyObject_TypeCheck(table, st->table_type)) {
        PyErr_SetString(PyExc_TypeError, "txn_fold(): table a TxnTable");
        return NULL;
    }
    TxnTable *t = (TxnTable *)table;
    Py_buffer view;
    if (PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const uint8_t *d = (const uint8_t *)view.buf;
    if (pos < 0 || end > view.len || pos > end) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "txn_fold(): range outside the buffer");
        return NULL;
    }
    rec_t *recs = PyMem_Malloc(sizeof(rec_t) * MAX_RECORDS);
    dec_t *dec = PyMem_Calloc(MAX_RECORDS, sizeof(dec_t));
    if (recs == NULL || dec == NULL) {
        PyMem_Free(recs);
        PyMem_Free(dec);
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    int status = 0;
    int failed = 0;
    tl_cache cache = {0}; /* the last partitions parsed (its bytes lie in this view), and the module's slots */
    if (st->slots == NULL && (st->slots = PyMem_Calloc(TL_SLOTS, sizeof(tl_slot))) == NULL) {
        PyMem_Free(recs);
        PyMem_Free(dec);
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    cache.slots = st->slots;
    kx_walk w = {d, pos, end};
    kx_header hb;
    while (w.pos < end) {
        if (kx_frame_here(&w, &hb) == KX_NONE) { /* read_batch_header's rules: Python frames it */
            status = 2;
            break;
        }
        const int32_t count = kx_records_count(&hb);
        pos = hb.position;
        if (hb.base_offset >= log_end) {
            status = 1;
            break;
        }
        if (hb.last_offset < log_start || kx_control(&hb) || count == 0) {
            kx_take(&w, &hb); /* not read by the loader, a control batch, or emptied by the cleaner */
            continue;
        }
        if (kx_codec(&hb) != 0 || count < 0 || count > MAX_RECORDS || (int64_t)count * MIN_RECORD > hb.size - HEADER_SIZE) {
            status = 2;
            break;
        }
        /* the coordinator's loader does not check CRCs; Python reports a bad one (and folds the batch) */
        if (!kx_crc_holds(&hb)) {
            status = 2;
            break;
        }
        if (scan_records(hb.bytes + HEADER_SIZE, hb.size - HEADER_SIZE, count, hb.base_offset, recs) < 0) {
            status = 2;
            break;
        }
        /* decode every keyed record first: one the compiled decoder leaves makes it Python's batch */
        int python = 0;
        for (int32_t k = 0; k < count && !python && !failed; k++) {
            rec_t *r = &recs[k];
            dec_t *x = &dec[k];
            if (r->key == NULL)
                continue; /* no key: not a transaction log record (the loader skips it too) */
            const uint8_t *id;
            if (!tl_key_bytes(r->key, r->klen, &id, &x->kn)) {
                python = 1;
                continue;
            }
            x->k = (const char *)id;
            if (!is_ascii(x->k, x->kn)) { /* strict UTF-8, as tl_str reads it; bad bytes: Python's */
                x->tid = PyUnicode_DecodeUTF8(x->k, x->kn, "strict");
                if (x->tid == NULL) {
                    if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
                        PyErr_Clear();
                        python = 1;
                    } else {
                        failed = 1;
                    }
                    continue;
                }
            }
            x->keyed = 1;
            x->rec.offset = r->offset;
            if (r->val == NULL) {
                x->rec.kind = REC_TOMB;
                continue;
            }
            tl_value v;
            int got = tl_value_read(r->val, r->vlen, &cache, &v);
            if (got < 0)
                failed = 1;
            else if (got == 0)
                python = 1; /* the compiled decoder leaves this record to Python */
            else
                prec_take_value(&x->rec, r->offset, &v);
        }
        for (int32_t k = 0; k < count && !python && !failed; k++) {
            dec_t *x = &dec[k];
            if (x->keyed && tt_record(t, x->k, x->kn, x->tid, &x->rec, file, pos) < 0)
                failed = 1;
        }
        for (int32_t k = 0; k < count; k++) {
            prec_clear(&dec[k].rec);
            Py_CLEAR(dec[k].tid);
            dec[k].keyed = 0;
        }
        if (failed)
            break;
        if (python) {
            status = 2;
            break;
        }
        kx_take(&w, &hb);
    }
    pos = w.pos;
    tl_cache_clear(&cache);
    PyMem_Free(recs);
    PyMem_Free(dec);
    PyBuffer_Release(&view);
    if (failed)
        return NULL;
    return Py_BuildValue("(ni)", pos, status);
}

static PyObject *
co_java_hash(PyObject *self, PyObject *s)
{
    if (!PyUnicode_Check(s)) {
        PyErr_SetString(PyExc_TypeError, "java_string_hash() takes a str");
        return NULL;
    }
    return PyLong_FromLong(java_hash(s));
}


/* fold_values(latest, skip, partition, coordinator_id, wanted, state_names, row_of, out) -> None
 *
 * The twin of coordinator.fold_values: list-txn's rows of one partition's fold appended to out, in the
 * fold's order. latest: TxnIds.latest (id -> (offset, fields)); a tombstone (fields None), an id in skip
 * and, with wanted (a container of state numbers, None: all), a state not in it are left out. The row is
 * coordinator.transaction_values (stated there): (id, producer id, epoch, state name, timeout, start or
 * None when negative, last update or None when negative, partition names, partition, coordinator_id),
 * built here (values_made, for a dict's records as for a table's) for the record shapes the fold makes
 * (numbers in the widths Kafka writes them, a state number within state_names, no partition or one topic
 * with one partition: "topic-N"); any other record's row is row_of(id, fields, partition, coordinator_id)
 * itself (transaction_values: several partitions are sorted and made distinct there). */

/* "topic-N" of fields' partitions when there is no partition (an empty list) or exactly one; NULL without
 * an exception when the row is row_of's (more, or a shape other than the fold's) */
static PyObject *
simple_partition_names(PyObject *parts)
{
    if (parts == Py_None || (PyTuple_Check(parts) && PyTuple_GET_SIZE(parts) == 0))
        return PyList_New(0);
    if (!PyTuple_Check(parts) || PyTuple_GET_SIZE(parts) != 1)
        return NULL;
    PyObject *entry = PyTuple_GET_ITEM(parts, 0);
    if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 2)
        return NULL;
    PyObject *topic = PyTuple_GET_ITEM(entry, 0), *ids = PyTuple_GET_ITEM(entry, 1);
    if (!PyUnicode_CheckExact(topic) || !PyTuple_Check(ids) || PyTuple_GET_SIZE(ids) != 1 ||
        !PyLong_CheckExact(PyTuple_GET_ITEM(ids, 0)))
        return NULL;
    PyObject *name = PyUnicode_FromFormat("%U-%S", topic, PyTuple_GET_ITEM(ids, 0)); /* state.tp_name */
    if (name == NULL)
        return NULL;
    PyObject *list = PyList_New(1);
    if (list == NULL) {
        Py_DECREF(name);
        return NULL;
    }
    PyList_SET_ITEM(list, 0, name);
    return list;
}

/* Each live record of one fold's latest records (TxnIds.latest: id -> (offset, fields)), in the fold's order:
 * a tombstone (fields None) and an id in skip passed over, as fold_values and timed_out_of both read them.
 * row(ctx, tid, item, &made) says what one record gives: 1 a row (appended to out), 0 none, -1 an exception.
 * tid and item are held while it runs (the containers and the callers' callbacks run Python). */
typedef int (*live_row)(void *ctx, PyObject *tid, PyObject *item, PyObject **made);

static PyObject *
each_live(PyObject *latest, PyObject *skip, const char *who, live_row row, void *ctx, PyObject *out)
{
    if (!PyDict_Check(latest) || !PyList_Check(out)) {
        PyErr_Format(PyExc_TypeError, "%s(): latest a dict, out a list", who);
        return NULL;
    }
    Py_ssize_t skips = PyObject_Length(skip);
    if (skips < 0)
        return NULL;
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(latest, &pos, &k, &v)) {
        if (!PyTuple_Check(v) || PyTuple_GET_SIZE(v) != 2) {
            PyErr_Format(PyExc_TypeError, "%s(): latest maps an id to an (offset, fields) pair", who);
            return NULL;
        }
        if (PyTuple_GET_ITEM(v, 1) == Py_None)
            continue;
        Py_INCREF(k);
        Py_INCREF(v);
        PyObject *made = NULL;
        int r = skips > 0 ? PySequence_Contains(skip, k) : 0;
        r = r < 0 ? -1 : r == 1 ? 0 : row(ctx, k, v, &made);
        if (r == 1 && PyList_Append(out, made) < 0)
            r = -1;
        Py_XDECREF(made);
        Py_DECREF(k);
        Py_DECREF(v);
        if (r < 0)
            return NULL;
    }
    Py_RETURN_NONE;
}

typedef struct {
    PyObject *partition, *coordinator_id, *wanted, *state_names, *row_of;
} values_ctx;

/* Whether entry e of t is a live id (not a tombstone) that skip does not hold (skips: skip's length, asked
 * once per table), as every reader of a packed fold passes over ids (a tombstone, an id taken from another
 * partition): 1 with *tid its str when tid is not NULL (a new reference), 0 passed over (also when skip's
 * container ran Python that cleared the table: e is past its end then), -1 with an exception. The str is
 * made only when skip or the caller needs it. */
static int live_id(TxnTable *t, Py_ssize_t e, PyObject *skip, Py_ssize_t skips, PyObject **tid)
{
    if (tid != NULL)
        *tid = NULL;
    if (t->ents[e].latest.kind == REC_TOMB)
        return 0;
    if (skips <= 0 && tid == NULL)
        return 1;
    PyObject *s = key_str(t->keys + t->ents[e].key, t->ents[e].klen);
    if (s == NULL)
        return -1;
    int in = skips > 0 ? PySequence_Contains(skip, s) : 0;
    if (in != 0 || e >= t->n) {
        Py_DECREF(s);
        return in < 0 ? -1 : 0;
    }
    if (tid != NULL)
        *tid = s;
    else
        Py_DECREF(s);
    return 1;
}

/* A set of state numbers (wanted / states, containers of TransactionState ids) as a mask over the states
 * Kafka defines: what a packed record's state (always one of them) is tested against */
static int state_mask(PyObject *states, unsigned *mask)
{
    *mask = 0;
    for (int s = 0; s < N_STATES; s++) {
        PyObject *o = PyLong_FromLong(s);
        int in = o == NULL ? -1 : PySequence_Contains(states, o);
        Py_XDECREF(o);
        if (in < 0)
            return -1;
        if (in)
            *mask |= 1u << s;
    }
    return 0;
}

/* each_live over a TxnTable: the live records in first-seen order, a record row() takes as an item (a
 * record kept as an object, or any record when packed is NULL) made and handed to row; a packed one to
 * packed(ctx, t, tid, record, &made). */
typedef int (*packed_row)(void *ctx, PyObject *tid, const prec *r, PyObject **made);

/* The row of entry e of t (tid its id) appended to out when it gives one: a packed record to packed(ctx, tid,
 * record, &made), another to row(ctx, tid, item, &made). Both run Python (containers, callbacks): they get a
 * copy of the record, which stays valid whatever happens to the table meanwhile. 1 appended, 0 no row, -1
 * with an exception. */
static int append_row(TxnTable *t, Py_ssize_t e, PyObject *tid, live_row row, packed_row packed, void *ctx,
                      PyObject *out)
{
    PyObject *made = NULL;
    int r;
    prec copy = t->ents[e].latest;
    Py_XINCREF(copy.obj);
    if (copy.kind == REC_PACKED) {
        r = packed(ctx, tid, &copy, &made);
    } else {
        PyObject *item = prec_item(&copy);
        r = item == NULL ? -1 : row(ctx, tid, item, &made);
        Py_XDECREF(item);
    }
    prec_clear(&copy);
    if (r == 1 && PyList_Append(out, made) < 0)
        r = -1;
    Py_XDECREF(made);
    return r;
}

static PyObject *
each_live_packed(TxnTable *t, PyObject *skip, live_row row, packed_row packed, void *ctx, PyObject *out)
{
    if (!PyList_Check(out)) {
        PyErr_SetString(PyExc_TypeError, "out a list");
        return NULL;
    }
    Py_ssize_t skips = PyObject_Length(skip);
    if (skips < 0)
        return NULL;
    for (Py_ssize_t e = 0; e < t->n; e++) {
        PyObject *tid;
        int r = live_id(t, e, skip, skips, &tid);
        if (r < 0)
            return NULL;
        if (r == 0)
            continue;
        r = append_row(t, e, tid, row, packed, ctx, out);
        Py_DECREF(tid);
        if (r < 0)
            return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *num_or_none(int64_t x)
{
    return x < 0 ? Py_NewRef(Py_None) : PyLong_FromLongLong(x);
}

/* What the rows of packed records share: each partitions object's names ("topic-N", the str made once per
 * object: the table's slots hand out one object per list), as a 1-tuple too when rows are made with make
 * (SortedRows.take: one tuple shared by every row of that partition), and the last timeout's int. Owned. */
#define NAME_SLOT_BITS 10
#define NAME_SLOTS (1 << NAME_SLOT_BITS)
typedef struct {
    PyObject *parts[NAME_SLOTS], *name[NAME_SLOTS], *one[NAME_SLOTS];
    long long timeout;
    PyObject *timeout_obj;
} row_cache;

static void row_cache_clear(row_cache *rc)
{
    for (int i = 0; i < NAME_SLOTS; i++) {
        Py_CLEAR(rc->parts[i]);
        Py_CLEAR(rc->name[i]);
        Py_CLEAR(rc->one[i]);
    }
    Py_CLEAR(rc->timeout_obj);
}

/* simple_partition_names of parts, its one name taken from the cache when parts was met before; as_tuple:
 * a tuple of the same names instead of a list (the 1-tuple itself cached: one object for every row) */
static PyObject *cached_partition_names(row_cache *rc, PyObject *parts, int as_tuple)
{
    if (as_tuple && (parts == Py_None || (PyTuple_Check(parts) && PyTuple_GET_SIZE(parts) == 0)))
        return PyTuple_New(0); /* no partition (the one empty tuple) */
    size_t slot = (size_t)(((uintptr_t)parts >> 4) * 0x9E3779B97F4A7C15ull >> (64 - NAME_SLOT_BITS));
    if (rc->parts[slot] != parts) {
        PyObject *list = simple_partition_names(parts); /* no name or one */
        if (list == NULL)
            return NULL;
        if (PyList_GET_SIZE(list) != 1) { /* no partition: nothing to cache */
            if (!as_tuple)
                return list;
            Py_DECREF(list);
            return PyTuple_New(0);
        }
        Py_XSETREF(rc->parts[slot], Py_NewRef(parts));
        Py_XSETREF(rc->name[slot], Py_NewRef(PyList_GET_ITEM(list, 0)));
        Py_CLEAR(rc->one[slot]);
        if (!as_tuple)
            return list;
        Py_DECREF(list);
    }
    if (as_tuple) {
        if (rc->one[slot] == NULL && (rc->one[slot] = PyTuple_Pack(1, rc->name[slot])) == NULL)
            return NULL;
        return Py_NewRef(rc->one[slot]);
    }
    PyObject *list = PyList_New(1);
    if (list != NULL)
        PyList_SET_ITEM(list, 0, Py_NewRef(rc->name[slot]));
    return list;
}

/* fold_values' row of a packed record (coordinator.transaction_values), in wanted (mask) */
typedef struct {
    values_ctx c;
    unsigned wanted; /* the states wanted (all when c.wanted is None) */
    row_cache cache;
    PyObject *make;  /* NULL: each row the tuple of its values; else make(*row[:k]) (SortedRows.take) */
    Py_ssize_t k;
} packed_values_ctx;

/* make(*row[:k]) of a row made as a tuple (row_of's), the row let go: a new reference, or NULL */
static PyObject *made_with(packed_values_ctx *pc, PyObject *row)
{
    PyObject *fast = PySequence_Fast(row, "a row is a sequence");
    Py_DECREF(row);
    if (fast == NULL)
        return NULL;
    PyObject *made = NULL;
    if (PySequence_Fast_GET_SIZE(fast) < pc->k)
        PyErr_SetString(PyExc_ValueError, "take(): a row has fewer than k values");
    else
        made = PyObject_Vectorcall(pc->make, PySequence_Fast_ITEMS(fast), (size_t)pc->k, NULL);
    Py_DECREF(fast);
    return made;
}

/* coordinator.transaction_values of a packed record (the states wanted asked already): made here, the one
 * "topic-N" name taken from the cache, or row_of's for a record of another shape (several partitions, a
 * state beyond state_names); 1, or -1 with an exception */
static int values_made(packed_values_ctx *pc, PyObject *tid, const prec *v, PyObject **made)
{
    values_ctx *c = &pc->c;
    PyObject *names = v->state < PyTuple_GET_SIZE(c->state_names)
                          ? cached_partition_names(&pc->cache, v->obj, pc->make != NULL) : NULL;
    if (names == NULL) {
        if (PyErr_Occurred())
            return -1;
        PyObject *f = prec_fields(v);
        *made = f == NULL ? NULL : PyObject_CallFunctionObjArgs(c->row_of, tid, f, c->partition, c->coordinator_id, NULL);
        Py_XDECREF(f);
        if (*made != NULL && pc->make != NULL)
            *made = made_with(pc, *made);
        return *made == NULL ? -1 : 1;
    }
    row_cache *rc = &pc->cache;
    if (rc->timeout_obj == NULL || rc->timeout != v->timeout) {
        PyObject *t = PyLong_FromLong(v->timeout);
        if (t == NULL) {
            Py_DECREF(names);
            return -1;
        }
        Py_XSETREF(rc->timeout_obj, t);
        rc->timeout = v->timeout;
    }
    PyObject *start = num_or_none(v->start);
    PyObject *last = start != NULL && v->last == v->start ? Py_NewRef(start) : num_or_none(v->last);
    PyObject *items[10] = {Py_NewRef(tid), PyLong_FromLongLong(v->pid), PyLong_FromLong(v->epoch),
                           Py_NewRef(PyTuple_GET_ITEM(c->state_names, v->state)), Py_NewRef(rc->timeout_obj),
                           start, last, names, Py_NewRef(c->partition), Py_NewRef(c->coordinator_id)};
    int bad = 0;
    for (int i = 0; i < 10; i++)
        bad |= items[i] == NULL;
    PyObject *row = NULL;
    if (!bad && pc->make != NULL) {
        row = PyObject_Vectorcall(pc->make, items, (size_t)pc->k, NULL);
    } else if (!bad && (row = PyTuple_New(10)) != NULL) {
        for (int i = 0; i < 10; i++)
            PyTuple_SET_ITEM(row, i, items[i]); /* the tuple's own now */
        *made = row;
        return 1;
    }
    for (int i = 0; i < 10; i++)
        Py_XDECREF(items[i]);
    *made = row;
    return row == NULL ? -1 : 1;
}

/* a packed record's state is in wanted (the mask): 1, else 0 */
static int packed_wanted(const packed_values_ctx *pc, const prec *r)
{
    return pc->wanted >> r->state & 1;
}

/* a record's fields f are in wanted (None: all, else the container asked with the state f[4] itself):
 * 1, 0, or -1 with an exception */
static int fields_wanted(const values_ctx *c, PyObject *f)
{
    if (c->wanted == Py_None)
        return 1;
    PyObject *state = PySequence_GetItem(f, 4); /* f[F_STATE] */
    int in = state == NULL ? -1 : PySequence_Contains(c->wanted, state);
    Py_XDECREF(state);
    return in;
}

/* fold_values' row of a packed record: in wanted (the mask), then values_made */
static int values_packed(void *ctx, PyObject *tid, const prec *r, PyObject **made)
{
    packed_values_ctx *pc = ctx;
    if (!packed_wanted(pc, r))
        return 0;
    return values_made(pc, tid, r, made);
}

/* fold_values' row of a record as an (offset, fields) item (a dict's fold, a record a table keeps as an
 * object): in wanted (None: all, else the container asked with the state itself), then the row of its
 * numbers where they are the widths Kafka writes (values_made: the row stated once here), else
 * row_of(id, fields, partition, coordinator_id) itself */
static int values_row(void *ctx, PyObject *tid, PyObject *item, PyObject **made)
{
    packed_values_ctx *pc = ctx;
    values_ctx *c = &pc->c;
    PyObject *f = PyTuple_GET_ITEM(item, 1);
    int in = fields_wanted(c, f);
    if (in <= 0)
        return in;
    if (PyTuple_Check(f) && PyTuple_GET_SIZE(f) == TL_FIELDS) {
        prec r;
        if (prec_of(NULL, f, &r) < 0)
            return -1;
        int got = r.kind == REC_PACKED ? values_made(pc, tid, &r, made) : 0;
        prec_clear(&r);
        if (got != 0)
            return got;
    }
    *made = PyObject_CallFunctionObjArgs(c->row_of, tid, f, c->partition, c->coordinator_id, NULL);
    if (*made != NULL && pc->make != NULL)
        *made = made_with(pc, *made);
    return *made == NULL ? -1 : 1;
}

static PyObject *
co_fold_values(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "fold_values() takes 8 arguments");
        return NULL;
    }
    values_ctx c = {args[2], args[3], args[4], args[5], args[6]};
    if (!PyTuple_Check(c.state_names)) {
        PyErr_SetString(PyExc_TypeError, "fold_values(): state_names a tuple");
        return NULL;
    }
    co_state *st = PyModule_GetState(self);
    packed_values_ctx pc = {c, (1u << N_STATES) - 1, {{0}}, NULL, 0};
    PyObject *r;
    if (PyObject_TypeCheck(args[0], st->table_type)) {
        if (c.wanted != Py_None && state_mask(c.wanted, &pc.wanted) < 0)
            return NULL;
        r = each_live_packed((TxnTable *)args[0], args[1], values_row, values_packed, &pc, args[7]);
    } else {
        r = each_live(args[0], args[1], "fold_values", values_row, &pc, args[7]);
    }
    row_cache_clear(&pc.cache);
    return r;
}

/* sorted_rows (below): coordinator.sorted_rows' twin (CoordinatorState.stream_values of packed folds):
 * fold_values of every fold, the rows sorted by id. The ids are sorted by their bytes before any row is
 * made (UTF-8 keeps code point order, the order of str; the sort keeps the folds' order among equal ids, as
 * list.sort is stable), and each row is made in that order, when taken. */
typedef struct {
    uint64_t pre;      /* 8 bytes of the id past the prefix all ids share, big-endian, zero-padded */
    const char *k;
    Py_ssize_t n;
    Py_ssize_t fold, e; /* which fold, which entry */
    Py_ssize_t at;      /* sort_refs: its index in the refs */
} live_ref;

static int ref_cmp(const void *a, const void *b)
{
    const live_ref *x = a, *y = b;
    if (x->pre != y->pre)
        return x->pre < y->pre ? -1 : 1;
    int c = memcmp(x->k, y->k, (size_t)(x->n < y->n ? x->n : y->n));
    if (c != 0)
        return c;
    if (x->n != y->n)
        return x->n < y->n ? -1 : 1;
    if (x->fold != y->fold)
        return x->fold < y->fold ? -1 : 1;
    return (x->e > y->e) - (x->e < y->e);
}

typedef struct {
    uint64_t pre;
    Py_ssize_t i; /* into the live_refs */
} pre_ix;

/* refs[0:m] in ref_cmp's order, as indices into refs (*order, PyMem): a stable LSD radix sort of the 8-byte
 * prefixes (a pass only for a byte that is not the same in every prefix), then each run of equal prefixes
 * sorted by ref_cmp. -1 with an exception. */
static int sort_refs(const live_ref *refs, Py_ssize_t m, pre_ix **order)
{
    pre_ix *a = PyMem_Malloc((size_t)(m > 0 ? m : 1) * sizeof(pre_ix)), *b = PyMem_Malloc((size_t)(m > 0 ? m : 1) * sizeof(pre_ix));
    if (a == NULL || b == NULL) {
        PyMem_Free(a);
        PyMem_Free(b);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t j = 0; j < m; j++)
        a[j] = (pre_ix){refs[j].pre, j};
    for (int byte = 0; byte < 8 && m > 1; byte++) {
        int shift = 8 * byte;
        Py_ssize_t count[256] = {0};
        for (Py_ssize_t j = 0; j < m; j++)
            count[(a[j].pre >> shift) & 255]++;
        if (count[(a[0].pre >> shift) & 255] == m)
            continue;
        Py_ssize_t at = 0;
        for (int c = 0; c < 256; c++) {
            Py_ssize_t n = count[c];
            count[c] = at;
            at += n;
        }
        for (Py_ssize_t j = 0; j < m; j++)
            b[count[(a[j].pre >> shift) & 255]++] = a[j];
        pre_ix *t = a;
        a = b;
        b = t;
    }
    PyMem_Free(b);
    live_ref *run = NULL;
    for (Py_ssize_t j = 0; j < m;) { /* equal prefixes: the whole ids decide */
        Py_ssize_t end = j + 1;
        while (end < m && a[end].pre == a[j].pre)
            end++;
        if (end - j > 1) {
            Py_ssize_t n = end - j;
            live_ref *r = PyMem_Realloc(run, (size_t)n * sizeof(live_ref));
            if (r == NULL) {
                PyMem_Free(run);
                PyMem_Free(a);
                PyErr_NoMemory();
                return -1;
            }
            run = r;
            for (Py_ssize_t q = 0; q < n; q++) {
                run[q] = refs[a[j + q].i];
                run[q].at = a[j + q].i;
            }
            qsort(run, (size_t)n, sizeof(live_ref), ref_cmp);
            for (Py_ssize_t q = 0; q < n; q++)
                a[j + q].i = run[q].at;
        }
        j = end;
    }
    PyMem_Free(run);
    *order = a;
    return 0;
}

/* The live ids of the folds (hold: a tuple of (TxnTable, skip, partition, coordinator_id)) whose packed state
 * is in mask (a record kept as an object asks wanted itself, values_row), each a live_ref, in id order
 * (sort_refs' order: *refs_out, PyMem; NULL when none), *m_out of them. 0, or -1 with an exception. */
static int sorted_refs(PyObject *hold, unsigned mask, live_ref **refs_out, Py_ssize_t *m_out)
{
    Py_ssize_t nf = PyTuple_GET_SIZE(hold), total = 0;
    for (Py_ssize_t i = 0; i < nf; i++)
        total += ((TxnTable *)PyTuple_GET_ITEM(PyTuple_GET_ITEM(hold, i), 0))->n;
    live_ref *refs = (size_t)total <= PY_SSIZE_T_MAX / sizeof(live_ref)
                         ? PyMem_Malloc((size_t)(total > 0 ? total : 1) * sizeof(live_ref)) : NULL;
    if (refs == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t m = 0, lcp = -1;
    const char *first = NULL;
    for (Py_ssize_t i = 0; i < nf; i++) { /* the live ids wanted, and the prefix every one of them shares */
        PyObject *f = PyTuple_GET_ITEM(hold, i);
        TxnTable *t = (TxnTable *)PyTuple_GET_ITEM(f, 0);
        PyObject *skip = PyTuple_GET_ITEM(f, 1);
        Py_ssize_t skips = PyObject_Length(skip);
        if (skips < 0) {
            PyMem_Free(refs);
            return -1;
        }
        for (Py_ssize_t e = 0; e < t->n && m < total; e++) {
            const prec *r = &t->ents[e].latest;
            if (r->kind == REC_PACKED && !(mask >> r->state & 1))
                continue;
            int live = live_id(t, e, skip, skips, NULL);
            if (live < 0) {
                PyMem_Free(refs);
                return -1;
            }
            if (live == 0)
                continue;
            const ient *en = &t->ents[e]; /* after skip's container, which may have moved the arrays */
            const char *k = t->keys + en->key;
            refs[m++] = (live_ref){0, k, en->klen, i, e, 0};
            if (lcp < 0) {
                first = k;
                lcp = en->klen;
            } else {
                Py_ssize_t j = 0;
                while (j < lcp && j < en->klen && k[j] == first[j])
                    j++;
                lcp = j;
            }
        }
    }
    for (Py_ssize_t j = 0; j < m; j++) {
        uint64_t pre = 0;
        for (Py_ssize_t b = 0; b < 8; b++)
            pre = pre << 8 | (lcp + b < refs[j].n ? (unsigned char)refs[j].k[lcp + b] : 0);
        refs[j].pre = pre;
    }
    pre_ix *order = NULL;
    live_ref *sorted = m > 0 && sort_refs(refs, m, &order) == 0 ? PyMem_Malloc((size_t)m * sizeof(live_ref)) : NULL;
    if (m > 0 && sorted == NULL) {
        if (order != NULL)
            PyErr_NoMemory();
        PyMem_Free(order);
        PyMem_Free(refs);
        return -1;
    }
    for (Py_ssize_t o = 0; o < m; o++) /* gathered in id order: the rows then read them one after another */
        sorted[o] = refs[order[o].i];
    PyMem_Free(order);
    PyMem_Free(refs);
    *refs_out = sorted;
    *m_out = m;
    return 0;
}

/* SortedRows: sorted_rows' answer, the rows made as they are taken (take(n)): the rows of 1,000,000 ids
 * never all in memory at once, each made while the bytes it is read from are still in the cache. It holds
 * the folds: an id's record is read when its row is made (a table cleared meanwhile: its rows are gone). */
typedef struct {
    PyObject_HEAD
    PyObject *hold; /* the folds, a tuple */
    live_ref *refs; /* in id order */
    Py_ssize_t m, at;
    packed_values_ctx pc; /* its wanted, state_names and row_of owned */
} SortedRows;

static void sr_dealloc(SortedRows *sr)
{
    PyTypeObject *tp = Py_TYPE(sr);
    row_cache_clear(&sr->pc.cache);
    PyMem_Free(sr->refs);
    Py_XDECREF(sr->hold);
    Py_XDECREF(sr->pc.c.wanted);
    Py_XDECREF(sr->pc.c.state_names);
    Py_XDECREF(sr->pc.c.row_of);
    tp->tp_free((PyObject *)sr);
    Py_DECREF(tp);
}

/* the table of ref (*fold: its fold, borrowed), or NULL when the table was cleared meanwhile (Python ran
 * between two takes): the ref's row is gone */
static TxnTable *sr_table(const SortedRows *sr, const live_ref *ref, PyObject **fold)
{
    *fold = PyTuple_GET_ITEM(sr->hold, ref->fold);
    TxnTable *t = (TxnTable *)PyTuple_GET_ITEM(*fold, 0);
    return ref->e < t->n ? t : NULL;
}

/* take(n, make=None, k=0) -> list: the next n rows at most (fewer at the end; [] once every row was taken),
 * in id order; each the tuple of its values (coordinator.transaction_values), or make(*row[:k]) (a msgspec
 * struct: list-txn's JSON; partitions then a tuple, the same JSON as the list) */
static PyObject *sr_take(SortedRows *sr, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1 || nargs > 3) {
        PyErr_SetString(PyExc_TypeError, "take(n, make=None, k=0)");
        return NULL;
    }
    Py_ssize_t n = PyLong_AsSsize_t(args[0]), k = nargs > 2 ? PyLong_AsSsize_t(args[2]) : 0;
    if ((n == -1 || k == -1) && PyErr_Occurred())
        return NULL;
    PyObject *make = nargs > 1 && args[1] != Py_None ? args[1] : NULL;
    if (n < 0 || (make != NULL && (k < 0 || k > 10))) {
        PyErr_SetString(PyExc_ValueError, "take(): n >= 0, and 0 <= k <= 10 with make");
        return NULL;
    }
    PyObject *out = PyList_New(0);
    if (out == NULL)
        return NULL;
    Py_INCREF(sr); /* make and row_of run Python */
    packed_values_ctx *pc = &sr->pc;
    Py_XINCREF(make);
    pc->make = make;
    pc->k = k;
    Py_ssize_t m = sr->m;
    const live_ref *refs = sr->refs;
    int failed = 0;
    while (sr->at < m && PyList_GET_SIZE(out) < n) {
        Py_ssize_t o = sr->at++;
        if (o + 16 < m) { /* the rows are read in id order, across every table: their bytes asked for ahead */
            const live_ref *ahead = &refs[o + 16];
            const TxnTable *at = (const TxnTable *)PyTuple_GET_ITEM(PyTuple_GET_ITEM(sr->hold, ahead->fold), 0);
            if (ahead->e < at->n) {
                __builtin_prefetch(&at->ents[ahead->e]);
                __builtin_prefetch((const char *)&at->ents[ahead->e] + 64);
                __builtin_prefetch(ahead->k);
            }
        }
        const live_ref *ref = &refs[o];
        PyObject *f;
        TxnTable *t = sr_table(sr, ref, &f);
        if (t == NULL) /* cleared meanwhile (Python ran): its rows are gone */
            continue;
        pc->c.partition = PyTuple_GET_ITEM(f, 2);
        pc->c.coordinator_id = PyTuple_GET_ITEM(f, 3);
        const ient *en = &t->ents[ref->e];
        PyObject *tid = key_str(t->keys + en->key, en->klen);
        int r = tid == NULL ? -1 : append_row(t, ref->e, tid, values_row, values_packed, pc, out);
        Py_XDECREF(tid);
        if (r < 0) {
            failed = 1;
            break;
        }
    }
    pc->make = NULL;
    Py_XDECREF(make);
    Py_DECREF(sr);
    if (failed)
        Py_CLEAR(out);
    return out;
}

static PyMethodDef sr_methods[] = {
    {"take", (PyCFunction)(void (*)(void))sr_take, METH_FASTCALL,
     "take(n, make=None, k=0) -> list: the next n rows (coordinator.RowCursor.take)"},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot sr_slots[] = {
    {Py_tp_dealloc, sr_dealloc},
    {Py_tp_methods, sr_methods},
    {Py_tp_doc, "sorted_rows' rows, made as they are taken (see _coordinator.c)"},
    {0, NULL},
};

static PyType_Spec sr_spec = {
    .name = "kafkatx.coordinator._coordinator.SortedRows",
    .basicsize = sizeof(SortedRows),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = sr_slots,
};

/* sorted_rows(folds, wanted, state_names, row_of) -> SortedRows: coordinator.sorted_rows' twin over packed
 * folds (a list of (TxnTable, skip, partition, coordinator_id)): the ids wanted sorted before any row is made
 * (sorted_refs), the rows made as they are taken */
static PyObject *
co_sorted_rows(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "sorted_rows() takes 4 arguments");
        return NULL;
    }
    co_state *st = PyModule_GetState(self);
    PyObject *folds = args[0], *wanted = args[1], *state_names = args[2], *row_of = args[3];
    if (!PyList_Check(folds) || !PyTuple_Check(state_names)) {
        PyErr_SetString(PyExc_TypeError, "sorted_rows(): folds a list, state_names a tuple");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(folds); i++) {
        PyObject *f = PyList_GET_ITEM(folds, i);
        if (!PyTuple_Check(f) || PyTuple_GET_SIZE(f) != 4 ||
            !PyObject_TypeCheck(PyTuple_GET_ITEM(f, 0), st->table_type)) {
            PyErr_SetString(PyExc_TypeError, "sorted_rows(): each fold a (TxnTable, skip, partition, coordinator_id)");
            return NULL;
        }
    }
    unsigned mask = (1u << N_STATES) - 1;
    if (wanted != Py_None && state_mask(wanted, &mask) < 0)
        return NULL;
    SortedRows *sr = PyObject_New(SortedRows, st->rows_type);
    if (sr == NULL)
        return NULL;
    sr->refs = NULL;
    sr->m = sr->at = 0;
    sr->pc = (packed_values_ctx){{NULL, NULL, Py_NewRef(wanted), Py_NewRef(state_names), Py_NewRef(row_of)},
                                 mask, {{0}}, NULL, 0};
    sr->hold = PyList_AsTuple(folds); /* the folds a list no longer: its tables stay while rows are taken */
    if (sr->hold == NULL || sorted_refs(sr->hold, mask, &sr->refs, &sr->m) < 0) {
        Py_DECREF(sr);
        return NULL;
    }
    return (PyObject *)sr;
}

/* claim_producers(table, skip, current, from_history) -> None: coordinator.claim_producers' twin over a packed
 * fold (index_producers, one fold at a time): each live id (not in skip) claims its producer ids that are not
 * -1 (TransactionMetadata.producer_ids: current, previous, next) in current, and the non-negative producer id
 * of each record its history keeps (HistoryEntry.producer_id) in from_history; a producer id claimed already
 * goes to the greater id (coordinator._claim) */
static int claim(PyObject *index, PyObject *pid, PyObject *tid)
{
    PyObject *old = PyDict_GetItemWithError(index, pid); /* borrowed */
    if (old == NULL && PyErr_Occurred())
        return -1;
    int less = 1;
    if (old != NULL && (less = PyObject_RichCompareBool(old, tid, Py_LT)) < 0)
        return -1;
    return less ? PyDict_SetItem(index, pid, tid) : 0;
}

static int claim_i64(PyObject *index, int64_t pid, PyObject *tid)
{
    PyObject *p = PyLong_FromLongLong(pid);
    int r = p == NULL ? -1 : claim(index, p, tid);
    Py_XDECREF(p);
    return r;
}

static PyObject *
co_claim_producers(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    co_state *st = PyModule_GetState(self);
    if (nargs != 4 || !PyObject_TypeCheck(args[0], st->table_type) || !PyDict_Check(args[2]) ||
        !PyDict_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError, "claim_producers(table, skip, current, from_history): a TxnTable, two dicts");
        return NULL;
    }
    TxnTable *t = (TxnTable *)args[0];
    PyObject *skip = args[1], *current = args[2], *from_history = args[3];
    Py_ssize_t skips = PyObject_Length(skip);
    if (skips < 0)
        return NULL;
    PyObject *zero = PyLong_FromLong(0), *none_pid = PyLong_FromLong(-1);
    if (zero == NULL || none_pid == NULL) {
        Py_XDECREF(zero);
        Py_XDECREF(none_pid);
        return NULL;
    }
    Py_INCREF(t); /* held: the containers and comparisons may run Python */
    int rc = 0;
    for (Py_ssize_t e = 0; e < t->n && rc == 0; e++) {
        PyObject *tid;
        int live = live_id(t, e, skip, skips, &tid);
        if (live <= 0) {
            rc = live;
            continue;
        }
        if (!t->keep_history) { /* no history kept (NO_HISTORY): history[tid] raises, as the dict's */
            PyErr_SetObject(PyExc_KeyError, tid);
            Py_DECREF(tid);
            rc = -1;
            break;
        }
        prec r = t->ents[e].latest; /* copies: what Python runs may move the arrays */
        Py_XINCREF(r.obj);
        if (r.kind == REC_PACKED) {
            int64_t pids[3] = {r.pid, r.prev, r.next};
            for (int i = 0; i < 3 && rc == 0; i++)
                if (pids[i] != -1)
                    rc = claim_i64(current, pids[i], tid);
        } else {
            for (int i = 0; i < 3 && rc == 0; i++) { /* fields 1, 8, 9: producer id, previous, next */
                PyObject *pid = PyTuple_GET_ITEM(r.obj, i == 0 ? 1 : 7 + i);
                int ne = PyObject_RichCompareBool(pid, none_pid, Py_NE);
                rc = ne < 0 ? -1 : ne ? claim(current, pid, tid) : 0;
            }
        }
        prec_clear(&r);
        for (Py_ssize_t i = e < t->n ? t->ents[e].first : -1; i >= 0 && rc == 0;) {
            prec h = t->hist[i].r;
            Py_ssize_t next = t->hist[i].next;
            Py_XINCREF(h.obj);
            if (h.kind == REC_PACKED) {
                if (h.pid >= 0)
                    rc = claim_i64(from_history, h.pid, tid);
            } else if (h.kind == REC_OBJECT) {
                PyObject *pid = PyTuple_GET_ITEM(h.obj, 1);
                int ge = PyObject_RichCompareBool(pid, zero, Py_GE);
                rc = ge < 0 ? -1 : ge ? claim(from_history, pid, tid) : 0;
            }
            prec_clear(&h);
            i = e < t->n && next < t->nh ? next : -1;
        }
        Py_DECREF(tid);
    }
    Py_DECREF(t);
    Py_DECREF(zero);
    Py_DECREF(none_pid);
    if (rc < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* producer_ids_of(table, skip, out) -> None: coordinator.producer_ids_of's twin over a packed fold: the
 * producer id of each live id not in skip added to the set out */
static PyObject *
co_producer_ids_of(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    co_state *st = PyModule_GetState(self);
    if (nargs != 3 || !PyObject_TypeCheck(args[0], st->table_type) || !PySet_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "producer_ids_of(table, skip, out): a TxnTable, a set");
        return NULL;
    }
    TxnTable *t = (TxnTable *)args[0];
    Py_ssize_t skips = PyObject_Length(args[1]);
    if (skips < 0)
        return NULL;
    Py_INCREF(t);
    int rc = 0;
    for (Py_ssize_t e = 0; e < t->n && rc == 0; e++) {
        int live = live_id(t, e, args[1], skips, NULL);
        if (live <= 0) {
            rc = live;
            continue;
        }
        const prec *r = &t->ents[e].latest; /* after skip's container, which may have moved the arrays */
        PyObject *pid = r->kind == REC_PACKED ? PyLong_FromLongLong(r->pid) : Py_NewRef(PyTuple_GET_ITEM(r->obj, 1));
        rc = pid == NULL ? -1 : PySet_Add(args[2], pid);
        Py_XDECREF(pid);
    }
    Py_DECREF(t);
    if (rc < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* rules.is_timed_out, restated (TransactionStateManager.timedOutTransactions: txnStartTimestamp +
 * txnTimeoutMs < now, a two-phase-commit transaction (TransactionMetadata.isDistributedTwoPhaseCommitTxn:
 * timeout == Integer.MAX_VALUE) never; no start (negative): not timed out) for ints that fit 64 bits:
 * 1 or 0; -1 when the numbers do not fit (the caller asks the Python predicate) */
static int
timed_out_i64(long long s, long long t, long long now, long long two_pc)
{
    if (t == two_pc)
        return 0;
    long long deadline;
    if (s < 0)
        return 0;
    if (__builtin_add_overflow(s, t, &deadline))
        return -1;
    return now > deadline;
}

static int
is_timed_out(PyObject *start, PyObject *timeout, long long now, long long two_pc)
{
    if (!PyLong_CheckExact(start) || !PyLong_CheckExact(timeout))
        return -1;
    int of1 = 0, of2 = 0;
    long long s = PyLong_AsLongLongAndOverflow(start, &of1), t = PyLong_AsLongLongAndOverflow(timeout, &of2);
    if (of1 || of2 || ((s == -1 || t == -1) && PyErr_Occurred())) {
        PyErr_Clear();
        return -1;
    }
    return timed_out_i64(s, t, now, two_pc);
}

typedef struct {
    PyObject *partition, *states, *now_obj, *rule;
    long long now, two_pc;
    int now_fits; /* 0: a now beyond 64 bits, the rule itself for every record */
} timed_out_ctx;

/* whether a record with these start and timeout objects is past its timeout (rules.is_timed_out, restated
 * by is_timed_out; numbers it does not take: the rule itself): 1, 0, or -1 with an exception */
static int late_objects(const timed_out_ctx *c, PyObject *start, PyObject *timeout)
{
    int late = c->now_fits ? is_timed_out(start, timeout, c->now, c->two_pc) : -1;
    if (late < 0) { /* numbers the restated rule does not take: the rule itself */
        PyObject *r = PyObject_CallFunctionObjArgs(c->rule, start, timeout, c->now_obj, NULL);
        late = r == NULL ? -1 : PyObject_IsTrue(r);
        Py_XDECREF(r);
    }
    return late;
}

/* timed_out_of's row of one live record: in states and past its timeout, (id, offset, fields, partition) */
static int
timed_out_row(void *ctx, PyObject *tid, PyObject *item, PyObject **made)
{
    timed_out_ctx *c = ctx;
    PyObject *f = PyTuple_GET_ITEM(item, 1);
    if (!PyTuple_Check(f) || PyTuple_GET_SIZE(f) != TL_FIELDS) {
        PyErr_SetString(PyExc_TypeError, "timed_out_of(): a record's fields are a 12-tuple");
        return -1;
    }
    int in = PySequence_Contains(c->states, PyTuple_GET_ITEM(f, 4)); /* f[F_STATE] */
    if (in <= 0)
        return in;
    int late = late_objects(c, PyTuple_GET_ITEM(f, 7), PyTuple_GET_ITEM(f, 3)); /* F_START_TIMESTAMP, F_TIMEOUT_MS */
    if (late <= 0)
        return late;
    *made = PyTuple_Pack(4, tid, PyTuple_GET_ITEM(item, 0), f, c->partition);
    return *made == NULL ? -1 : 1;
}

/* timed_out_of's row of a packed record: in states (mask) and past its timeout */
typedef struct {
    timed_out_ctx c;
    unsigned states;
} packed_timed_out_ctx;

/* whether a packed record is in states (mask) and past its timeout: 1, 0, or -1 with an exception */
static int late_packed(const packed_timed_out_ctx *pc, const prec *v)
{
    const timed_out_ctx *c = &pc->c;
    if (!(pc->states >> v->state & 1))
        return 0;
    int late = c->now_fits ? timed_out_i64(v->start, v->timeout, c->now, c->two_pc) : -1;
    if (late < 0) { /* numbers the restated rule does not take: the rule itself */
        PyObject *start = PyLong_FromLongLong(v->start), *timeout = PyLong_FromLongLong(v->timeout);
        PyObject *res = start == NULL || timeout == NULL ? NULL
            : PyObject_CallFunctionObjArgs(c->rule, start, timeout, c->now_obj, NULL);
        Py_XDECREF(start);
        Py_XDECREF(timeout);
        late = res == NULL ? -1 : PyObject_IsTrue(res);
        Py_XDECREF(res);
    }
    return late;
}

static int timed_out_packed(void *ctx, PyObject *tid, const prec *r, PyObject **made)
{
    packed_timed_out_ctx *pc = ctx;
    const timed_out_ctx *c = &pc->c;
    int late = late_packed(pc, r);
    if (late <= 0)
        return late;
    PyObject *f = prec_fields(r);
    *made = f == NULL ? NULL : Py_BuildValue("(OLNO)", tid, (long long)r->offset, f, c->partition);
    return *made == NULL ? -1 : 1;
}

/* the now and two-phase-commit timeout handed in, as the restated rule takes them: *now_fits 0 for a now
 * beyond 64 bits (the rule itself is asked for every record then); -1 with an exception */
static int
rule_numbers(PyObject *now_obj, PyObject *two_pc_obj, long long *now, int *now_fits, long long *two_pc)
{
    *two_pc = PyLong_AsLongLong(two_pc_obj);
    if (*two_pc == -1 && PyErr_Occurred())
        return -1;
    *now_fits = 1;
    *now = PyLong_AsLongLong(now_obj);
    if (*now == -1 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError))
            return -1;
        PyErr_Clear();
        *now_fits = 0;
    }
    return 0;
}

/* timed_out_of(latest, skip, partition, states, now, two_pc_timeout, is_timed_out, out) -> None: the twin
 * of coordinator.timed_out_of (find-hanging's ids past their timeout, one partition's fold at a time);
 * a record whose numbers the restated rule does not take is_timed_out(start, timeout, now) itself */
static PyObject *
co_timed_out_of(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "timed_out_of() takes 8 arguments");
        return NULL;
    }
    timed_out_ctx c = {args[2], args[3], args[4], args[6], 0, 0, 1};
    if (rule_numbers(c.now_obj, args[5], &c.now, &c.now_fits, &c.two_pc) < 0)
        return NULL;
    co_state *st = PyModule_GetState(self);
    if (PyObject_TypeCheck(args[0], st->table_type)) {
        packed_timed_out_ctx pc = {c, 0};
        if (state_mask(c.states, &pc.states) < 0)
            return NULL;
        return each_live_packed((TxnTable *)args[0], args[1], timed_out_row, timed_out_packed, &pc, args[7]);
    }
    return each_live(args[0], args[1], "timed_out_of", timed_out_row, &c, args[7]);
}

/* ------------------------------------------------------------------------------------------------------
 * id_rows: kafkatx scan's ID rows of one folded partition (spark/tasks.py _fold_one's loop, its reference,
 * stated there), made from the table where it lies: per id in first-seen order (id, home, tombstone,
 * offset, timed out, the producer ids its latest value claims (producerId, prevProducerId,
 * nextProducerId of TransactionMetadata: those that are not RecordBatch.NO_PRODUCER_ID), the producer ids
 * its kept records used, those of both that are named, its value pickled). Timed out:
 * TransactionStateManager.timedOutTransactions' test, rules.is_timed_out (timed_out_i64 above; numbers it
 * does not take: the rule itself).
 * The filter (tasks._id_rows states it): with named (a set of producer ids) or tids (a container of ids)
 * given, an id's row is made only when named holds one of its claimed or used producer ids or it is past
 * its timeout, or tids holds it; the test reads a packed record's numbers where they lie (a skipped id
 * costs no object, no list, no pickle; a record kept as an object is asked through its objects).
 * ------------------------------------------------------------------------------------------------------ */

typedef struct {
    PyObject *kind, *number, *zero, *misplaced, *dumps, *proto, *no_pid;
    PyObject *named, *tids; /* None: no filter of that form */
    int check_misplaced;
    int64_t *named_i64; /* named's ints that fit 64 bits, sorted (what a packed number can equal) */
    Py_ssize_t n_named_i64;
    packed_timed_out_ctx late; /* timed_out_of's test (its partition unused) */
} id_rows_ctx;

/* whether a live record is past its timeout in TIMEOUT_STATES: 1, 0, or -1 with an exception */
static int id_timed_out(const id_rows_ctx *c, const prec *r)
{
    if (r->kind == REC_PACKED)
        return late_packed(&c->late, r);
    int in = PySequence_Contains(c->late.c.states, PyTuple_GET_ITEM(r->obj, 4)); /* F_STATE */
    if (in <= 0)
        return in;
    return late_objects(&c->late.c, PyTuple_GET_ITEM(r->obj, 7), PyTuple_GET_ITEM(r->obj, 3));
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* named's ints that fit 64 bits, sorted, into c->named_i64 (PyMem; NULL when none); -1 with an exception
 * (an element that is not an int) */
static int named_numbers(id_rows_ctx *c)
{
    Py_ssize_t size = PySet_GET_SIZE(c->named), m = 0;
    if (size == 0)
        return 0;
    if ((c->named_i64 = PyMem_New(int64_t, size)) == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    PyObject *it = PyObject_GetIter(c->named), *x;
    if (it == NULL)
        return -1;
    while ((x = PyIter_Next(it)) != NULL) {
        int overflow = 0;
        long long v = PyLong_Check(x) ? PyLong_AsLongLongAndOverflow(x, &overflow) : -1;
        int bad = !PyLong_Check(x) || (v == -1 && PyErr_Occurred());
        Py_DECREF(x);
        if (bad) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "id_rows(): named holds producer ids (ints)");
            Py_DECREF(it);
            return -1;
        }
        if (!overflow && m < size) /* past 64 bits: only a record kept as an object can claim it */
            c->named_i64[m++] = v;
    }
    Py_DECREF(it);
    if (PyErr_Occurred())
        return -1;
    qsort(c->named_i64, (size_t)m, sizeof(int64_t), cmp_i64);
    c->n_named_i64 = m;
    return 0;
}

static int named_has(const id_rows_ctx *c, int64_t pid)
{
    return c->n_named_i64 > 0 && bsearch(&pid, c->named_i64, (size_t)c->n_named_i64, sizeof(int64_t), cmp_i64) != NULL;
}

/* whether named holds x when x op than (claims: != NO_PRODUCER_ID; hist: >= 0): 1, 0, -1 with an exception */
static int named_has_obj(const id_rows_ctx *c, PyObject *x, PyObject *than, int op)
{
    int counts = PyObject_RichCompareBool(x, than, op);
    return counts <= 0 ? counts : PySet_Contains(c->named, x);
}

/* whether named holds a producer id of the id's latest value's claims or of its kept records: 1, 0, -1 */
static int names_id(const id_rows_ctx *c, TxnTable *t, const ient *en)
{
    const prec *r = &en->latest;
    if (r->kind == REC_PACKED) {
        if ((r->pid != -1 && named_has(c, r->pid)) || (r->prev != -1 && named_has(c, r->prev))
            || (r->next != -1 && named_has(c, r->next))) /* state.NO_PRODUCER_ID */
            return 1;
    } else if (r->kind == REC_OBJECT) {
        static const int at[3] = {1, 8, 9}; /* F_PRODUCER_ID, F_PREVIOUS_PRODUCER_ID, F_NEXT_PRODUCER_ID */
        for (int i = 0; i < 3; i++) {
            int has = named_has_obj(c, PyTuple_GET_ITEM(r->obj, at[i]), c->no_pid, Py_NE);
            if (has != 0)
                return has;
        }
    }
    if (t->keep_history)
        for (Py_ssize_t i = en->first; i >= 0; i = t->hist[i].next) {
            const prec *h = &t->hist[i].r;
            int has = h->kind == REC_PACKED ? h->pid >= 0 && named_has(c, h->pid)
                : h->kind == REC_OBJECT ? named_has_obj(c, PyTuple_GET_ITEM(h->obj, 1), c->zero, Py_GE) : 0;
            if (has != 0)
                return has;
        }
    return 0;
}

/* whether the filter keeps the id (1, 0, -1 with an exception); *late: whether it is past its timeout when
 * the test asked (else -2); *tid: the id as a str when the test made it (else NULL) */
static int id_wanted(const id_rows_ctx *c, TxnTable *t, const ient *en, int *late, PyObject **tid)
{
    if (c->named != Py_None) {
        *late = en->latest.kind == REC_TOMB ? 0 : id_timed_out(c, &en->latest);
        if (*late != 0)
            return *late;
        int has = names_id(c, t, en);
        if (has != 0)
            return has;
    }
    if (c->tids != Py_None) {
        if ((*tid = key_str(t->keys + en->key, en->klen)) == NULL)
            return -1;
        return PySequence_Contains(c->tids, *tid);
    }
    return 0;
}

/* append x to list when x op than (claims: != NO_PRODUCER_ID; hist: >= 0); -1 with an exception */
static int add_pid_obj(PyObject *list, PyObject *x, PyObject *than, int op)
{
    int keep = PyObject_RichCompareBool(x, than, op);
    return keep <= 0 ? keep : PyList_Append(list, x);
}

static int add_pid(PyObject *list, int64_t pid)
{
    PyObject *x = PyLong_FromLongLong(pid);
    int rc = x == NULL ? -1 : PyList_Append(list, x);
    Py_XDECREF(x);
    return rc;
}

/* the named producer ids of claims then hist, each once, in that order (all of them when named is None) */
static PyObject *named_pids(const id_rows_ctx *c, PyObject *claims, PyObject *hist)
{
    PyObject *pids = PyList_New(0);
    PyObject *from[2] = {claims, hist};
    for (int k = 0; pids != NULL && k < 2; k++)
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(from[k]); i++) {
            PyObject *x = PyList_GET_ITEM(from[k], i);
            int keep = c->named == Py_None ? 1 : PySet_Contains(c->named, x);
            if (keep > 0) { /* not yet in pids */
                int seen = PySequence_Contains(pids, x);
                keep = seen < 0 ? -1 : !seen;
            }
            if (keep < 0 || (keep > 0 && PyList_Append(pids, x) < 0)) {
                Py_CLEAR(pids);
                break;
            }
        }
    return pids;
}

/* one id's row (a new tuple), or NULL with an exception; late: whether it is past its timeout (-2: not yet
 * asked); tid: the id as a str (stolen), or NULL to make it here */
static PyObject *id_row(const id_rows_ctx *c, TxnTable *t, const ient *en, int late, PyObject *tid)
{
    const prec *r = &en->latest;
    PyObject *offset = NULL, *claims = NULL, *hist = NULL, *pids = NULL, *blob = NULL, *row = NULL;
    if (tid == NULL && (tid = key_str(t->keys + en->key, en->klen)) == NULL)
        return NULL;
    int home = 1;
    if (c->check_misplaced && (home = PySequence_Contains(c->misplaced, tid)) < 0)
        goto done;
    home = c->check_misplaced ? !home : 1;
    if ((offset = PyLong_FromLongLong(r->offset)) == NULL || (hist = PyList_New(0)) == NULL)
        goto done;
    if (t->keep_history) /* the producer ids of the records kept (history_items), a tombstone's none */
        for (Py_ssize_t i = en->first; i >= 0; i = t->hist[i].next) {
            const prec *h = &t->hist[i].r;
            if (h->kind == REC_PACKED ? h->pid >= 0 && add_pid(hist, h->pid) < 0
                : h->kind == REC_OBJECT && add_pid_obj(hist, PyTuple_GET_ITEM(h->obj, 1), c->zero, Py_GE) < 0)
                goto done;
        }
    if ((claims = PyList_New(0)) == NULL)
        goto done;
    if (r->kind == REC_TOMB) {
        if ((pids = named_pids(c, claims, hist)) == NULL)
            goto done;
        row = PyTuple_Pack(13, c->kind, c->number, c->zero, tid, home ? Py_True : Py_False, Py_True, offset,
                           Py_False, claims, hist, pids, Py_None, Py_None);
        goto done;
    }
    if (r->kind == REC_PACKED) {
        const int64_t claimed[3] = {r->pid, r->prev, r->next};
        for (int i = 0; i < 3; i++)
            if (claimed[i] != -1 && add_pid(claims, claimed[i]) < 0) /* state.NO_PRODUCER_ID */
                goto done;
    } else {
        static const int at[3] = {1, 8, 9}; /* F_PRODUCER_ID, F_PREVIOUS_PRODUCER_ID, F_NEXT_PRODUCER_ID */
        for (int i = 0; i < 3; i++)
            if (add_pid_obj(claims, PyTuple_GET_ITEM(r->obj, at[i]), c->no_pid, Py_NE) < 0)
                goto done;
    }
    if ((pids = named_pids(c, claims, hist)) == NULL)
        goto done;
    if (late == -2 && (late = id_timed_out(c, r)) < 0)
        goto done;
    { /* the value pickled by pickle.dumps (the serialiser is the library's, never written here) */
        PyObject *f = prec_fields(r);
        if (f == NULL)
            goto done;
        PyObject *args[2] = {f, c->proto};
        blob = PyObject_Vectorcall(c->dumps, args, 2, NULL);
        Py_DECREF(f);
        if (blob == NULL)
            goto done;
    }
    row = PyTuple_Pack(13, c->kind, c->number, c->zero, tid, home ? Py_True : Py_False, Py_False, offset,
                       late ? Py_True : Py_False, claims, hist, pids, blob, Py_None);
done:
    Py_DECREF(tid);
    Py_XDECREF(offset);
    Py_XDECREF(claims);
    Py_XDECREF(hist);
    Py_XDECREF(pids);
    Py_XDECREF(blob);
    return row;
}

/* id_rows(kind, number, now, misplaced, states, two_pc_timeout, is_timed_out, dumps, protocol, named, tids,
 * out) -> None: the ID row of each id the filter keeps (every id when named and tids are None) appended to
 * out, in first-seen order (tasks._fold_one's loop, tasks._id_rows the reference) */
static PyObject *tt_id_rows(TxnTable *t, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 12) {
        PyErr_SetString(PyExc_TypeError, "id_rows() takes 12 arguments");
        return NULL;
    }
    PyObject *out = args[11];
    if (!PyList_Check(out)) {
        PyErr_SetString(PyExc_TypeError, "id_rows(): out is a list");
        return NULL;
    }
    if (args[9] != Py_None && !PyAnySet_Check(args[9])) {
        PyErr_SetString(PyExc_TypeError, "id_rows(): named is a set, a frozenset or None");
        return NULL;
    }
    id_rows_ctx c = {args[0], args[1], NULL, args[3], args[7], args[8], NULL, args[9], args[10], 1, NULL, 0,
                     {{Py_None, args[4], args[2], args[6], 0, 0, 1}, 0}};
    c.check_misplaced = !(PyDict_CheckExact(c.misplaced) && PyDict_GET_SIZE(c.misplaced) == 0);
    int every = c.named == Py_None && c.tids == Py_None;
    timed_out_ctx *tc = &c.late.c;
    if (rule_numbers(tc->now_obj, args[5], &tc->now, &tc->now_fits, &tc->two_pc) < 0)
        return NULL;
    if (state_mask(tc->states, &c.late.states) < 0)
        return NULL;
    if (c.named != Py_None && named_numbers(&c) < 0) {
        PyMem_Free(c.named_i64);
        return NULL;
    }
    c.zero = PyLong_FromLong(0);
    c.no_pid = PyLong_FromLong(-1);
    PyObject *res = c.zero == NULL || c.no_pid == NULL ? NULL : Py_None;
    for (Py_ssize_t e = 0; res != NULL && e < t->n; e++) {
        int late = -2;
        PyObject *tid = NULL;
        int want = every ? 1 : id_wanted(&c, t, &t->ents[e], &late, &tid);
        if (want <= 0) {
            Py_XDECREF(tid);
            if (want < 0)
                res = NULL;
            continue;
        }
        PyObject *row = id_row(&c, t, &t->ents[e], late, tid);
        if (row == NULL || PyList_Append(out, row) < 0)
            res = NULL;
        Py_XDECREF(row);
    }
    PyMem_Free(c.named_i64);
    Py_XDECREF(c.zero);
    Py_XDECREF(c.no_pid);
    return Py_XNewRef(res);
}

static PyMethodDef co_methods[] = {
    {"txn_fold", (PyCFunction)(void (*)(void))co_txn_fold, METH_FASTCALL,
     "txn_fold(buf, pos, end, log_start, log_end, file, table) -> (next_pos, status)"},
    {"fold_values", (PyCFunction)(void (*)(void))co_fold_values, METH_FASTCALL,
     "fold_values(latest, skip, partition, coordinator_id, wanted, state_names, row_of, out) -> None "
     "(coordinator.fold_values)"},
    {"timed_out_of", (PyCFunction)(void (*)(void))co_timed_out_of, METH_FASTCALL,
     "timed_out_of(latest, skip, partition, states, now, two_pc_timeout, is_timed_out, out) -> None "
     "(coordinator.timed_out_of)"},
    {"sorted_rows", (PyCFunction)(void (*)(void))co_sorted_rows, METH_FASTCALL,
     "sorted_rows(folds, wanted, state_names, row_of) -> SortedRows (coordinator.sorted_rows)"},
    {"claim_producers", (PyCFunction)(void (*)(void))co_claim_producers, METH_FASTCALL,
     "claim_producers(table, skip, current, from_history) -> None (coordinator.claim_producers)"},
    {"producer_ids_of", (PyCFunction)(void (*)(void))co_producer_ids_of, METH_FASTCALL,
     "producer_ids_of(table, skip, out) -> None (coordinator.producer_ids_of)"},
    {"java_string_hash", co_java_hash, METH_O, "java_string_hash(s) -> int (String.hashCode)"},
    {NULL, NULL, 0, NULL},
};

static int
co_exec(PyObject *m)
{
    co_state *st = PyModule_GetState(m);
    if (wire_exec(m) < 0)
        return -1;
    st->table_type = (PyTypeObject *)PyType_FromModuleAndSpec(m, &tt_spec, NULL);
    if (st->table_type == NULL)
        return -1;
    st->iter_type = (PyTypeObject *)PyType_FromModuleAndSpec(m, &tti_spec, NULL);
    if (st->iter_type == NULL)
        return -1;
    st->rows_type = (PyTypeObject *)PyType_FromModuleAndSpec(m, &sr_spec, NULL);
    if (st->rows_type == NULL)
        return -1;
    return PyModule_AddType(m, st->table_type);
}

static int
co_traverse(PyObject *m, visitproc visit, void *arg)
{
    co_state *st = PyModule_GetState(m);
    if (st != NULL) {
        Py_VISIT(st->table_type);
        Py_VISIT(st->iter_type);
        Py_VISIT(st->rows_type);
    }
    return 0;
}

static int
co_clear(PyObject *m)
{
    co_state *st = PyModule_GetState(m);
    if (st != NULL) {
        Py_CLEAR(st->table_type);
        Py_CLEAR(st->iter_type);
        Py_CLEAR(st->rows_type);
        tl_slots_free(st->slots);
        st->slots = NULL;
    }
    return 0;
}

static void
co_free(void *m)
{
    co_clear((PyObject *)m);
}

static PyModuleDef_Slot co_slots[] = {
    {Py_mod_exec, co_exec},
#ifdef Py_mod_multiple_interpreters
    {Py_mod_multiple_interpreters, Py_MOD_PER_INTERPRETER_GIL_SUPPORTED},
#endif
    {0, NULL}};

static struct PyModuleDef co_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "kafkatx.coordinator._coordinator",
    .m_doc = "Compiled __transaction_state load for kafkatx.coordinator.state_manager (optional; see _coordinator.c).",
    .m_size = sizeof(co_state),
    .m_methods = co_methods,
    .m_slots = co_slots,
    .m_traverse = co_traverse,
    .m_clear = co_clear,
    .m_free = co_free,
};

PyMODINIT_FUNC
PyInit__coordinator(void)
{
    return PyModuleDef_Init(&co_module);
}
