/*
 * kafkatx.storage._replay -- the compiled producer-state fold of kafkatx/storage/fold.py.
 *
 *   replay_setup(Entry, CompletedTxn, "ABORT", "COMMIT") -> None
 *   replay_fold(buf, pos, hi, producers, start, end, stop, check_data_crc, spans, span_floor,
 *               completed, topic, partition, max_bytes, ongoing, aborts_only, crcs_hold)
 *       -> (pos, batches, seen, reason)
 *       kafkatx.storage.fold.fold_batches: applies a segment's batches to the
 *       replay's per-producer _Entry objects (their slots written directly), returning
 *       at the first batch the Python replay must handle. See sp_replay_fold.
 *
 * Transaction layer: it includes the format layer's wire helpers (kafkatx/format/_wire.h) and
 * imports no other compiled module.
 */
#include "../format/_wire.h"

/* ----------------------------------------------------------------- replay_fold */

/* kafkatx.storage.producer_state._Entry (a plain __slots__ class: the replay's mutable per-producer state)
 * and kafkatx.storage.producer_state.CompletedTxn (a frozen slotted dataclass), learnt by replay_setup(). */
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

/* The module's state (PEP 489 multi-phase init: one per module object, no mutable static): what
 * replay_setup() registered. */
typedef struct {
    wire_cls entry;          /* producer_state._Entry */
    wire_cls done;           /* producer_state.CompletedTxn */
    PyObject *outcome[2];    /* [ABORT, COMMIT]: ControlType 0 and 1 */
} replay_state;

static inline replay_state *
get_state(PyObject *module)
{
    return (replay_state *)PyModule_GetState(module);
}

static PyObject *
sp_replay_setup(PyObject *self, PyObject *args)
{
    PyObject *ecls, *dcls, *abort_s, *commit_s;
    if (!PyArg_ParseTuple(args, "OOUU:replay_setup", &ecls, &dcls, &abort_s, &commit_s))
        return NULL;
    replay_state *st = get_state(self);
    wire_cls ent = {NULL, {0}}, done = {NULL, {0}};
    if (wire_cls_set(&ent, ecls, ent_names, N_ENT) < 0 || wire_cls_set(&done, dcls, done_names, N_DONE) < 0) {
        Py_XDECREF(ent.tp);
        return NULL;
    }
    Py_XSETREF(st->entry.tp, ent.tp);
    memcpy(st->entry.off, ent.off, sizeof ent.off);
    Py_XSETREF(st->done.tp, done.tp);
    memcpy(st->done.off, done.off, sizeof done.off);
    Py_XSETREF(st->outcome[0], Py_NewRef(abort_s));
    Py_XSETREF(st->outcome[1], Py_NewRef(commit_s));
    Py_RETURN_NONE;
}

/* ProducerAppendInfo's rules: one C function per predicate of kafkatx/storage/producer_state.py, of the
 * same name, arguments and truth value (whether Kafka's check passes, as the log loader runs it:
 * AppendOrigin.REPLICATION). Where one fails the fold leaves the batch to Python, which builds the
 * finding. tests/storage/test_producer_append_info.py states the rules; test_replay_fold.py holds the twins. */
#define NO_PRODUCER_EPOCH (-1)    /* producer_state.NO_PRODUCER_EPOCH (RecordBatch.NO_PRODUCER_EPOCH) */
#define NO_COORDINATOR_EPOCH (-1) /* producer_state.NO_COORDINATOR_EPOCH */

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

/* One producer's state while the call runs: loaded from its _Entry on first touch, written
 * back (and, for a new producer, created and put in the dict) before the call returns. */
typedef struct {
    int64_t pid;
    PyObject *obj;       /* the _Entry (owned); NULL: a producer first seen in this call */
    int64_t v[N_ENT];    /* v[E_PID] unused */
    uint8_t has[N_ENT];  /* 0: the slot holds None (txn_* slots only) */
    int dirty;
    Py_ssize_t ong;      /* its entry in rf_table.ong (added in this call, still there), -1: none */
    uint8_t in_d;        /* a key of ongoing when the call began ... */
    uint8_t d_gone;      /* ... and removed from it since (written back at the end) */
} rf_ent;

