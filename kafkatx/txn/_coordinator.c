/* The coordinator's load of one __transaction_state segment, compiled (issue 25).
 *
 * TransactionStateManager.loadTransactionMetadata reads every batch of a __transaction_state
 * partition and keeps the latest value per transactional id. kafkatx.txn.coordinator.TxnFold is
 * that fold in Python (one record at a time: TxnFold.record); txn_fold here is its C twin over the
 * batches of one segment buffer, updating the very same state (TxnFold.latest, TxnFold.history,
 * the findings list), so a segment may be folded partly here and partly in Python:
 *
 *   txn_fold(buf, pos, end, log_start, log_end, partition, n, latest, history, history_for,
 *            findings, file, valid) -> (next_pos, status)
 *
 * status 0: every batch up to end was folded; 1: the batch at next_pos starts at or past log_end
 * (the loader stops: TxnLoadWindow); 2: the batch at next_pos is one for Python (anything this loop
 * does not take as it is: a batch that does not frame as a whole magic-2 batch, a bad CRC (Python
 * reports it), a compressed batch, records with headers or bytes it does not read to the end, a key
 * or value the compiled txn_log_decode leaves to Python: tl_decode of format/_txn_log.h, its very code,
 * run on the record's bytes in the buffer; the values of a run of records with the same partition bytes
 * share one partitions tuple, as equal tuples). Python folds that one batch with
 * TxnFold.record and calls again after it: both paths give the same answers, in the same order.
 *
 * Per record (TxnFold.record, stated once there): the first record of an id checks the id hashes to
 * this partition (TransactionStateManager.partitionFor: Utils.abs(String.hashCode) % n, hash over
 * UTF-16 code units, as txn_log.java_string_hash); a value after a value whose state is not one of
 * TransactionState.validPreviousStates of the new state is an illegal transition (state.VALID_TRANSITIONS,
 * handed in as the 'valid' frozenset of (previous, new) pairs); findings go to the list as tuples
 * (0, tid, expected, offset, position, file) / (1, tid, before_offset, before_fields, offset, fields,
 * position, file) that TxnFold turns into its Finding objects in place. History keeps every record of
 * the ids in history_for (None: all) and, for the others, the first record of each producer id: one
 * record as the (offset, fields) item itself, more as a list of them, none as an empty list; history None
 * (coordinator.NO_HISTORY): nothing but the latest record. */

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

/* TransactionStateManager.partitionFor (txn_log.coordinator_partition) */
static long partition_for(PyObject *tid, long n)
{
    int32_t h = java_hash(tid);
    long a = h == INT32_MIN ? 0 : (h < 0 ? -(long)h : (long)h);
    return a % n;
}

static long state_of(PyObject *fields)
{
    return PyLong_AsLong(PyTuple_GET_ITEM(fields, 4));
}

/* TxnFold.record's producer-id test for an id whose history keeps the first record per producer id;
 * kept as in TxnFold.history (coordinator.history_items): NULL (none yet), one (offset, fields) tuple,
 * or a list of them */
static int has_producer(PyObject *kept, PyObject *pid)
{
    if (kept == NULL)
        return 0;
    int one = PyTuple_Check(kept);
    Py_ssize_t k = one ? 1 : PyList_GET_SIZE(kept);
    for (Py_ssize_t i = 0; i < k; i++) {
        PyObject *f = PyTuple_GET_ITEM(one ? kept : PyList_GET_ITEM(kept, i), 1);
        if (f == Py_None)
            continue;
        int eq = PyObject_RichCompareBool(PyTuple_GET_ITEM(f, 1), pid, Py_EQ);
        if (eq != 0)
            return eq;
    }
    return 0;
}

