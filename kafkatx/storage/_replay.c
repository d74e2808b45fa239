/*
 * kafkatx.storage._replay -- the compiled twin of kafkatx.storage.producer_state.PyProducerStateFold.
 *
 *   ProducerStateFold(entries=(), *, keep_completed=False, aborts_only=False, span_floor=None)
 *
 * One partition's producer state (ProducerStateManager's entries and ongoing transactions) and
 * ProducerAppendInfo's rules, kept in C memory: the same methods as the Python class, the same
 * results (plain tuples: entries, completed transactions, findings, spans) and the same errors.
 * producer_state.new_producer_state_fold swaps it in whole (format/compiled.py's switch); it writes
 * into no Python object and makes none of kafkatx's classes. tests/storage/test_replay_fold.py holds
 * the two classes to each other.
 *
 * Storage layer: it includes the format layer's wire helpers (kafkatx/format/_wire.h) and imports
 * no other compiled module.
 *
 * Kafka sources: storage/src/main/java/org/apache/kafka/storage/internals/log/ProducerAppendInfo.java,
 * ProducerStateManager.java, ProducerStateEntry.java.
 */
#include "../format/_framer.h"

/* An entry row's fields (producer_state.EntryRow), in order; the txn_* ones may be None. */
enum { E_PID, E_EPOCH, E_SEQ, E_LOFF, E_LTS, E_COORD, E_TFIRST, E_TLAST, E_TSTART, E_TLASTTS, N_ENT };
#define N_ENT_NULLABLE_FROM E_TFIRST
static const char *const ent_names[N_ENT] = {
    "producer_id", "epoch", "last_seq", "last_offset", "last_ts", "coord_epoch",
    "txn_first", "txn_last", "txn_start_ts", "txn_last_ts"};

#define NO_PRODUCER_EPOCH (-1)    /* producer_state.NO_PRODUCER_EPOCH (RecordBatch.NO_PRODUCER_EPOCH) */
#define NO_COORDINATOR_EPOCH (-1) /* producer_state.NO_COORDINATOR_EPOCH */
#define FOLD_BYTES ((Py_ssize_t)64 << 20) /* producer_state.FOLD_BYTES */
enum { FOLD_END = 0, FOLD_CHUNK = 1, FOLD_STOP = 2 };

/* The BatchHeader attributes append() and append_end_txn_marker() read. */
enum { H_POSITION, H_BASE, H_DELTA, H_MAXTS, H_PID, H_EPOCH, H_BASESEQ, H_ATTR, H_MAGIC, N_H };
static const char *const h_names[N_H] = {
    "position", "base_offset", "last_offset_delta", "max_timestamp", "producer_id", "producer_epoch",
    "base_sequence", "attributes", "magic"};

/* The module's state (PEP 489 multi-phase init: one per module object, no mutable static). */
typedef struct {
    PyObject *fold_type;
    PyObject *h_attr[N_H];                /* interned attribute names */
    PyObject *check_epoch, *check_txn, *check_stale;  /* the finding rows' check names */
} replay_state;

/* ----------------------------------------------------------------- ProducerAppendInfo's rules */

/* One C function per predicate of kafkatx/storage/producer_state.py, of the same name, arguments and
 * truth value (whether Kafka's check passes, as the log loader runs it: AppendOrigin.REPLICATION,
 * where a failed check is logged and the batch applied: here a finding row). */

/* producer_state.check_producer_epoch: ProducerAppendInfo.checkProducerEpoch, the legacy rule */
static inline int
check_producer_epoch(int64_t producer_epoch, int64_t current_epoch)
{
    return producer_epoch >= current_epoch;
}

/* producer_state.check_coordinator_epoch: ProducerAppendInfo.checkCoordinatorEpoch */
static inline int
check_coordinator_epoch(int64_t coordinator_epoch, int64_t current_coordinator_epoch)
{
    return current_coordinator_epoch <= coordinator_epoch;
}

/* producer_state.check_end_txn_marker: ProducerAppendInfo.appendEndTxnMarker's two checks */
static inline int
check_end_txn_marker(int64_t producer_epoch, int64_t coordinator_epoch, int64_t current_epoch,
                     int64_t current_coordinator_epoch)
{
    return check_producer_epoch(producer_epoch, current_epoch) &&
           check_coordinator_epoch(coordinator_epoch, current_coordinator_epoch);
}

/* producer_state.check_txn_state: ProducerAppendInfo.appendDataBatch (InvalidTxnStateException) */
static inline int
check_txn_state(int txn_open, int is_transactional)
{
    return !txn_open || is_transactional;
}

/* producer_state.begins_txn: ProducerAppendInfo.appendDataBatch ("Began a new transaction") */
static inline int
begins_txn(int txn_open, int is_transactional)
{
    return is_transactional && !txn_open;
}

/* ----------------------------------------------------------------- the state */

typedef struct {
    int64_t v[N_ENT];
    uint8_t has[N_ENT];   /* 0: None (txn_* fields only) */
    uint8_t live;         /* 0: removed (remove_producer); a later entry of the same producer follows */
    Py_ssize_t ong;       /* its open transaction in the ongoing array, -1: none */
} pf_entry;