/* A transaction begun in this call (ongoing's order: after every entry ongoing had when the call began). */
typedef struct {
    int64_t pid, first;
    int alive;           /* 0: completed since (removed) */
} rf_ong;

typedef struct {
    const replay_state *st;              /* the module's classes */
    PyObject *producers;                 /* dict[int, _Entry] */
    rf_ent *ents;                        /* in order of first touch */
    Py_ssize_t n, cap;
    Py_ssize_t *index;                   /* open addressing: pid -> ents index, -1 empty */
    Py_ssize_t mask;
    int64_t last_pid;                    /* the producer looked up last, at ents[last_k] (-1: none yet) */
    Py_ssize_t last_k;
    /* ProducerReplay.ongoing (dict[int, int]), NULL: not kept. Not touched per transaction: the dict
     * as the call found it (d: only a value set in place, for a key still in it), the keys removed
     * from it since (rf_ent.d_gone) and the transactions begun since (ong, in order) are ongoing
     * as the Python twin has it at that batch; rf_ongoing_flush writes the difference back. */
    PyObject *ongoing;
    rf_ong *ong;
    Py_ssize_t ong_n, ong_cap;
    Py_ssize_t ong_head;                 /* ong's entries before it are removed */
    Py_ssize_t d_pos;                    /* PyDict_Next position: d's entries before it are removed */
    int d_last_ok;                       /* d_last_* hold d's last entry not removed (cached) */
    int d_last_has;
    int64_t d_last_pid, d_last;
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
        if (ne == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        t->ents = ne;
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

/* ProducerStateManager.ongoingTxns (kafkatx/storage/producer_state.py ProducerReplay.ongoing): producer
 * id -> first offset of its open transaction, in first-offset order. The fold keeps it as
 * ProducerReplay.begin_txn and .marker do: a transaction begun is added last, one completed removed. */

/* The index in t->ents of pid's state when this call touched it, else -1 (no dict lookup). */
static Py_ssize_t
rf_find(const rf_table *t, int64_t pid)
{
    Py_ssize_t i = (Py_ssize_t)(((uint64_t)pid * 0x9E3779B97F4A7C15ull) >> 20) & t->mask;
    while (t->index[i] >= 0) {
        if (t->ents[t->index[i]].pid == pid)
            return t->index[i];
        i = (i + 1) & t->mask;
    }
    return -1;
}

/* An entry of the dict as the call found it: its key and value as int64 (1), or 0 with a TypeError set. */
static int
rf_ongoing_item(PyObject *key, PyObject *val, int64_t *pid, int64_t *first)
{
    if (!rf_int(key, pid) || !rf_int(val, first)) {
        PyErr_SetString(PyExc_TypeError, "replay_fold(): ongoing holds something other than int ids/offsets");
        return 0;
    }
    return 1;
}

/* Was the dict's key pid removed in this call? */
static int
rf_d_gone(const rf_table *t, int64_t pid)
{
    Py_ssize_t k = rf_find(t, pid);
    return k >= 0 && t->ents[k].d_gone;
}

/* ongoing's last entry (its highest first offset: the dict is in first-offset order): *has 0 when
 * ongoing is empty. 0 done, -1 error set. */
static int
rf_ongoing_last(rf_table *t, int *has, int64_t *last)
{
    while (t->ong_n > 0 && !t->ong[t->ong_n - 1].alive)
        t->ong_n--;
    if (t->ong_head > t->ong_n)
        t->ong_head = t->ong_n;
    if (t->ong_n > 0) {
        *has = 1;
        *last = t->ong[t->ong_n - 1].first;
        return 0;
    }
    if (!t->d_last_ok) {
        t->d_last_has = 0;
        if (PyDict_GET_SIZE(t->ongoing) > 0) {
            PyObject *rev = PyObject_CallMethod(t->ongoing, "__reversed__", NULL);
            if (rev == NULL)
                return -1;
            PyObject *key;
            while ((key = PyIter_Next(rev)) != NULL) {
                PyObject *val = PyDict_GetItemWithError(t->ongoing, key); /* borrowed */
                int64_t pid, first;
                int ok = val != NULL && rf_ongoing_item(key, val, &pid, &first);
                Py_DECREF(key);
                if (!ok) {
                    Py_DECREF(rev);
                    if (!PyErr_Occurred())
                        PyErr_SetString(PyExc_RuntimeError, "replay_fold(): ongoing changed while read");
                    return -1;
                }
                if (!rf_d_gone(t, pid)) {
                    t->d_last_has = 1;
                    t->d_last_pid = pid;
                    t->d_last = first;
                    break;
                }
            }
            Py_DECREF(rev);
            if (PyErr_Occurred())
                return -1;
        }
        t->d_last_ok = 1;
    }
    *has = t->d_last_has;
    *last = t->d_last;
    return 0;
}

/* producer_state.ongoing_in_order: a transaction beginning at first_offset goes last in ongoing.
 * 1 yes, 0 no, -1 error set. */
static int
ongoing_in_order(rf_table *t, int64_t first_offset)
{
    int has;
    int64_t last;
    if (rf_ongoing_last(t, &has, &last) < 0)
        return -1;
    return !has || first_offset >= last;
}

/* ProducerReplay.begin_txn's ongoing[pid] = first (in order: ongoing_in_order held) for the producer
 * at t->ents[k]: a key already there keeps its place. 0, or -1 error set. */
static int
rf_ongoing_put(rf_table *t, Py_ssize_t k, int64_t first_offset)
{
    rf_ent *e = &t->ents[k];
    if (e->ong >= 0) {
        t->ong[e->ong].first = first_offset;
        return 0;
    }
    if (e->in_d && !e->d_gone) {
        PyObject *key = PyLong_FromLongLong(e->pid);
        PyObject *val = key == NULL ? NULL : PyLong_FromLongLong(first_offset);
        int rc = val == NULL ? -1 : PyDict_SetItem(t->ongoing, key, val); /* in place: no resize, same order */
        Py_XDECREF(key);
        Py_XDECREF(val);
        t->d_last_ok = 0;
        return rc;
    }
    if (t->ong_n == t->ong_cap) {
        Py_ssize_t nc = t->ong_cap ? t->ong_cap * 2 : 16;
        if (nc > PY_SSIZE_T_MAX / (Py_ssize_t)sizeof(rf_ong)) {
            PyErr_NoMemory();
            return -1;
        }
        rf_ong *no = PyMem_Realloc(t->ong, sizeof(rf_ong) * (size_t)nc);
        if (no == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        t->ong = no;
        t->ong_cap = nc;
    }
    t->ong[t->ong_n].pid = e->pid;
    t->ong[t->ong_n].first = first_offset;
    t->ong[t->ong_n].alive = 1;
    e->ong = t->ong_n++;
    return 0;
}

/* ProducerReplay.marker's ongoing.pop(pid, None) (ProducerStateManager.completeTxn) for the producer
 * at t->ents[k]. */
static void
rf_ongoing_remove(rf_table *t, Py_ssize_t k)
{
    rf_ent *e = &t->ents[k];
    if (e->ong >= 0) {
        t->ong[e->ong].alive = 0;
        e->ong = -1;
    } else if (e->in_d && !e->d_gone) {
        e->d_gone = 1;
        if (t->d_last_ok && t->d_last_has && t->d_last_pid == e->pid)
            t->d_last_ok = 0;
    }
}

/* producer_state.find_next_incomplete_txn: ProducerStateManager.findNextIncompleteTxn, the first
 * offset of the earliest ongoing transaction of another producer. 1 found, 0 none, -1 error set. */
static int
find_next_incomplete_txn(rf_table *t, int64_t producer_id, int64_t *first_offset)
{
    if (PyDict_GET_SIZE(t->ongoing) > 0) {
        Py_ssize_t it = t->d_pos;
        int front = 1; /* every entry before it was removed */
        PyObject *key, *val;
        while (PyDict_Next(t->ongoing, &it, &key, &val)) {
            int64_t pid, first;
            if (!rf_ongoing_item(key, val, &pid, &first))
                return -1;
            if (rf_d_gone(t, pid)) {
                if (front)
                    t->d_pos = it;
                continue;
            }
            front = 0;
            if (pid != producer_id) {
                *first_offset = first;
                return 1;
            }
        }
    }
    for (Py_ssize_t i = t->ong_head; i < t->ong_n; i++) {
        if (!t->ong[i].alive) {
            if (i == t->ong_head)
                t->ong_head = i + 1;
            continue;
        }
        if (t->ong[i].pid != producer_id) {
            *first_offset = t->ong[i].first;
            return 1;
        }
    }
    return 0;
}

/* Whether pid is a key of ongoing as the call found it (key: pid as an int, or NULL). 1, 0, -1 error set. */
static int
rf_in_d(const rf_table *t, int64_t pid, PyObject *key)
{
    if (t->ongoing == NULL || PyDict_GET_SIZE(t->ongoing) == 0)
        return 0;
    PyObject *own = key == NULL ? PyLong_FromLongLong(pid) : NULL;
    if (key == NULL && own == NULL)
        return -1;
    int rc = PyDict_Contains(t->ongoing, key != NULL ? key : own);
    Py_XDECREF(own);
    return rc;
}

/* Write the call's changes to ongoing back: the keys removed (pop(pid, None)), then the
 * transactions begun and still open, in order (each goes last, as ongoing[pid] = first put it). */
static int
rf_ongoing_flush(rf_table *t)
{
    if (t->ongoing == NULL)
        return 0;
    for (Py_ssize_t k = 0; k < t->n; k++) {
        rf_ent *e = &t->ents[k];
        if (!e->d_gone)
            continue;
        PyObject *key = PyLong_FromLongLong(e->pid);
        if (key == NULL)
            return -1;
        int rc = PyDict_DelItem(t->ongoing, key);
        Py_DECREF(key);
        if (rc < 0) {
            if (!PyErr_ExceptionMatches(PyExc_KeyError))
                return -1;
            PyErr_Clear();
        }
        e->d_gone = 0;
        e->in_d = 0;
    }
    for (Py_ssize_t i = t->ong_head; i < t->ong_n; i++) {
        if (!t->ong[i].alive)
            continue;
        PyObject *key = PyLong_FromLongLong(t->ong[i].pid);
        PyObject *val = key == NULL ? NULL : PyLong_FromLongLong(t->ong[i].first);
        int rc = val == NULL ? -1 : PyDict_SetItem(t->ongoing, key, val);
        Py_XDECREF(key);
        Py_XDECREF(val);
        if (rc < 0)
            return -1;
    }
    t->ong_n = t->ong_head = 0;
    return 0;
}

/* The table index of pid's state (RF_FOUND..: >= 0), loading it from the dict on first touch;
 * RF_ABSENT when the dict has no such producer; RF_ODD when its _Entry holds something other
 * than what the replay writes (left to Python); RF_ERROR with a Python exception set. */
static Py_ssize_t
rf_get(rf_table *t, int64_t pid)
{
    Py_ssize_t s = rf_slot(t, pid);
    if (t->index[s] >= 0)
        return t->index[s];
    PyObject *key = PyLong_FromLongLong(pid);
    if (key == NULL)
        return RF_ERROR;
    PyObject *obj = PyDict_GetItemWithError(t->producers, key); /* borrowed */
    if (obj == NULL) {
        Py_DECREF(key);
        return PyErr_Occurred() ? RF_ERROR : RF_ABSENT;
    }
    if (!Py_IS_TYPE(obj, t->st->entry.tp)) {
        Py_DECREF(key);
        return RF_ODD;
    }
    rf_ent e;
    memset(&e, 0, sizeof e);
    e.pid = pid;
    e.ong = -1;
    for (int i = 0; i < N_ENT; i++) {
        PyObject *v = SLOT(obj, t->st->entry.off[i]);
        if (i >= N_ENT_NULLABLE_FROM && v == Py_None)
            continue;
        if (!rf_int(v, &e.v[i])) {
            Py_DECREF(key);
            return RF_ODD;
        }
        e.has[i] = 1;
    }
    if (e.v[E_PID] != pid) {
        Py_DECREF(key);
        return RF_ODD;
    }
    int in_d = rf_in_d(t, pid, key);
    Py_DECREF(key);
    if (in_d < 0 || rf_grow(t) < 0)
        return RF_ERROR;
    e.in_d = (uint8_t)in_d;
    s = rf_slot(t, pid);
    e.obj = Py_NewRef(obj);
    Py_ssize_t k = t->n++;
    t->ents[k] = e;
    t->index[s] = k;
    return k;
}

/* A producer the dict does not hold: _Entry(pid)'s values, created in the dict at write-back. */
static Py_ssize_t
rf_new(rf_table *t, int64_t pid)
{
    int in_d = rf_in_d(t, pid, NULL);
    if (in_d < 0 || rf_grow(t) < 0)
        return RF_ERROR;
    rf_ent e;
    memset(&e, 0, sizeof e);
    e.pid = pid;
    e.ong = -1;
    e.in_d = (uint8_t)in_d;
    e.v[E_EPOCH] = e.v[E_SEQ] = e.v[E_LOFF] = e.v[E_LTS] = e.v[E_COORD] = -1;
    e.has[E_PID] = e.has[E_EPOCH] = e.has[E_SEQ] = e.has[E_LOFF] = e.has[E_LTS] = e.has[E_COORD] = 1;
    e.dirty = 1;
    Py_ssize_t k = t->n++;
    t->ents[k] = e;
    t->index[rf_slot(t, pid)] = k;
    return k;
}

/* rf_get, answered without hashing when pid is the producer looked up last (a producer's batches
 * come in runs), and remembered when found. */
static inline Py_ssize_t
rf_find_or_get(rf_table *t, int64_t pid)
{
    if (t->last_k >= 0 && t->last_pid == pid)
        return t->last_k;
    Py_ssize_t k = rf_get(t, pid);
    if (k >= 0) {
        t->last_pid = pid;
        t->last_k = k;
    }
    return k;
}

/* rf_new, remembered as the producer looked up last. */
static inline Py_ssize_t
rf_new_last(rf_table *t, int64_t pid)
{
    Py_ssize_t k = rf_new(t, pid);
    if (k >= 0) {
        t->last_pid = pid;
        t->last_k = k;
    }
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
            PyObject *obj = PyObject_CallOneArg((PyObject *)t->st->entry.tp, key);
            if (obj == NULL || PyDict_SetItem(t->producers, key, obj) < 0) {
                Py_DECREF(key);
                Py_XDECREF(obj);
                return -1;
            }
            Py_DECREF(key);
            if (!Py_IS_TYPE(obj, t->st->entry.tp)) {
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
            Py_XSETREF(SLOT(e->obj, t->st->entry.off[i]), v);
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
    PyMem_Free(t->ong);
}

/* A CompletedTxn (a frozen slotted dataclass) for the transaction e's marker completes. */
static PyObject *
rf_completed(const replay_state *st, PyObject *topic, PyObject *partition, const rf_ent *e, int epoch, int ctype,
             int64_t marker, int64_t coord, int64_t end_ts, int64_t lso)
{
    PyObject *v[N_DONE];
    int failed = 0;
    WIRE_SET(v, D_TOPIC, failed, Py_NewRef(topic));
    WIRE_SET(v, D_PART, failed, Py_NewRef(partition));
    WIRE_SET(v, D_PID, failed, PyLong_FromLongLong(e->pid));
    WIRE_SET(v, D_EPOCH, failed, PyLong_FromLong(epoch));
    WIRE_SET(v, D_FIRST, failed, PyLong_FromLongLong(e->v[E_TFIRST]));
    WIRE_SET(v, D_LAST, failed, e->has[E_TLAST] ? PyLong_FromLongLong(e->v[E_TLAST]) : Py_NewRef(Py_None));
    WIRE_SET(v, D_OUTCOME, failed, Py_NewRef(st->outcome[ctype]));
    WIRE_SET(v, D_MARKER, failed, PyLong_FromLongLong(marker));
    WIRE_SET(v, D_COORD, failed, PyLong_FromLongLong(coord));
    WIRE_SET(v, D_START, failed, e->has[E_TSTART] ? PyLong_FromLongLong(e->v[E_TSTART]) : Py_NewRef(Py_None));
    WIRE_SET(v, D_END, failed, PyLong_FromLongLong(end_ts));
    WIRE_SET(v, D_LSO, failed, PyLong_FromLongLong(lso));
    return new_slotted(st->done.tp, st->done.off, v, N_DONE);
}

/* ProducerReplay.data's update of the producer's entry for a data batch whose checks passed (a
 * transaction it begins already recorded: txn_first, txn_start_ts and ongoing). */
static inline void
rf_data(rf_ent *e, int epoch, int32_t base_seq, int32_t delta, int64_t last_offset, int64_t max_ts, int is_txn)
{
    e->v[E_EPOCH] = epoch;
    /* DefaultRecordBatch.incrementSequence (BatchHeader.last_sequence) */
    e->v[E_SEQ] = base_seq == -1 ? -1
                  : ((int64_t)base_seq > (int64_t)INT32_MAX - delta
                         ? (int64_t)delta - ((int64_t)INT32_MAX - base_seq) - 1
                         : (int64_t)base_seq + delta);
    e->v[E_LOFF] = last_offset;
    e->v[E_LTS] = max_ts;
    if (is_txn) {
        e->v[E_TLAST] = last_offset;
        e->v[E_TLASTTS] = max_ts;
        e->has[E_TLAST] = e->has[E_TLASTTS] = 1;
    }
    e->dirty = 1;
}

/* The batches sp_replay_fold's loop would apply without a Python call, a lookup or a decision
 * beyond the rules: a batch of a non-idempotent producer, or a data batch of the producer looked up
 * last that begins no transaction and passes ProducerAppendInfo's checks -- each at or past start,
 * below end and stop (when CRCs of data batches are not checked). Returns where it stopped: the
 * batch the loop takes as it takes every batch, with the same result; its few variables stay in
 * registers. */
static Py_ssize_t
rf_fast_run(rf_table *t, const uint8_t *base, Py_ssize_t pos, Py_ssize_t hi, Py_ssize_t max_bytes,
            Py_ssize_t *scanned, Py_ssize_t *batches, Py_ssize_t *seen, int64_t start, int64_t end, int has_stop,
            int64_t stop)
{
    Py_ssize_t sc = *scanned, n = 0;
    int64_t limit = has_stop && stop < end ? stop : end; /* base offsets at or past it: the loop's */
    while (pos < hi && sc < max_bytes) {
        const uint8_t *h = base + pos;
        Py_ssize_t size = v2_batch_size(h, hi - pos);
        if (size == 0)
            break;
        int64_t base_offset = be64(h);
        int32_t delta = be32(h + 23);
        int64_t last_offset = base_offset + delta; /* cannot overflow: v2_batch_size checked it */
        if (base_offset >= limit || last_offset < start)
            break;
        int64_t pid = be64(h + 43);
        if (pid >= 0) {
            int16_t attr = be16(h + 21);
            int is_txn = (attr & ATTR_TRANSACTIONAL) != 0;
            if ((attr & ATTR_CONTROL) != 0 || t->last_k < 0 || pid != t->last_pid)
                break;
            rf_ent *e = &t->ents[t->last_k];
            int epoch = be16(h + 51);
            int txn_open = e->has[E_TFIRST];
            if (!check_producer_epoch(epoch, e->v[E_EPOCH]) || !check_txn_state(txn_open, is_txn) ||
                begins_txn(txn_open, is_txn))
                break;
            rf_data(e, epoch, be32(h + 53), delta, last_offset, be64(h + 35), is_txn);
        }
        n++;
        pos += size;
        sc += size;
    }
    *scanned = sc;
    *batches += n;
    *seen += n;
    return pos;
}

enum { RF_END = 0, RF_CHUNK = 1, RF_SLOW = 2 };

/* replay_fold(buf, pos, hi, producers, start, end, stop, check_data_crc, spans, span_floor,
 *             completed, topic, partition, max_bytes, ongoing, aborts_only, crcs_hold)
 *     -> (pos, batches, seen, reason)
 *
 * fold_batches in C: see kafkatx/storage/fold.py (fold._fold_py is the
 * pure-Python twin, batch for batch). Applies the batches of buf[pos:hi] to `producers` exactly
 * as the replay loop would (ProducerReplay.data / .marker), until a batch that needs Python
 * (reason RF_SLOW; the batch at the returned pos is not applied), max_bytes (RF_CHUNK) or hi
 * (RF_END). `batches` counts the batches applied (what the replay's `batches` counts), `seen`
 * the batches at or past `start`. `completed` gets a CompletedTxn per transaction a marker completes
 * (only the ABORTs with aborts_only: ProducerReplay.keep_aborts_only). crcs_hold: the caller checked
 * every CRC of buf[pos:hi] and each holds (verify's fold did): none is computed again. */
static PyObject *
sp_replay_fold(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    const replay_state *st = get_state(self);
    PyObject *buf, *producers, *spans, *sink, *topic, *partition, *ongoing;
    Py_ssize_t pos, hi, max_bytes;
    int64_t start, end, stop, span_floor;
    int has_stop, check_data_crc, aborts_only, crcs_hold;
    if (wire_args("replay_fold", args, nargs, "OnnOLLzpOLOOOnOpp", &buf, &pos, &hi, &producers, &start, &end,
                  &has_stop, &stop, &check_data_crc, &spans, &span_floor, &sink, &topic, &partition,
                  &max_bytes, &ongoing, &aborts_only, &crcs_hold) < 0)
        return NULL;
    if (st->entry.tp == NULL || st->done.tp == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "replay_setup() was not called");
        return NULL;
    }
    if (!PyDict_Check(producers) || (spans != Py_None && !PyList_Check(spans)) ||
        (sink != Py_None && !PyList_Check(sink)) || (ongoing != Py_None && !PyDict_Check(ongoing)) ||
        (sink == Py_None) != (ongoing == Py_None)) {
        PyErr_SetString(PyExc_TypeError, "replay_fold(): producers must be a dict, spans and completed lists, "
                                         "ongoing a dict exactly when completed is given");
        return NULL;
    }
    Py_buffer view;
    if (get_buffer(buf, &view, pos < hi ? pos : hi, hi) < 0)
        return NULL;
    const uint8_t *base = (const uint8_t *)view.buf;
    rf_table t;
    memset(&t, 0, sizeof t);
    t.st = st;
    t.producers = producers;
    t.ongoing = ongoing == Py_None ? NULL : ongoing;
    t.cap = 16;
    t.mask = 63;
    t.last_k = -1;
    t.ents = PyMem_Malloc(sizeof(rf_ent) * (size_t)t.cap);
    t.index = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(t.mask + 1));
    PyObject *result = NULL;
    Py_ssize_t batches = 0, seen = 0, scanned = 0;
    int reason = RF_END;
    if (t.ents == NULL || t.index == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i <= t.mask; i++)
        t.index[i] = -1;
    while (pos < hi) {
        if (!check_data_crc) {
            pos = rf_fast_run(&t, base, pos, hi, max_bytes, &scanned, &batches, &seen, start, end, has_stop, stop);
            if (pos >= hi)
                break;
        }
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
        int is_control = (attr & ATTR_CONTROL) != 0, is_txn = (attr & ATTR_TRANSACTIONAL) != 0;
        if (__builtin_add_overflow(base_offset, (int64_t)delta, &last_offset)) {
            reason = RF_SLOW; /* Python's ints do not overflow: let it */
            break;
        }
#define CRC_OK() (crcs_hold || v2_crc_holds(h, size))
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
            Py_ssize_t k = rf_find_or_get(&t, pid);
            if (k == RF_ERROR)
                goto done;
            if (k == RF_ODD || base_offset == INT64_MAX) {
                reason = RF_SLOW;
                break;
            }
            if (!check_end_txn_marker(epoch, coord, k == RF_ABSENT ? NO_PRODUCER_EPOCH : t.ents[k].v[E_EPOCH],
                                      k == RF_ABSENT ? NO_COORDINATOR_EPOCH : t.ents[k].v[E_COORD])) {
                reason = RF_SLOW; /* a stale marker: the finding is built in Python */
                break;
            }
            if (k == RF_ABSENT && (k = rf_new_last(&t, pid)) < 0)
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
                    if (!aborts_only || ctype == 0) {
                        /* ProducerStateManager.lastStableOffset(completedTxn), before completeTxn removes
                         * it; storage/lso.py txn_index_last_stable_offset: else the marker's offset + 1 */
                        int64_t lso;
                        int found = find_next_incomplete_txn(&t, pid, &lso);
                        if (found < 0)
                            goto done;
                        if (!found)
                            lso = base_offset + 1;
                        PyObject *c = rf_completed(st, topic, partition, e, epoch, ctype, base_offset, coord,
                                                   max_ts, lso);
                        if (c == NULL)
                            goto done;
                        int rc = PyList_Append(sink, c);
                        Py_DECREF(c);
                        if (rc < 0)
                            goto done;
                    }
                    rf_ongoing_remove(&t, k);
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
            e->dirty = 1;
            goto counted;
        }
        {
            Py_ssize_t k = rf_find_or_get(&t, pid);
            if (k == RF_ERROR)
                goto done;
            if (k == RF_ODD) {
                reason = RF_SLOW;
                break;
            }
            int txn_open = k != RF_ABSENT && t.ents[k].has[E_TFIRST];
            if (!check_producer_epoch(epoch, k == RF_ABSENT ? NO_PRODUCER_EPOCH : t.ents[k].v[E_EPOCH]) ||
                !check_txn_state(txn_open, is_txn)) {
                reason = RF_SLOW; /* producer-epoch / non-transactional-in-txn findings are built in Python */
                break;
            }
            if (t.ongoing != NULL && begins_txn(txn_open, is_txn)) {
                int in_order = ongoing_in_order(&t, base_offset);
                if (in_order < 0)
                    goto done;
                if (!in_order) {
                    reason = RF_SLOW; /* offsets that go back: ProducerReplay.begin_txn re-sorts ongoing */
                    break;
                }
            }
            if (k == RF_ABSENT && (k = rf_new_last(&t, pid)) < 0)
                goto done;
            rf_ent *e = &t.ents[k];
            if (begins_txn(txn_open, is_txn)) {
                e->v[E_TFIRST] = base_offset;
                e->v[E_TSTART] = max_ts;
                e->has[E_TFIRST] = e->has[E_TSTART] = 1;
                if (t.ongoing != NULL && rf_ongoing_put(&t, k, base_offset) < 0)
                    goto done;
            }
            rf_data(e, epoch, base_seq, delta, last_offset, max_ts, is_txn);
        }
    counted:
        batches++;
        seen++;
    next:
        pos += size;
        scanned += size;
#undef CRC_OK
    }
    if (rf_flush(&t) < 0 || rf_ongoing_flush(&t) < 0)
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
     "topic, partition, max_bytes, ongoing, aborts_only, crcs_hold) -> (pos, batches, seen, reason)"},
    {NULL, NULL, 0, NULL}};