/* TxnFold.record: one record folded; 0 or -1 with an exception */
static int fold_record(PyObject *tid, PyObject *offset, PyObject *fields, long partition, long n,
                       PyObject *latest, PyObject *history, PyObject *history_for, PyObject *findings,
                       PyObject *file, PyObject *position, PyObject *valid_pairs,
                       const unsigned char table[N_STATES][N_STATES])
{
    PyObject *before = PyDict_GetItemWithError(latest, tid); /* borrowed; NULL: first sight */
    if (before == NULL) {
        if (PyErr_Occurred())
            return -1;
        long expected = partition_for(tid, n);
        if (expected != partition) {
            PyObject *ev = Py_BuildValue("(iOlOOO)", 0, tid, expected, offset, position, file);
            if (ev == NULL || PyList_Append(findings, ev) < 0) {
                Py_XDECREF(ev);
                return -1;
            }
            Py_DECREF(ev);
        }
    }
    if (fields != Py_None && before != NULL && PyTuple_GET_ITEM(before, 1) != Py_None) {
        PyObject *bf = PyTuple_GET_ITEM(before, 1);
        long prev = state_of(bf), next = state_of(fields);
        if ((prev == -1 || next == -1) && PyErr_Occurred())
            return -1;
        int ok;
        if (prev >= 0 && prev < N_STATES && next >= 0 && next < N_STATES) {
            ok = table[prev][next];
        } else { /* a state number Kafka does not define: the set answers (no such pair in it) */
            PyObject *pair = Py_BuildValue("(ll)", prev, next);
            if (pair == NULL)
                return -1;
            ok = PySet_Contains(valid_pairs, pair);
            Py_DECREF(pair);
            if (ok < 0)
                return -1;
        }
        if (!ok) {
            PyObject *ev = Py_BuildValue("(iOOOOOOO)", 1, tid, PyTuple_GET_ITEM(before, 0), bf, offset, fields,
                                         position, file);
            if (ev == NULL || PyList_Append(findings, ev) < 0) {
                Py_XDECREF(ev);
                return -1;
            }
            Py_DECREF(ev);
        }
    }
    PyObject *item = PyTuple_Pack(2, offset, fields);
    if (item == NULL)
        return -1;
    if (history == Py_None) { /* NO_HISTORY: the latest record only */
        int r = PyDict_SetItem(latest, tid, item);
        Py_DECREF(item);
        return r;
    }
    PyObject *kept = PyDict_GetItemWithError(history, tid); /* borrowed; NULL: none yet */
    if (kept == NULL && PyErr_Occurred()) {
        Py_DECREF(item);
        return -1;
    }
    int keep_all = 1;
    if (history_for != Py_None) {
        keep_all = PySequence_Contains(history_for, tid);
        if (keep_all < 0) {
            Py_DECREF(item);
            return -1;
        }
    }
    int append = keep_all;
    if (!keep_all && fields != Py_None) {
        int has = has_producer(kept, PyTuple_GET_ITEM(fields, 1));
        if (has < 0) {
            Py_DECREF(item);
            return -1;
        }
        append = !has;
    }
    /* TxnFold.record: one record kept is the item itself, more a list of them; seen, none kept: [] */
    int r = 0;
    if (append && kept != NULL && PyList_Check(kept)) {
        r = PyList_Append(kept, item);
    } else if (append || kept == NULL) {
        PyObject *value;
        if (!append)
            value = PyList_New(0);
        else if (kept == NULL)
            value = (Py_INCREF(item), item);
        else if ((value = PyList_New(2)) != NULL) { /* kept: the one item so far */
            Py_INCREF(kept);
            Py_INCREF(item);
            PyList_SET_ITEM(value, 0, kept);
            PyList_SET_ITEM(value, 1, item);
        }
        r = value == NULL ? -1 : PyDict_SetItem(history, tid, value);
        Py_XDECREF(value);
    }
    if (r < 0) {
        Py_DECREF(item);
        return -1;
    }
    r = PyDict_SetItem(latest, tid, item);
    Py_DECREF(item);
    return r;
}