/* ProducerStateManager.ongoingTxns: (producer, first offset) by first offset (Kafka's TreeMap); dead
 * entries (completed) are skipped and compacted away. */
typedef struct {
    int64_t pid, first;
    Py_ssize_t k;         /* the producer's entry */
    uint8_t alive;
} pf_ong;

typedef struct {
    PyObject_HEAD
    pf_entry *ents;       /* in the order producers were first seen (activeProducers' order) */
    Py_ssize_t n, cap, live;
    Py_ssize_t *index;    /* open addressing: producer id -> its latest entry in ents, -1 empty */
    Py_ssize_t mask;
    Py_ssize_t last_k;    /* the producer looked up last (a producer's batches come in runs), -1 none */
    pf_ong *ong;
    Py_ssize_t ong_head, ong_n, ong_cap, ong_alive;
    int keep, aborts_only, has_span_floor;
    int64_t span_floor;
    PyObject *completed, *findings, *spans; /* lists, handed out by take_*() */
    replay_state *st;
} PSF;

static Py_ssize_t
pf_slot(const PSF *s, int64_t pid)
{
    Py_ssize_t i = (Py_ssize_t)(((uint64_t)pid * 0x9E3779B97F4A7C15ull) >> 20) & s->mask;
    while (s->index[i] >= 0 && s->ents[s->index[i]].v[E_PID] != pid)
        i = (i + 1) & s->mask;
    return i;
}

/* The live entry of pid, or -1. */
static inline Py_ssize_t
pf_find(PSF *s, int64_t pid)
{
    if (s->last_k >= 0 && s->ents[s->last_k].v[E_PID] == pid && s->ents[s->last_k].live)
        return s->last_k;
    Py_ssize_t k = s->index[pf_slot(s, pid)];
    if (k < 0 || !s->ents[k].live)
        return -1;
    s->last_k = k;
    return k;
}

