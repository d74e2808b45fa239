/*
 * kafkatx.txn._replay -- the compiled producer-state fold of kafkatx/txn/fold.py.
 *
 *   replay_setup(Entry, CompletedTxn, "ABORT", "COMMIT") -> None
 *   replay_fold(buf, pos, hi, producers, start, end, stop, check_data_crc, spans, span_floor,
 *               completed, topic, partition, max_bytes) -> (pos, batches, seen, reason)
 *       kafkatx.txn.fold.fold_batches: applies a segment's batches to the
 *       replay's per-producer _Entry objects (their slots written directly), returning
 *       at the first batch the Python replay must handle. See sp_replay_fold.
 *
 * Transaction layer: it includes the format layer's wire helpers (kafkatx/format/_wire.h) and
 * imports no other compiled module.
 */
#include "../format/_wire.h"

/* ----------------------------------------------------------------- replay_fold */

/* kafkatx.txn.replay._Entry (a plain __slots__ class: the replay's mutable per-producer state)
 * and kafkatx.txn.replay.CompletedTxn (a frozen slotted dataclass), learnt by replay_setup(). */
#define N_ENT 10
static const char *const ent_names[N_ENT] = {
    "producer_id", "epoch", "last_seq", "last_offset", "last_ts", "coord_epoch",
    "txn_first", "txn_last", "txn_start_ts", "txn_last_ts"};
enum { E_PID, E_EPOCH, E_SEQ, E_LOFF, E_LTS, E_COORD, E_TFIRST, E_TLAST, E_TSTART, E_TLASTTS };
#define N_ENT_NULLABLE_FROM E_TFIRST /* the txn_* slots may hold None */

#define N_DONE 12
static const char *const done_names[N_DONE] = {
    "topic", "partition", "producer_id", "producer_epoch", "first_offset", "last_offset", "outcome",
    "marker_offset", "coordinator_epoch", "start_timestamp", "end_timestamp", "last_stable_offset"};
enum { D_TOPIC, D_PART, D_PID, D_EPOCH, D_FIRST, D_LAST, D_OUTCOME, D_MARKER, D_COORD, D_START, D_END, D_LSO };

static PyTypeObject *entry_type = NULL;
static Py_ssize_t ent_off[N_ENT];
static PyTypeObject *done_type = NULL;
static Py_ssize_t done_off[N_DONE];
static PyObject *outcome_str[2] = {NULL, NULL}; /* [ABORT, COMMIT]: ControlType 0 and 1 */

static PyObject *
sp_replay_setup(PyObject *self, PyObject *args)
{
    PyObject *ecls, *dcls, *abort_s, *commit_s;
    if (!PyArg_ParseTuple(args, "OOUU:replay_setup", &ecls, &dcls, &abort_s, &commit_s))
        return NULL;
    Py_ssize_t eoff[N_ENT], doff[N_DONE];
    if (resolve_slots(ecls, ent_names, N_ENT, eoff) < 0 || resolve_slots(dcls, done_names, N_DONE, doff) < 0)
        return NULL;
    Py_INCREF(ecls);
    Py_INCREF(dcls);
    Py_INCREF(abort_s);
    Py_INCREF(commit_s);
    Py_XSETREF(entry_type, (PyTypeObject *)ecls);
    Py_XSETREF(done_type, (PyTypeObject *)dcls);
    Py_XSETREF(outcome_str[0], abort_s);
    Py_XSETREF(outcome_str[1], commit_s);
    memcpy(ent_off, eoff, sizeof eoff);
    memcpy(done_off, doff, sizeof doff);
    Py_RETURN_NONE;
}

/* One producer's state while the call runs: loaded from its _Entry on first touch, written
 * back (and, for a new producer, created and put in the dict) before the call returns. */
typedef struct {
    int64_t pid;
    PyObject *obj;       /* the _Entry (owned); NULL: a producer first seen in this call */
    int64_t v[N_ENT];    /* v[E_PID] unused */
    uint8_t has[N_ENT];  /* 0: the slot holds None (txn_* slots only) */
    int dirty;
    Py_ssize_t open_at;  /* index in the open-transaction list, -1 when none (tracked with a sink only) */
} rf_ent;