static PyObject *
co_txn_fold(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *buf, *latest, *history, *history_for, *findings, *file, *valid;
    Py_ssize_t pos, end;
    int64_t log_start, log_end;
    long partition, n;
    if (wire_args("txn_fold", args, nargs, "OnnLLllOOOOOO", &buf, &pos, &end, &log_start, &log_end, &partition, &n,
                  &latest, &history, &history_for, &findings, &file, &valid) < 0)
        return NULL;
    if (!PyDict_Check(latest) || !(history == Py_None || PyDict_Check(history)) || !PyList_Check(findings) || n <= 0 ||
        !PyFrozenSet_Check(valid)) {
        PyErr_SetString(PyExc_TypeError,
                        "txn_fold(): latest a dict, history a dict or None, findings a list, n > 0, valid a frozenset");
        return NULL;
    }
    unsigned char table[N_STATES][N_STATES];
    if (valid_table(valid, table) < 0)
        return NULL;
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
    if (recs == NULL) {
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    int status = 0;
    int failed = 0;
    tl_cache cache = {NULL, 0, 0, NULL}; /* the last partitions parsed: its bytes lie in this view */
    while (pos < end) {
        const uint8_t *b = d + pos;
        Py_ssize_t size = v2_batch_size(b, end - pos); /* read_batch_header's rules; 0: Python frames it */
        if (size == 0) {
            status = 2;
            break;
        }
        int64_t base = be64(b);
        int64_t last_offset = base + be32(b + 23); /* v2_batch_size checked it fits */
        if (base >= log_end) {
            status = 1;
            break;
        }
        int16_t attributes = be16(b + 21);
        int32_t count = be32(b + 57);
        if (last_offset < log_start || (attributes & ATTR_CONTROL) || count == 0) {
            pos += size; /* not read by the loader, a control batch, or emptied by the cleaner */
            continue;
        }
        if ((attributes & ATTR_CODEC_MASK) != 0 || count < 0 || count > MAX_RECORDS ||
            (int64_t)count * MIN_RECORD > size - HEADER_SIZE) {
            status = 2;
            break;
        }
        /* the coordinator's loader does not check CRCs; Python reports a bad one (and folds the batch) */
        if (crc32c_impl(0, b + CRC_START, (size_t)(size - CRC_START)) != be32u(b + 17)) {
            status = 2;
            break;
        }
        if (scan_records(b + HEADER_SIZE, size - HEADER_SIZE, count, base, recs) < 0) {
            status = 2;
            break;
        }
        /* decode every keyed record first: one the compiled decoder leaves makes it Python's batch */
        PyObject **decoded = PyMem_Calloc((size_t)count * 2, sizeof(PyObject *)); /* tid, fields per record */
        if (decoded == NULL) {
            PyErr_NoMemory();
            failed = 1;
            break;
        }
        int python = 0;
        for (int32_t k = 0; k < count && !python && !failed; k++) {
            rec_t *r = &recs[k];
            if (r->key == NULL)
                continue; /* no key: not a transaction log record (the loader skips it too) */
            int got = tl_decode(r->key, r->klen, r->val, r->vlen, &cache, &decoded[2 * k], &decoded[2 * k + 1]);
            if (got < 0)
                failed = 1;
            else if (got == 0)
                python = 1; /* the compiled decoder leaves this record to Python */
        }
        if (!python && !failed) {
            PyObject *position = PyLong_FromSsize_t(pos);
            if (position == NULL)
                failed = 1;
            for (int32_t k = 0; k < count && !failed; k++) {
                if (decoded[2 * k] == NULL)
                    continue;
                PyObject *offset = PyLong_FromLongLong(recs[k].offset);
                if (offset == NULL ||
                    fold_record(decoded[2 * k], offset, decoded[2 * k + 1], partition, n, latest, history,
                                history_for, findings, file, position, valid,
                                (const unsigned char (*)[N_STATES])table) < 0)
                    failed = 1;
                Py_XDECREF(offset);
            }
            Py_XDECREF(position);
        }
        for (int32_t k = 0; k < 2 * count; k++)
            Py_XDECREF(decoded[k]);
        PyMem_Free(decoded);
        if (failed)
            break;
        if (python) {
            status = 2;
            break;
        }
        pos += size;
    }
    tl_cache_clear(&cache);
    PyMem_Free(recs);
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
 * built here for the record shapes the fold makes (a state number within state_names, int timestamps,
 * no partition or one topic with one partition: "topic-N"); any other record's row is row_of(id, fields,
 * partition, coordinator_id) itself (transaction_values: several partitions are sorted and made distinct
 * there). */
static int
nonneg_or_none(PyObject *v, PyObject **out)
{
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (x == -1 && PyErr_Occurred())
        return -1;
    int neg = overflow ? overflow < 0 : x < 0;
    *out = neg ? Py_None : v;
    Py_INCREF(*out);
    return 0;
}

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

/* the row of one live record: built here (1) or left to row_of (0); -1 with an exception */
static int
simple_row(PyObject *tid, PyObject *f, PyObject *partition, PyObject *coordinator_id, PyObject *state_names,
           PyObject **row)
{
    *row = NULL;
    if (!PyTuple_Check(f) || PyTuple_GET_SIZE(f) != TL_FIELDS)
        return 0;
    PyObject *state = PyTuple_GET_ITEM(f, 4), *last = PyTuple_GET_ITEM(f, 6), *start = PyTuple_GET_ITEM(f, 7);
    if (!PyLong_CheckExact(state) || !PyLong_CheckExact(last) || !PyLong_CheckExact(start))
        return 0;
    long number = PyLong_AsLong(state);
    if (number == -1 && PyErr_Occurred()) {
        PyErr_Clear(); /* out of range: row_of's */
        return 0;
    }
    if (number < 0 || number >= PyTuple_GET_SIZE(state_names))
        return 0;
    PyObject *names = simple_partition_names(PyTuple_GET_ITEM(f, 5));
    if (names == NULL)
        return PyErr_Occurred() ? -1 : 0;
    PyObject *start_v, *last_v;
    if (nonneg_or_none(start, &start_v) < 0) {
        Py_DECREF(names);
        return -1;
    }
    if (nonneg_or_none(last, &last_v) < 0) {
        Py_DECREF(names);
        Py_DECREF(start_v);
        return -1;
    }
    PyObject *t = PyTuple_New(10);
    if (t == NULL) {
        Py_DECREF(names);
        Py_DECREF(start_v);
        Py_DECREF(last_v);
        return -1;
    }
    PyObject *name = PyTuple_GET_ITEM(state_names, number);
    PyObject *items[10] = {tid, PyTuple_GET_ITEM(f, 1), PyTuple_GET_ITEM(f, 2), name, PyTuple_GET_ITEM(f, 3),
                           start_v, last_v, names, partition, coordinator_id};
    for (int i = 0; i < 10; i++) {
        if (i != 5 && i != 6 && i != 7) /* start_v, last_v and names are new references already */
            Py_INCREF(items[i]);
        PyTuple_SET_ITEM(t, i, items[i]);
    }
    *row = t;
    return 1;
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

/* fold_values' row of one live record: in wanted (None: all), coordinator.transaction_values */
static int
values_row(void *ctx, PyObject *tid, PyObject *item, PyObject **made)
{
    values_ctx *c = ctx;
    PyObject *f = PyTuple_GET_ITEM(item, 1);
    if (c->wanted != Py_None) {
        PyObject *state = PySequence_GetItem(f, 4); /* f[F_STATE] */
        int in = state == NULL ? -1 : PySequence_Contains(c->wanted, state);
        Py_XDECREF(state);
        if (in <= 0)
            return in;
    }
    int built = simple_row(tid, f, c->partition, c->coordinator_id, c->state_names, made);
    if (built == 0)
        *made = PyObject_CallFunctionObjArgs(c->row_of, tid, f, c->partition, c->coordinator_id, NULL);
    return built < 0 || *made == NULL ? -1 : 1;
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
    return each_live(args[0], args[1], "fold_values", values_row, &c, args[7]);
}

/* rules.is_timed_out, restated (TransactionStateManager.timedOutTransactions: txnStartTimestamp +
 * txnTimeoutMs < now, a two-phase-commit transaction (TransactionMetadata.isDistributedTwoPhaseCommitTxn:
 * timeout == Integer.MAX_VALUE) never; no start (negative): not timed out) for ints that fit 64 bits:
 * 1 or 0; -1 when the numbers do not fit (the caller asks the Python predicate) */
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
    if (t == two_pc)
        return 0;
    long long deadline;
    if (s < 0)
        return 0;
    if (__builtin_add_overflow(s, t, &deadline))
        return -1;
    return now > deadline;
}

typedef struct {
    PyObject *partition, *states, *now_obj, *rule;
    long long now, two_pc;
    int now_fits; /* 0: a now beyond 64 bits, the rule itself for every record */
} timed_out_ctx;

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
    PyObject *start = PyTuple_GET_ITEM(f, 7), *timeout = PyTuple_GET_ITEM(f, 3);
    int late = c->now_fits ? is_timed_out(start, timeout, c->now, c->two_pc) : -1;
    if (late < 0) { /* numbers the restated rule does not take: the rule itself */
        PyObject *r = PyObject_CallFunctionObjArgs(c->rule, start, timeout, c->now_obj, NULL);
        late = r == NULL ? -1 : PyObject_IsTrue(r);
        Py_XDECREF(r);
    }
    if (late <= 0)
        return late;
    *made = PyTuple_Pack(4, tid, PyTuple_GET_ITEM(item, 0), f, c->partition);
    return *made == NULL ? -1 : 1;
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
    c.two_pc = PyLong_AsLongLong(args[5]);
    if (c.two_pc == -1 && PyErr_Occurred())
        return NULL;
    c.now = PyLong_AsLongLong(c.now_obj);
    if (c.now == -1 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError))
            return NULL;
        PyErr_Clear();
        c.now_fits = 0;
    }
    return each_live(args[0], args[1], "timed_out_of", timed_out_row, &c, args[7]);
}