/* Room for one more item in the array *items of *cap items of `size` bytes, n of them in use. */
static int
grow_array(void **items, Py_ssize_t *cap, Py_ssize_t n, size_t size)
{
    if (n < *cap)
        return 0;
    Py_ssize_t nc = *cap ? *cap * 2 : 16;
    if (nc > PY_SSIZE_T_MAX / (Py_ssize_t)size) {
        PyErr_NoMemory();
        return -1;
    }
    void *grown = PyMem_Realloc(*items, size * (size_t)nc);
    if (grown == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    *items = grown;
    *cap = nc;
    return 0;
}

static int
pf_grow(PSF *s)
{
    if (grow_array((void **)&s->ents, &s->cap, s->n, sizeof(pf_entry)) < 0)
        return -1;
    if (s->index == NULL || (s->n + 1) * 2 > s->mask + 1) {
        Py_ssize_t nmask = s->index == NULL ? 63 : s->mask * 2 + 1;
        if (nmask >= PY_SSIZE_T_MAX / (Py_ssize_t)sizeof(Py_ssize_t)) {
            PyErr_NoMemory();
            return -1;
        }
        Py_ssize_t *ni = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(nmask + 1));
        if (ni == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        for (Py_ssize_t i = 0; i <= nmask; i++)
            ni[i] = -1;
        PyMem_Free(s->index);
        s->index = ni;
        s->mask = nmask;
        for (Py_ssize_t k = 0; k < s->n; k++) /* a later entry of a producer replaces an earlier one */
            s->index[pf_slot(s, s->ents[k].v[E_PID])] = k;
    }
    return 0;
}

/* A new entry for pid (ProducerStateEntry.empty unless the caller fills it), last in the order. */
static Py_ssize_t
pf_new(PSF *s, int64_t pid)
{
    if (pf_grow(s) < 0)
        return -1;
    Py_ssize_t k = s->n++;
    pf_entry *e = &s->ents[k];
    memset(e, 0, sizeof *e);
    e->v[E_PID] = pid;
    e->v[E_EPOCH] = NO_PRODUCER_EPOCH;
    e->v[E_SEQ] = e->v[E_LOFF] = e->v[E_LTS] = -1;
    e->v[E_COORD] = NO_COORDINATOR_EPOCH;
    for (int i = 0; i < N_ENT_NULLABLE_FROM; i++)
        e->has[i] = 1;
    e->live = 1;
    e->ong = -1;
    s->index[pf_slot(s, pid)] = k;
    s->live++;
    s->last_k = k;
    return k;
}

static inline Py_ssize_t
pf_entry_of(PSF *s, int64_t pid)
{
    Py_ssize_t k = pf_find(s, pid);
    return k >= 0 ? k : pf_new(s, pid);
}

/* ----------------------------------------------------------------- ongoingTxns */

static void
ong_compact(PSF *s)
{
    Py_ssize_t j = 0;
    for (Py_ssize_t i = s->ong_head; i < s->ong_n; i++) {
        if (!s->ong[i].alive)
            continue;
        s->ong[j] = s->ong[i];
        s->ents[s->ong[j].k].ong = j;
        j++;
    }
    s->ong_head = 0;
    s->ong_n = j;
}

/* The highest first offset ongoing holds (its last entry): 1, or 0 when it is empty. */
static int
ong_last(PSF *s, int64_t *first)
{
    while (s->ong_n > s->ong_head && !s->ong[s->ong_n - 1].alive)
        s->ong_n--;
    if (s->ong_n == s->ong_head)
        return 0;
    *first = s->ong[s->ong_n - 1].first;
    return 1;
}

/* ProducerStateManager.update's ongoingTxns.put for the producer at ents[k]: after every transaction
 * beginning at or below first_offset (producer_state.ongoing_in_order: last, in a log read in order). */
static int
ong_put(PSF *s, Py_ssize_t k, int64_t first_offset)
{
    int64_t last;
    int in_order = !ong_last(s, &last) || first_offset >= last; /* ongoing_in_order */
    if (!in_order || s->ong_n == s->ong_cap)
        ong_compact(s);
    if (grow_array((void **)&s->ong, &s->ong_cap, s->ong_n, sizeof(pf_ong)) < 0)
        return -1;
    Py_ssize_t at = s->ong_n;
    if (!in_order) { /* a log whose offsets go back: after those beginning at or below it */
        at = 0;
        while (at < s->ong_n && s->ong[at].first <= first_offset)
            at++;
        memmove(&s->ong[at + 1], &s->ong[at], sizeof(pf_ong) * (size_t)(s->ong_n - at));
        for (Py_ssize_t i = at + 1; i <= s->ong_n; i++)
            s->ents[s->ong[i].k].ong = i;
    }
    s->ong[at].pid = s->ents[k].v[E_PID];
    s->ong[at].first = first_offset;
    s->ong[at].k = k;
    s->ong[at].alive = 1;
    s->ents[k].ong = at;
    s->ong_n++;
    s->ong_alive++;
    return 0;
}

/* ProducerStateManager.completeTxn's ongoingTxns.remove for the producer at ents[k]. */
static void
ong_remove(PSF *s, Py_ssize_t k)
{
    Py_ssize_t i = s->ents[k].ong;
    if (i < 0)
        return;
    s->ong[i].alive = 0;
    s->ents[k].ong = -1;
    s->ong_alive--;
    while (s->ong_head < s->ong_n && !s->ong[s->ong_head].alive)
        s->ong_head++;
    if (s->ong_n - s->ong_head > 64 && s->ong_alive * 2 < s->ong_n - s->ong_head)
        ong_compact(s);
}

/* producer_state.find_next_incomplete_txn: ProducerStateManager.findNextIncompleteTxn, the first offset
 * of the earliest ongoing transaction of another producer. 1 found, 0 none. */
static int
find_next_incomplete_txn(const PSF *s, int64_t producer_id, int64_t *first_offset)
{
    for (Py_ssize_t i = s->ong_head; i < s->ong_n; i++) {
        if (s->ong[i].alive && s->ong[i].pid != producer_id) {
            *first_offset = s->ong[i].first;
            return 1;
        }
    }
    return 0;
}

/* ----------------------------------------------------------------- ProducerAppendInfo */

/* Appends (check, log_path, position, offset, producer_id, detail) to the findings; takes detail. */
static int
pf_finding(PSF *s, PyObject *check, PyObject *log_path, Py_ssize_t position, int64_t offset, int64_t pid,
           PyObject *detail)
{
    if (detail == NULL)
        return -1;
    PyObject *row = Py_BuildValue("(OOnLLN)", check, log_path, position, (long long)offset, (long long)pid, detail);
    if (row == NULL)
        return -1;
    int rc = PyList_Append(s->findings, row);
    Py_DECREF(row);
    return rc;
}

/* DefaultRecordBatch.lastSequence (BatchHeader.last_sequence): NO_SEQUENCE stays, any other base sequence
 * is incremented in Java int arithmetic (_framer.h) */
static inline int64_t
last_sequence(int64_t base_seq, int64_t delta)
{
    return base_seq == -1 ? -1 : kx_increment_sequence(base_seq, delta);
}

/* PyProducerStateFold.append (ProducerAppendInfo.appendDataBatch) for an idempotent producer's data batch. */
static int
pf_append(PSF *s, int64_t pid, int64_t epoch, int64_t base, int64_t delta, int64_t base_seq, int64_t max_ts,
          int is_txn, Py_ssize_t position, PyObject *log_path)
{
    int64_t last_offset;
    if (__builtin_add_overflow(base, delta, &last_offset)) {
        PyErr_SetString(PyExc_OverflowError, "a batch's last offset does not fit 64 bits");
        return -1;
    }
    Py_ssize_t k = pf_entry_of(s, pid);
    if (k < 0)
        return -1;
    pf_entry *e = &s->ents[k];
    if (!check_producer_epoch(epoch, e->v[E_EPOCH]) &&
        pf_finding(s, s->st->check_epoch, log_path, position, base, pid,
                   Py_BuildValue("(LL)", (long long)epoch, (long long)e->v[E_EPOCH])) < 0)
        return -1;
    /* ProducerStateEntry.addBatch */
    e->v[E_EPOCH] = epoch;
    e->v[E_SEQ] = last_sequence(base_seq, delta);
    e->v[E_LOFF] = last_offset;
    e->v[E_LTS] = max_ts;
    int txn_open = e->has[E_TFIRST];
    if (!check_txn_state(txn_open, is_txn)) {
        return pf_finding(s, s->st->check_txn, log_path, position, base, pid,
                          Py_BuildValue("(L)", (long long)e->v[E_TFIRST]));
    }
    if (is_txn) {
        if (begins_txn(txn_open, is_txn)) { /* setCurrentTxnFirstOffset */
            e->v[E_TFIRST] = base;
            e->v[E_TSTART] = max_ts;
            e->has[E_TFIRST] = e->has[E_TSTART] = 1;
            if (ong_put(s, k, base) < 0)
                return -1;
            e = &s->ents[k];
        }
        e->v[E_TLAST] = last_offset;
        e->v[E_TLASTTS] = max_ts;
        e->has[E_TLAST] = e->has[E_TLASTTS] = 1;
    }
    return 0;
}

static inline PyObject *
opt_long(int has, int64_t v)
{
    return has ? PyLong_FromLongLong(v) : Py_NewRef(Py_None);
}

/* PyProducerStateFold.append_end_txn_marker (ProducerAppendInfo.appendEndTxnMarker, then
 * ProducerStateManager.completeTxn) for a COMMIT (1) or ABORT (0) marker; other types change nothing. */
static int
pf_marker(PSF *s, int64_t pid, int64_t epoch, int64_t offset, int64_t max_ts, long ctype, int64_t coord,
          Py_ssize_t position, PyObject *log_path)
{
    if (ctype != CONTROL_COMMIT && ctype != CONTROL_ABORT)
        return 0;
    Py_ssize_t k = pf_entry_of(s, pid);
    if (k < 0)
        return -1;
    pf_entry *e = &s->ents[k];
    if (!check_end_txn_marker(epoch, coord, e->v[E_EPOCH], e->v[E_COORD]) &&
        pf_finding(s, s->st->check_stale, log_path, position, offset, pid,
                   Py_BuildValue("(lLLLL)", ctype, (long long)epoch, (long long)e->v[E_EPOCH], (long long)coord,
                                 (long long)e->v[E_COORD])) < 0)
        return -1;
    if (e->has[E_TFIRST]) {
        if (s->has_span_floor && offset >= s->span_floor) {
            PyObject *span = Py_BuildValue("(LL)", (long long)e->v[E_TFIRST], (long long)offset);
            int rc = span == NULL ? -1 : PyList_Append(s->spans, span);
            Py_XDECREF(span);
            if (rc < 0)
                return -1;
        }
        if (s->keep && (ctype == CONTROL_ABORT || !s->aborts_only)) {
            /* ProducerStateManager.lastStableOffset(completedTxn), before completeTxn removes it
             * (storage/lso.py txn_index_last_stable_offset: else the marker's offset + 1) */
            int64_t next;
            PyObject *lso = find_next_incomplete_txn(s, pid, &next) ? PyLong_FromLongLong(next)
                                                                    : long_from_i128((i128)offset + 1);
            PyObject *row = lso == NULL ? NULL
                            : Py_BuildValue("(LLLNlLLNLN)", (long long)pid, (long long)epoch,
                                            (long long)e->v[E_TFIRST], opt_long(e->has[E_TLAST], e->v[E_TLAST]),
                                            ctype, (long long)offset, (long long)coord,
                                            opt_long(e->has[E_TSTART], e->v[E_TSTART]), (long long)max_ts, lso);
            int rc = row == NULL ? -1 : PyList_Append(s->completed, row);
            Py_XDECREF(row);
            if (rc < 0)
                return -1;
        }
        ong_remove(s, k);
    }
    if (epoch != e->v[E_EPOCH]) {
        /* ProducerStateEntry.maybeUpdateProducerEpoch: a new epoch drops the batch metadata */
        e->v[E_SEQ] = -1;
        e->v[E_LOFF] = -1;
    }
    /* ProducerStateEntry.update */
    e->v[E_EPOCH] = epoch;
    e->v[E_COORD] = coord;
    e->v[E_LTS] = max_ts;
    e->has[E_TFIRST] = e->has[E_TLAST] = e->has[E_TSTART] = e->has[E_TLASTTS] = 0;
    return 0;
}

/* ----------------------------------------------------------------- the Python type */

static int
as_int64(PyObject *o, int64_t *out)
{
    long long v = PyLong_AsLongLong(o);
    if (v == -1 && PyErr_Occurred())
        return -1;
    *out = (int64_t)v;
    return 0;
}

/* ProducerStateManager.loadProducerEntry of one producer_state.EntryRow. */
static int
pf_load(PSF *s, PyObject *row)
{
    if (!PyTuple_Check(row) || PyTuple_GET_SIZE(row) != N_ENT) {
        PyErr_SetString(PyExc_ValueError, "an entry row has 10 fields");
        return -1;
    }
    int64_t v[N_ENT];
    uint8_t has[N_ENT];
    for (int i = 0; i < N_ENT; i++) {
        PyObject *o = PyTuple_GET_ITEM(row, i);
        has[i] = 1;
        v[i] = 0;
        if (i >= N_ENT_NULLABLE_FROM && o == Py_None)
            has[i] = 0;
        else if (as_int64(o, &v[i]) < 0)
            return -1;
    }
    Py_ssize_t k = pf_find(s, v[E_PID]);
    if (k >= 0)
        ong_remove(s, k); /* the producer's entry is replaced where it stands */
    else if ((k = pf_new(s, v[E_PID])) < 0)
        return -1;
    pf_entry *e = &s->ents[k];
    memcpy(e->v, v, sizeof v);
    memcpy(e->has, has, sizeof has);
    return has[E_TFIRST] ? ong_put(s, k, v[E_TFIRST]) : 0;
}

static PyObject *
pf_row(const pf_entry *e)
{
    PyObject *t = PyTuple_New(N_ENT);
    for (int i = 0; t != NULL && i < N_ENT; i++) {
        PyObject *o = opt_long(e->has[i], e->v[i]);
        if (o == NULL)
            Py_CLEAR(t);
        else
            PyTuple_SET_ITEM(t, i, o);
    }
    return t;
}

static PyObject *
psf_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PSF *s = (PSF *)type->tp_alloc(type, 0);
    if (s == NULL)
        return NULL;
    s->last_k = -1;
    s->st = (replay_state *)PyType_GetModuleState(type);
    s->completed = PyList_New(0);
    s->findings = PyList_New(0);
    s->spans = PyList_New(0);
    if (s->st == NULL || s->completed == NULL || s->findings == NULL || s->spans == NULL || pf_grow(s) < 0) {
        Py_DECREF(s);
        return NULL;
    }
    return (PyObject *)s;
}