typedef struct {
    PyObject *producers;                 /* dict[int, _Entry] */
    rf_ent *ents;                        /* in order of first touch */
    Py_ssize_t n, cap;
    Py_ssize_t *index;                   /* open addressing: pid -> ents index, -1 empty */
    Py_ssize_t mask;
    Py_ssize_t *open;                    /* ents indexes of producers with an open transaction */
    Py_ssize_t nopen;
    int track_open;
} rf_table;

enum { RF_FOUND = 0, RF_ABSENT = -1, RF_ODD = -2, RF_ERROR = -3 };

static Py_ssize_t
rf_slot(rf_table *t, int64_t pid)
{
    Py_ssize_t i = (Py_ssize_t)(((uint64_t)pid * 0x9E3779B97F4A7C15ull) >> 20) & t->mask;
    while (t->index[i] >= 0 && t->ents[t->index[i]].pid != pid)
        i = (i + 1) & t->mask;
    return i;
}

static int
rf_grow(rf_table *t)
{
    if (t->n < t->cap && (t->n + 1) * 2 <= t->mask + 1)
        return 0;
    if (t->n >= t->cap) {
        Py_ssize_t nc = t->cap * 2;
        rf_ent *ne = PyMem_Realloc(t->ents, sizeof(rf_ent) * (size_t)nc);
        Py_ssize_t *no = PyMem_Realloc(t->open, sizeof(Py_ssize_t) * (size_t)nc);
        if (ne != NULL)
            t->ents = ne;
        if (no != NULL)
            t->open = no;
        if (ne == NULL || no == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        t->cap = nc;
    }
    if ((t->n + 1) * 2 > t->mask + 1) {
        Py_ssize_t nmask = t->mask * 2 + 1;
        Py_ssize_t *ni = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(nmask + 1));
        if (ni == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        for (Py_ssize_t i = 0; i <= nmask; i++)
            ni[i] = -1;
        PyMem_Free(t->index);
        t->index = ni;
        t->mask = nmask;
        for (Py_ssize_t k = 0; k < t->n; k++)
            t->index[rf_slot(t, t->ents[k].pid)] = k;
    }
    return 0;
}

/* An int slot that fits int64 (1), else 0 (the caller leaves the batch to Python). */
static int
rf_int(PyObject *o, int64_t *out)
{
    if (o == NULL || !PyLong_Check(o))
        return 0;
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow || (v == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    *out = v;
    return 1;
}

static void
rf_open_add(rf_table *t, Py_ssize_t k)
{
    if (t->track_open && t->ents[k].open_at < 0) {
        t->ents[k].open_at = t->nopen;
        t->open[t->nopen++] = k;
    }
}

static void
rf_open_remove(rf_table *t, Py_ssize_t k)
{
    Py_ssize_t at = t->ents[k].open_at;
    if (at < 0)
        return;
    Py_ssize_t moved = t->open[--t->nopen];
    t->open[at] = moved;
    t->ents[moved].open_at = at;
    t->ents[k].open_at = -1;
}

/* The table index of pid's state (RF_FOUND..: >= 0), loading it from the dict on first touch;
 * RF_ABSENT when the dict has no such producer; RF_ODD when its _Entry holds something other
 * than what the replay writes (left to Python); RF_ERROR with a Python exception set. */
static Py_ssize_t
rf_get(rf_table *t, int64_t pid, PyObject *known)
{
    Py_ssize_t s = rf_slot(t, pid);
    if (t->index[s] >= 0)
        return t->index[s];
    PyObject *obj = known;
    if (obj == NULL) {
        PyObject *key = PyLong_FromLongLong(pid);
        if (key == NULL)
            return RF_ERROR;
        obj = PyDict_GetItemWithError(t->producers, key); /* borrowed */
        Py_DECREF(key);
        if (obj == NULL)
            return PyErr_Occurred() ? RF_ERROR : RF_ABSENT;
    }
    if (!Py_IS_TYPE(obj, entry_type))
        return RF_ODD;
    rf_ent e;
    memset(&e, 0, sizeof e);
    e.pid = pid;
    e.open_at = -1;
    for (int i = 0; i < N_ENT; i++) {
        PyObject *v = SLOT(obj, ent_off[i]);
        if (i >= N_ENT_NULLABLE_FROM && v == Py_None)
            continue;
        if (!rf_int(v, &e.v[i]))
            return RF_ODD;
        e.has[i] = 1;
    }
    if (e.v[E_PID] != pid)
        return RF_ODD;
    if (rf_grow(t) < 0)
        return RF_ERROR;
    s = rf_slot(t, pid);
    e.obj = Py_NewRef(obj);
    Py_ssize_t k = t->n++;
    t->ents[k] = e;
    t->index[s] = k;
    if (e.has[E_TFIRST])
        rf_open_add(t, k);
    return k;
}

/* A producer the dict does not hold: _Entry(pid)'s values, created in the dict at write-back. */
static Py_ssize_t
rf_new(rf_table *t, int64_t pid)
{
    if (rf_grow(t) < 0)
        return RF_ERROR;
    rf_ent e;
    memset(&e, 0, sizeof e);
    e.pid = pid;
    e.open_at = -1;
    e.v[E_EPOCH] = e.v[E_SEQ] = e.v[E_LOFF] = e.v[E_LTS] = e.v[E_COORD] = -1;
    e.has[E_PID] = e.has[E_EPOCH] = e.has[E_SEQ] = e.has[E_LOFF] = e.has[E_LTS] = e.has[E_COORD] = 1;
    e.dirty = 1;
    Py_ssize_t k = t->n++;
    t->ents[k] = e;
    t->index[rf_slot(t, pid)] = k;
    return k;
}

/* Write every changed producer back into its _Entry; producers first seen in this call are
 * made by calling the class (in the order they were seen: the dict's order is the Python
 * fold's) and put in the dict. */
static int
rf_flush(rf_table *t)
{
    for (Py_ssize_t k = 0; k < t->n; k++) {
        rf_ent *e = &t->ents[k];
        if (!e->dirty)
            continue;
        if (e->obj == NULL) {
            PyObject *key = PyLong_FromLongLong(e->pid);
            if (key == NULL)
                return -1;
            PyObject *obj = PyObject_CallOneArg((PyObject *)entry_type, key);
            if (obj == NULL || PyDict_SetItem(t->producers, key, obj) < 0) {
                Py_DECREF(key);
                Py_XDECREF(obj);
                return -1;
            }
            Py_DECREF(key);
            if (!Py_IS_TYPE(obj, entry_type)) {
                Py_DECREF(obj);
                PyErr_SetString(PyExc_TypeError, "the producer entry class made something else");
                return -1;
            }
            e->obj = obj;
        }
        for (int i = E_EPOCH; i < N_ENT; i++) {
            PyObject *v = e->has[i] ? PyLong_FromLongLong(e->v[i]) : Py_NewRef(Py_None);
            if (v == NULL)
                return -1;
            Py_XSETREF(SLOT(e->obj, ent_off[i]), v);
        }
        e->dirty = 0;
    }
    return 0;
}

static void
rf_free(rf_table *t)
{
    if (t->ents != NULL)
        for (Py_ssize_t k = 0; k < t->n; k++)
            Py_XDECREF(t->ents[k].obj);
    PyMem_Free(t->ents);
    PyMem_Free(t->index);
    PyMem_Free(t->open);
}

/* A CompletedTxn (a frozen slotted dataclass) for the transaction e's marker completes. */
static PyObject *
rf_completed(PyObject *topic, PyObject *partition, const rf_ent *e, int epoch, int ctype, int64_t marker,
             int64_t coord, int64_t end_ts, int64_t lso)
{
    PyObject *v[N_DONE] = {
        Py_NewRef(topic),
        Py_NewRef(partition),
        PyLong_FromLongLong(e->pid),
        PyLong_FromLong(epoch),
        PyLong_FromLongLong(e->v[E_TFIRST]),
        e->has[E_TLAST] ? PyLong_FromLongLong(e->v[E_TLAST]) : Py_NewRef(Py_None),
        Py_NewRef(outcome_str[ctype]),
        PyLong_FromLongLong(marker),
        PyLong_FromLongLong(coord),
        e->has[E_TSTART] ? PyLong_FromLongLong(e->v[E_TSTART]) : Py_NewRef(Py_None),
        PyLong_FromLongLong(end_ts),
        PyLong_FromLongLong(lso)};
    return new_slotted(done_type, done_off, v, N_DONE);
}

enum { RF_END = 0, RF_CHUNK = 1, RF_SLOW = 2 };

/* replay_fold(buf, pos, hi, producers, start, end, stop, check_data_crc, spans, span_floor,
 *             completed, topic, partition, max_bytes) -> (pos, batches, seen, reason)
 *
 * fold_batches in C: see kafkatx/txn/fold.py (fold._fold_py is the
 * pure-Python twin, batch for batch). Applies the batches of buf[pos:hi] to `producers` exactly
 * as the replay loop would (ProducerReplay.data / .marker), until a batch that needs Python
 * (reason RF_SLOW; the batch at the returned pos is not applied), max_bytes (RF_CHUNK) or hi
 * (RF_END). `batches` counts the batches applied (what the replay's `batches` counts), `seen`
 * the batches at or past `start`. */
static PyObject *
sp_replay_fold(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 14) {
        PyErr_SetString(PyExc_TypeError, "replay_fold() takes 14 arguments");
        return NULL;
    }
    if (entry_type == NULL || done_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "replay_setup() was not called");
        return NULL;
    }
    PyObject *producers = args[3], *spans = args[8], *sink = args[10], *topic = args[11], *partition = args[12];
    if (!PyDict_Check(producers) || (spans != Py_None && !PyList_Check(spans)) ||
        (sink != Py_None && !PyList_Check(sink))) {
        PyErr_SetString(PyExc_TypeError, "replay_fold(): producers must be a dict, spans and completed lists");
        return NULL;
    }
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    Py_ssize_t hi = PyLong_AsSsize_t(args[2]);
    int64_t start = PyLong_AsLongLong(args[4]);
    int64_t end = PyLong_AsLongLong(args[5]);
    int has_stop = args[6] != Py_None;
    int64_t stop = has_stop ? PyLong_AsLongLong(args[6]) : 0;
    int check_data_crc = PyObject_IsTrue(args[7]);
    int64_t span_floor = PyLong_AsLongLong(args[9]);
    Py_ssize_t max_bytes = PyLong_AsSsize_t(args[13]);
    if (PyErr_Occurred())
        return NULL;
    Py_buffer view;
    if (get_buffer(args[0], &view, pos < hi ? pos : hi, hi) < 0)
        return NULL;
    const uint8_t *base = (const uint8_t *)view.buf;
    rf_table t;
    memset(&t, 0, sizeof t);
    t.producers = producers;
    t.track_open = sink != Py_None;
    t.cap = 16;
    t.mask = 63;
    t.ents = PyMem_Malloc(sizeof(rf_ent) * (size_t)t.cap);
    t.open = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)t.cap);
    t.index = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(t.mask + 1));
    PyObject *result = NULL;
    Py_ssize_t batches = 0, seen = 0, scanned = 0;
    int reason = RF_END;
    if (t.ents == NULL || t.open == NULL || t.index == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i <= t.mask; i++)
        t.index[i] = -1;
    if (t.track_open) {
        /* The last stable offset of a completed transaction needs every open one: load them all. */
        Py_ssize_t it = 0;
        PyObject *key, *val;
        while (PyDict_Next(producers, &it, &key, &val)) {
            if (!Py_IS_TYPE(val, entry_type) || SLOT(val, ent_off[E_TFIRST]) == Py_None)
                continue;
            int64_t pid;
            Py_ssize_t k = rf_int(key, &pid) ? rf_get(&t, pid, val) : RF_ODD;
            if (k == RF_ERROR)
                goto done;
            if (k < 0) {
                reason = RF_SLOW;
                goto finish;
            }
        }
    }
    while (pos < hi) {
        if (scanned >= max_bytes) {
            reason = RF_CHUNK;
            break;
        }
        const uint8_t *h = base + pos;
        Py_ssize_t size = v2_batch_size(h, hi - pos);
        if (size == 0) {
            reason = RF_SLOW;
            break;
        }
        int64_t base_offset = be64(h);
        int32_t delta = be32(h + 23);
        int64_t last_offset;
        int16_t attr = be16(h + 21);
        int64_t max_ts = be64(h + 35);
        int64_t pid = be64(h + 43);
        int epoch = be16(h + 51);
        int32_t base_seq = be32(h + 53);
        int32_t records = be32(h + 57);
        int is_control = (attr & 0x20) != 0, is_txn = (attr & 0x10) != 0;
        if (__builtin_add_overflow(base_offset, (int64_t)delta, &last_offset)) {
            reason = RF_SLOW; /* Python's ints do not overflow: let it */
            break;
        }
#define CRC_OK() (crc32c_impl(0, h + CRC_START, (size_t)(size - CRC_START)) == be32u(h + 17))
        if (base_offset >= end) {
            /* Skipped by the replay, but the event source reads such a control record
             * (read_control_record raises on one it cannot read): leave those to Python. */
            if (is_control && pid >= 0 && records != 0 && CRC_OK()) {
                int ct;
                int64_t ce;
                if (!parse_control(h, size, &ct, &ce)) {
                    reason = RF_SLOW;
                    break;
                }
            }
            seen++;
            goto next;
        }
        if (has_stop && base_offset >= stop) {
            reason = RF_SLOW;
            break;
        }
        if (base_offset < start && last_offset < start)
            goto next;
        if (check_data_crc && !is_control && !CRC_OK()) {
            reason = RF_SLOW;
            break;
        }
        if (pid < 0)
            goto counted;
        if (is_control) {
            int ctype;
            int64_t coord;
            if (!CRC_OK()) {
                reason = RF_SLOW;
                break;
            }
            if (records == 0)
                goto counted;
            if (!parse_control(h, size, &ctype, &coord)) {
                reason = RF_SLOW;
                break;
            }
            if (ctype != 0 && ctype != 1)
                goto counted;
            Py_ssize_t k = rf_get(&t, pid, NULL);
            if (k == RF_ERROR)
                goto done;
            if (k == RF_ODD || base_offset == INT64_MAX) {
                reason = RF_SLOW;
                break;
            }
            if (k == RF_ABSENT ? (epoch < -1 || coord < -1)
                               : (epoch < t.ents[k].v[E_EPOCH] || coord < t.ents[k].v[E_COORD])) {
                reason = RF_SLOW; /* a stale marker: the finding is built in Python */
                break;
            }
            if (k == RF_ABSENT && (k = rf_new(&t, pid)) < 0)
                goto done;
            rf_ent *e = &t.ents[k];
            if (e->has[E_TFIRST]) {
                if (spans != Py_None && base_offset >= span_floor) {
                    PyObject *sp_ = Py_BuildValue("(LL)", (long long)e->v[E_TFIRST], (long long)base_offset);
                    if (sp_ == NULL)
                        goto done;
                    int rc = PyList_Append(spans, sp_);
                    Py_DECREF(sp_);
                    if (rc < 0)
                        goto done;
                }
                if (sink != Py_None) {
                    int64_t lso = 0;
                    int any = 0;
                    for (Py_ssize_t j = 0; j < t.nopen; j++) {
                        const rf_ent *o = &t.ents[t.open[j]];
                        if (o->pid != pid && (!any || o->v[E_TFIRST] < lso)) {
                            lso = o->v[E_TFIRST];
                            any = 1;
                        }
                    }
                    if (!any)
                        lso = base_offset + 1;
                    PyObject *c = rf_completed(topic, partition, e, epoch, ctype, base_offset, coord, max_ts, lso);
                    if (c == NULL)
                        goto done;
                    int rc = PyList_Append(sink, c);
                    Py_DECREF(c);
                    if (rc < 0)
                        goto done;
                }
            }
            if (epoch != e->v[E_EPOCH]) {
                /* ProducerStateEntry.maybeUpdateProducerEpoch */
                e->v[E_SEQ] = -1;
                e->v[E_LOFF] = -1;
            }
            e->v[E_EPOCH] = epoch;
            e->v[E_COORD] = coord;
            e->v[E_LTS] = max_ts;
            e->has[E_TFIRST] = e->has[E_TLAST] = e->has[E_TSTART] = e->has[E_TLASTTS] = 0;
            rf_open_remove(&t, k);
            e->dirty = 1;
            goto counted;
        }
        {
            Py_ssize_t k = rf_get(&t, pid, NULL);
            if (k == RF_ERROR)
                goto done;
            if (k == RF_ODD) {
                reason = RF_SLOW;
                break;
            }
            if (k == RF_ABSENT ? epoch < -1
                               : (epoch < t.ents[k].v[E_EPOCH] || (t.ents[k].has[E_TFIRST] && !is_txn))) {
                reason = RF_SLOW; /* producer-epoch / non-transactional-in-txn findings are built in Python */
                break;
            }
            if (k == RF_ABSENT && (k = rf_new(&t, pid)) < 0)
                goto done;
            rf_ent *e = &t.ents[k];
            e->v[E_EPOCH] = epoch;
            /* DefaultRecordBatch.incrementSequence (BatchHeader.last_sequence) */
            e->v[E_SEQ] = base_seq == -1 ? -1
                          : ((int64_t)base_seq > (int64_t)INT32_MAX - delta
                                 ? (int64_t)delta - ((int64_t)INT32_MAX - base_seq) - 1
                                 : (int64_t)base_seq + delta);
            e->v[E_LOFF] = last_offset;
            e->v[E_LTS] = max_ts;
            if (is_txn) {
                if (!e->has[E_TFIRST]) {
                    e->v[E_TFIRST] = base_offset;
                    e->v[E_TSTART] = max_ts;
                    e->has[E_TFIRST] = e->has[E_TSTART] = 1;
                    rf_open_add(&t, k);
                }
                e->v[E_TLAST] = last_offset;
                e->v[E_TLASTTS] = max_ts;
                e->has[E_TLAST] = e->has[E_TLASTTS] = 1;
            }
            e->dirty = 1;
        }
    counted:
        batches++;
        seen++;
    next:
        pos += size;
        scanned += size;
#undef CRC_OK
    }
finish:
    if (rf_flush(&t) < 0)
        goto done;
    result = Py_BuildValue("(nnni)", pos, batches, seen, reason);
done:
    PyBuffer_Release(&view);
    rf_free(&t);
    return result;
}


static PyMethodDef rp_methods[] = {
    {"replay_setup", (PyCFunction)sp_replay_setup, METH_VARARGS,
     "replay_setup(Entry, CompletedTxn, 'ABORT', 'COMMIT'): resolve slot offsets for replay_fold"},
    {"replay_fold", (PyCFunction)(void (*)(void))sp_replay_fold, METH_FASTCALL,
     "replay_fold(buf, pos, hi, producers, start, end, stop, check_data_crc, spans, span_floor, completed, "
     "topic, partition, max_bytes) -> (pos, batches, seen, reason)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef rp_module = {
    PyModuleDef_HEAD_INIT, "kafkatx.txn._replay",
    "Compiled producer-state fold for kafkatx.txn.replay (optional; see _replay.c).", -1, rp_methods};

PyMODINIT_FUNC
PyInit__replay(void)
{
    wire_crc_init();
    return PyModule_Create(&rp_module);
}