static PyMethodDef co_methods[] = {
    {"txn_fold", (PyCFunction)(void (*)(void))co_txn_fold, METH_FASTCALL,
     "txn_fold(buf, pos, end, log_start, log_end, partition, n, latest, history, history_for, findings, file, "
     "decode, valid) -> (next_pos, status)"},
    {"fold_values", (PyCFunction)(void (*)(void))co_fold_values, METH_FASTCALL,
     "fold_values(latest, skip, partition, coordinator_id, wanted, state_names, row_of, out) -> None "
     "(coordinator.fold_values)"},
    {"timed_out_of", (PyCFunction)(void (*)(void))co_timed_out_of, METH_FASTCALL,
     "timed_out_of(latest, skip, partition, states, now, two_pc_timeout, is_timed_out, out) -> None "
     "(coordinator.timed_out_of)"},
    {"java_string_hash", co_java_hash, METH_O, "java_string_hash(s) -> int (String.hashCode)"},
    {NULL, NULL, 0, NULL},
};

static int
co_exec(PyObject *m)
{
    return wire_exec(m);
}

static PyModuleDef_Slot co_slots[] = {
    {Py_mod_exec, co_exec},
#ifdef Py_mod_multiple_interpreters
    {Py_mod_multiple_interpreters, Py_MOD_PER_INTERPRETER_GIL_SUPPORTED},
#endif
    {0, NULL}};

static struct PyModuleDef co_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "kafkatx.txn._coordinator",
    .m_doc = "Compiled __transaction_state load for kafkatx.txn.coordinator (optional; see _coordinator.c).",
    .m_size = 0,
    .m_methods = co_methods,
    .m_slots = co_slots,
};

PyMODINIT_FUNC
PyInit__coordinator(void)
{
    return PyModuleDef_Init(&co_module);
}