static int
psf_init(PyObject *self, PyObject *args, PyObject *kwds)
{
    PSF *s = (PSF *)self;
    static char *kwlist[] = {"entries", "keep_completed", "aborts_only", "span_floor", NULL};
    PyObject *entries = NULL, *floor = Py_None;
    int keep = 0, aborts_only = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|O$ppO:ProducerStateFold", kwlist, &entries, &keep,
                                     &aborts_only, &floor))
        return -1;
    s->keep = keep;
    s->aborts_only = aborts_only;
    s->has_span_floor = floor != Py_None;
    if (s->has_span_floor && as_int64(floor, &s->span_floor) < 0)
        return -1;
    if (entries != NULL) {
        PyObject *it = PyObject_GetIter(entries);
        if (it == NULL)
            return -1;
        PyObject *row;
        while ((row = PyIter_Next(it)) != NULL) {
            int rc = pf_load(s, row);
            Py_DECREF(row);
            if (rc < 0) {
                Py_DECREF(it);
                return -1;
            }
        }
        Py_DECREF(it);
        if (PyErr_Occurred())
            return -1;
    }
    return 0;
}

static int
psf_traverse(PyObject *self, visitproc visit, void *arg)
{
    PSF *s = (PSF *)self;
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(s->completed);
    Py_VISIT(s->findings);
    Py_VISIT(s->spans);
    return 0;
}