static int
rp_traverse(PyObject *m, visitproc visit, void *arg)
{
    replay_state *st = get_state(m);
    Py_VISIT(st->entry.tp);
    Py_VISIT(st->done.tp);
    Py_VISIT(st->outcome[0]);
    Py_VISIT(st->outcome[1]);
    return 0;
}

static int
rp_clear(PyObject *m)
{
    replay_state *st = get_state(m);
    Py_CLEAR(st->entry.tp);
    Py_CLEAR(st->done.tp);
    Py_CLEAR(st->outcome[0]);
    Py_CLEAR(st->outcome[1]);
    return 0;
}

static void
rp_free(void *m)
{
    rp_clear((PyObject *)m);
}

/* The txn layer's constants beside the shared ones: replay_fold's reasons (txn.fold.FOLD_END,
 * FOLD_CHUNK, FOLD_SLOW) and the field lists of the classes replay_setup takes. */
static int
rp_exec(PyObject *m)
{
    if (wire_exec(m) < 0 || PyModule_AddIntConstant(m, "FOLD_END", RF_END) < 0 ||
        PyModule_AddIntConstant(m, "FOLD_CHUNK", RF_CHUNK) < 0 || PyModule_AddIntConstant(m, "FOLD_SLOW", RF_SLOW) < 0)
        return -1;
    if (wire_add_names(m, "ENTRY_FIELDS", ent_names, N_ENT) < 0)
        return -1;
    return wire_add_names(m, "COMPLETED_FIELDS", done_names, N_DONE);
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
    .m_doc = "Compiled producer-state fold for kafkatx.storage.fold (optional; see _replay.c).",
    .m_size = sizeof(replay_state),
    .m_methods = rp_methods,
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