static int
psf_clear(PyObject *self)
{
    PSF *s = (PSF *)self;
    Py_CLEAR(s->completed);
    Py_CLEAR(s->findings);
    Py_CLEAR(s->spans);
    return 0;
}

static void
psf_dealloc(PyObject *self)
{
    PSF *s = (PSF *)self;
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    psf_clear(self);
    PyMem_Free(s->ents);
    PyMem_Free(s->index);
    PyMem_Free(s->ong);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyObject *
psf_load_producer_entry(PyObject *self, PyObject *row)
{
    if (pf_load((PSF *)self, row) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
psf_active_producers(PyObject *self, PyObject *unused)
{
    PSF *s = (PSF *)self;
    PyObject *out = PyList_New(s->live);
    Py_ssize_t j = 0;
    for (Py_ssize_t k = 0; out != NULL && k < s->n; k++) {
        if (!s->ents[k].live)
            continue;
        PyObject *row = pf_row(&s->ents[k]);
        if (row == NULL)
            Py_CLEAR(out);
        else
            PyList_SET_ITEM(out, j++, row);
    }
    return out;
}

static PyObject *
psf_last_entry(PyObject *self, PyObject *arg)
{
    PSF *s = (PSF *)self;
    int64_t pid;
    if (as_int64(arg, &pid) < 0)
        return NULL;
    Py_ssize_t k = pf_find(s, pid);
    if (k < 0)
        Py_RETURN_NONE;
    return pf_row(&s->ents[k]);
}

static PyObject *
psf_remove_producer(PyObject *self, PyObject *arg)
{
    PSF *s = (PSF *)self;
    int64_t pid;
    if (as_int64(arg, &pid) < 0)
        return NULL;
    Py_ssize_t k = pf_find(s, pid);
    if (k < 0) {
        PyErr_SetObject(PyExc_KeyError, arg);
        return NULL;
    }
    PyObject *row = pf_row(&s->ents[k]);
    if (row == NULL)
        return NULL;
    ong_remove(s, k);
    s->ents[k].live = 0;
    s->live--;
    s->last_k = -1;
    return row;
}

static PyObject *
psf_ongoing_txns(PyObject *self, PyObject *unused)
{
    PSF *s = (PSF *)self;
    PyObject *out = PyList_New(0);
    for (Py_ssize_t i = s->ong_head; out != NULL && i < s->ong_n; i++) {
        if (!s->ong[i].alive)
            continue;
        PyObject *t = Py_BuildValue("(LL)", (long long)s->ong[i].pid, (long long)s->ong[i].first);
        if (t == NULL || PyList_Append(out, t) < 0)
            Py_CLEAR(out);
        Py_XDECREF(t);
    }
    return out;
}

static PyObject *
take(PyObject **list)
{
    PyObject *fresh = PyList_New(0);
    if (fresh == NULL)
        return NULL;
    PyObject *got = *list;
    *list = fresh;
    return got;
}

static PyObject *
psf_take_completed(PyObject *self, PyObject *unused)
{
    return take(&((PSF *)self)->completed);
}

static PyObject *
psf_take_findings(PyObject *self, PyObject *unused)
{
    return take(&((PSF *)self)->findings);
}

static PyObject *
psf_take_spans(PyObject *self, PyObject *unused)
{
    return take(&((PSF *)self)->spans);
}

static Py_ssize_t
psf_len(PyObject *self)
{
    return ((PSF *)self)->live;
}

/* The BatchHeader attributes of h_names, as int64. */
static int
read_header(const replay_state *st, PyObject *batch, int64_t *h)
{
    for (int i = 0; i < N_H; i++) {
        PyObject *o = PyObject_GetAttr(batch, st->h_attr[i]);
        if (o == NULL)
            return -1;
        int rc = as_int64(o, &h[i]);
        Py_DECREF(o);
        if (rc < 0)
            return -1;
    }
    return 0;
}

static PyObject *
psf_append(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    PSF *s = (PSF *)self;
    if (nargs < 1 || nargs > 2) {
        PyErr_Format(PyExc_TypeError, "append() takes 1 or 2 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *log_path = nargs > 1 ? args[1] : NULL;
    int64_t h[N_H];
    if (read_header(s->st, args[0], h) < 0)
        return NULL;
    if (h[H_PID] < 0)
        Py_RETURN_NONE; /* UnifiedLog tracks only batch.hasProducerId */
    int is_txn = h[H_MAGIC] >= 2 && (h[H_ATTR] & ATTR_TRANSACTIONAL) != 0;
    PyObject *empty = log_path == NULL ? PyUnicode_FromStringAndSize("", 0) : Py_NewRef(log_path);
    if (empty == NULL)
        return NULL;
    int rc = pf_append(s, h[H_PID], h[H_EPOCH], h[H_BASE], h[H_DELTA], h[H_BASESEQ], h[H_MAXTS], is_txn,
                       (Py_ssize_t)h[H_POSITION], empty);
    Py_DECREF(empty);
    if (rc < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
psf_append_end_txn_marker(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    PSF *s = (PSF *)self;
    if (nargs < 3 || nargs > 4) {
        PyErr_Format(PyExc_TypeError, "append_end_txn_marker() takes 3 or 4 arguments (%zd given)", nargs);
        return NULL;
    }
    long ctype = PyLong_AsLong(args[1]);
    if (ctype == -1 && PyErr_Occurred())
        return NULL;
    if (ctype != CONTROL_COMMIT && ctype != CONTROL_ABORT)
        Py_RETURN_NONE; /* LEADER_CHANGE and KRaft records carry no producer state */
    int64_t coord = 0;
    if (args[2] != Py_None && as_int64(args[2], &coord) < 0)
        return NULL;
    int64_t h[N_H];
    if (read_header(s->st, args[0], h) < 0)
        return NULL;
    PyObject *log_path = nargs > 3 ? Py_NewRef(args[3]) : PyUnicode_FromStringAndSize("", 0);
    if (log_path == NULL)
        return NULL;
    int rc = pf_marker(s, h[H_PID], h[H_EPOCH], h[H_BASE], h[H_MAXTS], ctype, coord, (Py_ssize_t)h[H_POSITION],
                       log_path);
    Py_DECREF(log_path);
    if (rc < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* An offset bound that may lie outside int64 (a log ending at 2^63 - 1 has its end at 2^63). */
static int
as_bound(PyObject *o, i128 *out)
{
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (v == -1 && PyErr_Occurred())
        return -1;
    *out = overflow > 0 ? (i128)INT64_MAX + 1 : overflow < 0 ? (i128)INT64_MIN - 1 : (i128)v;
    return 0;
}

/* PyProducerStateFold.fold: see its docstring (the Python loop is this one, batch for batch). */
static PyObject *
psf_fold(PyObject *self, PyObject *args, PyObject *kwds)
{
    PSF *s = (PSF *)self;
    static char *kwlist[] = {"buf", "pos", "hi", "start", "end", "stop", "verify_crc", "crcs_hold", "max_bytes",
                             "log_path", NULL};
    PyObject *buf, *start_o = NULL, *end_o = NULL, *stop_o = Py_None, *log_path = NULL;
    Py_ssize_t pos, hi, max_bytes = FOLD_BYTES;
    int check_data_crc = 0, crcs_hold = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "Onn|$OOOppnU:fold", kwlist, &buf, &pos, &hi, &start_o, &end_o,
                                     &stop_o, &check_data_crc, &crcs_hold, &max_bytes, &log_path))
        return NULL;
    i128 start = INT64_MIN, end = INT64_MAX, stop = 0;
    int has_stop = stop_o != Py_None;
    if ((start_o != NULL && as_bound(start_o, &start) < 0) || (end_o != NULL && as_bound(end_o, &end) < 0) ||
        (has_stop && as_bound(stop_o, &stop) < 0))
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    if (pos < 0 || hi < pos || hi > view.len) {
        PyErr_Format(PyExc_ValueError, "fold(): bytes %zd..%zd are not inside a buffer of %zd", pos, hi, view.len);
        PyBuffer_Release(&view);
        return NULL;
    }
    PyObject *path = log_path != NULL ? Py_NewRef(log_path) : PyUnicode_FromStringAndSize("", 0);
    if (path == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    const uint8_t *base = (const uint8_t *)view.buf;
    Py_ssize_t batches = 0, seen = 0, scanned = 0;
    int reason = FOLD_END, failed = 0;
    kx_walk w = {base, pos, hi};
    kx_header r;
    while (w.pos < hi) {
        if (scanned >= max_bytes) {
            reason = FOLD_CHUNK;
            break;
        }
        if (kx_frame_here(&w, &r) == KX_NONE) {
            reason = FOLD_STOP;
            break;
        }
        const int64_t pid = kx_producer_id(&r);
#define CRC_OK() (crcs_hold || kx_crc_holds(&r))
        if ((i128)r.base_offset >= end) {
            /* skipped, but the event source reads such a control record (read_control_record raises on one
             * it cannot read): leave those to the caller */
            int ct;
            int64_t ce;
            if (kx_control(&r) && pid >= 0 && kx_records_count(&r) != 0 && CRC_OK() && !parse_control(&r, &ct, &ce)) {
                reason = FOLD_STOP;
                break;
            }
            seen++;
        } else if (has_stop && (i128)r.base_offset >= stop) {
            reason = FOLD_STOP;
            break;
        } else if ((i128)r.base_offset >= start || (i128)r.last_offset >= start) {
            if (kx_control(&r) && pid >= 0) {
                if (!CRC_OK()) {
                    reason = FOLD_STOP;
                    break;
                }
                if (kx_records_count(&r) != 0) {
                    int ctype;
                    int64_t coord;
                    if (!parse_control(&r, &ctype, &coord)) {
                        reason = FOLD_STOP;
                        break;
                    }
                    if (pf_marker(s, pid, kx_producer_epoch(&r), r.base_offset, kx_max_timestamp(&r), ctype, coord, r.position,
                                  path) < 0) {
                        failed = 1;
                        break;
                    }
                }
            } else if (!kx_control(&r)) {
                if (check_data_crc && !CRC_OK()) {
                    reason = FOLD_STOP;
                    break;
                }
                if (pid >= 0 && pf_append(s, pid, kx_producer_epoch(&r), r.base_offset, r.last_offset_delta,
                                          kx_base_sequence(&r), kx_max_timestamp(&r), kx_transactional(&r), r.position, path) < 0) {
                    failed = 1;
                    break;
                }
            }
            batches++;
            seen++;
        }
        kx_take(&w, &r);
        scanned += r.size;
#undef CRC_OK
    }
    pos = w.pos;
    Py_DECREF(path);
    PyBuffer_Release(&view);
    if (failed)
        return NULL;
    return Py_BuildValue("(nnni)", pos, batches, seen, reason);
}

static PyMethodDef psf_methods[] = {
    {"load_producer_entry", psf_load_producer_entry, METH_O, "ProducerStateManager.loadProducerEntry(row)"},
    {"active_producers", psf_active_producers, METH_NOARGS, "ProducerStateManager.activeProducers: entry rows"},
    {"last_entry", psf_last_entry, METH_O, "ProducerStateManager.lastEntry(producer_id): an entry row or None"},
    {"remove_producer", psf_remove_producer, METH_O, "drop a producer: its entry row (KeyError: none)"},
    {"ongoing_txns", psf_ongoing_txns, METH_NOARGS, "ProducerStateManager.ongoingTxns: (producer, first offset)"},
    {"take_completed", psf_take_completed, METH_NOARGS, "the completed-transaction rows since the last call"},
    {"take_findings", psf_take_findings, METH_NOARGS, "the finding rows since the last call"},
    {"take_spans", psf_take_spans, METH_NOARGS, "the (first offset, marker offset) spans since the last call"},
    {"append", (PyCFunction)(void (*)(void))psf_append, METH_FASTCALL,
     "append(batch, log_path=''): ProducerAppendInfo.append of a data batch"},
    {"append_end_txn_marker", (PyCFunction)(void (*)(void))psf_append_end_txn_marker, METH_FASTCALL,
     "append_end_txn_marker(batch, control_type, coordinator_epoch, log_path=''): ProducerAppendInfo.appendEndTxnMarker"},
    {"fold", (PyCFunction)(void (*)(void))psf_fold, METH_VARARGS | METH_KEYWORDS,
     "fold(buf, pos, hi, *, start, end, stop, verify_crc, crcs_hold, max_bytes, log_path) -> (pos, batches, seen, reason)"},
    {NULL, NULL, 0, NULL}};

static PyType_Slot psf_slots[] = {
    {Py_tp_doc, "ProducerStateFold(entries=(), *, keep_completed=False, aborts_only=False, span_floor=None): "
                "the compiled twin of kafkatx.storage.producer_state.PyProducerStateFold"},
    {Py_tp_new, psf_new},
    {Py_tp_init, psf_init},
    {Py_tp_dealloc, psf_dealloc},
    {Py_tp_traverse, psf_traverse},
    {Py_tp_clear, psf_clear},
    {Py_tp_methods, psf_methods},
    {Py_sq_length, psf_len},
    {Py_mp_length, psf_len},
    {0, NULL}};

static PyType_Spec psf_spec = {
    .name = "kafkatx.storage._replay.ProducerStateFold",
    .basicsize = sizeof(PSF),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = psf_slots,
};

static int
rp_traverse(PyObject *m, visitproc visit, void *arg)
{
    replay_state *st = (replay_state *)PyModule_GetState(m);
    Py_VISIT(st->fold_type);
    return 0;
}

static int
rp_clear(PyObject *m)
{
    replay_state *st = (replay_state *)PyModule_GetState(m);
    Py_CLEAR(st->fold_type);
    for (int i = 0; i < N_H; i++)
        Py_CLEAR(st->h_attr[i]);
    Py_CLEAR(st->check_epoch);
    Py_CLEAR(st->check_txn);
    Py_CLEAR(st->check_stale);
    return 0;
}

static void
rp_free(void *m)
{
    rp_clear((PyObject *)m);
}

/* The storage layer's constants beside the shared ones: fold's reasons (producer_state.FOLD_END,
 * FOLD_CHUNK, FOLD_STOP, FOLD_BYTES) and the entry row's fields. */
static int
rp_exec(PyObject *m)
{
    replay_state *st = (replay_state *)PyModule_GetState(m);
    if (wire_exec(m) < 0 || PyModule_AddIntConstant(m, "FOLD_END", FOLD_END) < 0 ||
        PyModule_AddIntConstant(m, "FOLD_CHUNK", FOLD_CHUNK) < 0 ||
        PyModule_AddIntConstant(m, "FOLD_STOP", FOLD_STOP) < 0 ||
        PyModule_AddIntConstant(m, "FOLD_BYTES", (long)FOLD_BYTES) < 0 ||
        wire_add_names(m, "ENTRY_FIELDS", ent_names, N_ENT) < 0)
        return -1;
    for (int i = 0; i < N_H; i++)
        if ((st->h_attr[i] = PyUnicode_InternFromString(h_names[i])) == NULL)
            return -1;
    if ((st->check_epoch = PyUnicode_InternFromString("producer-epoch")) == NULL ||
        (st->check_txn = PyUnicode_InternFromString("non-transactional-in-txn")) == NULL ||
        (st->check_stale = PyUnicode_InternFromString("stale-marker")) == NULL)
        return -1;
    st->fold_type = PyType_FromModuleAndSpec(m, &psf_spec, NULL);
    if (st->fold_type == NULL)
        return -1;
    return PyModule_AddObjectRef(m, "ProducerStateFold", st->fold_type);
}

static PyModuleDef_Slot rp_slots[] = {
    {Py_mod_exec, rp_exec},
#ifdef Py_mod_multiple_interpreters
    {Py_mod_multiple_interpreters, Py_MOD_PER_INTERPRETER_GIL_SUPPORTED},
#endif
    {0, NULL}};

static struct PyModuleDef rp_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "kafkatx.storage._replay",
    .m_doc = "Compiled twin of kafkatx.storage.producer_state.PyProducerStateFold (optional; see _replay.c).",
    .m_size = sizeof(replay_state),
    .m_slots = rp_slots,
    .m_traverse = rp_traverse,
    .m_clear = rp_clear,
    .m_free = rp_free,
};

PyMODINIT_FUNC
PyInit__replay(void)
{
    return PyModuleDef_Init(&rp_module);
}
