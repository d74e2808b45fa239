/*
 * kafkatx.format._fold -- the compiled segment fold of segment_fold.py.
 *
 *   setup(BatchHeader, FoldEvent) -> None   (fold_segment refuses to run before it)
 *       The classes fold_segment makes: record_batch.BatchHeader (slots resolved as _wire.h says)
 *       and segment_fold.FoldEvent (a 7-field namedtuple, i.e. a tuple subclass without
 *       instance dict).
 *
 *   fold_segment(buf, start, end, crc_mode, breaks, seg_base, prev_last, want_table, max_bytes)
 *       -> (events, pos, batches, prev_last, order, table)
 *       One chunk of kafkatx.format.segment_fold: the producer-state events of the
 *       consecutive clean magic-2 batches from pos (runs of one producer's data batches,
 *       control batches with their CRC and plain control record, batches whose checked
 *       CRC fails), offsets that go back, and optionally the (position, base, last,
 *       max timestamp) int64 table. crc_mode 3: every CRC, and events only for the
 *       batches whose CRC fails (verify's pass: no runs, no control records read);
 *       crc_mode 4: no CRC and no events, the table and the order only (dump-index --verify).
 *       Mirrors segment_fold.fold_chunk_py event for event; only the first
 *       and last header of a run become BatchHeader objects.
 *
 *   increasing(values) -> bool
 *       Whether every value is strictly above the one before (segment_fold.increasing).
 *
 *   entries_at_batches(table, positions, offsets, lo, hi, base) -> bool
 *       Whether every index entry in [lo, hi) is at a batch of the table (segment_fold.entries_at_batches).
 *
 *   time_entries_at_batches(table, offsets, stamps, lo) -> (hi, holds)
 *       The time index entries the table reaches and whether each is at its batch
 *       (segment_fold.time_entries_at_batches).
 *
 *   bisect_many(a, xs, exact) -> list
 *       bisect.bisect_left(a, x) of every x over an int64 buffer (a table column), in one call.
 */
#include "_framer.h"

/* The module's state (PEP 489 multi-phase init: one per module object, no mutable static): the
 * classes setup() registered. */
typedef struct {
    wire_cls header;          /* record_batch.BatchHeader */
    PyTypeObject *event_type; /* segment_fold.FoldEvent: a 7-field namedtuple (a tuple subclass without
                               * instance dict); fold_segment makes its events as instances of it */
} fold_state;

static inline fold_state *
get_state(PyObject *module)
{
    return (fold_state *)PyModule_GetState(module);
}

#define TABLE_ROW 32 /* (position, base offset, last offset, max timestamp) as native int64 */
#define TABLE_FIRST_ROWS (1 << 16) /* rows the table has room for at first, at most (it grows past) */

typedef struct {
    PyObject *first;     /* the first batch's header (owned) */
    Py_ssize_t last_pos; /* a run: its last batch's position */
    Py_ssize_t count;
    int64_t pid;
    int epoch, txn, single, crc_ok, parsed, ctype;
    int64_t coord;       /* -1: none */
} fold_ev;

typedef struct {
    int64_t pid;
    Py_ssize_t ev;   /* the producer's open run (an index into the events) */
    uint64_t gen;    /* the run is open while this equals the current generation */
    int used;
} run_slot;

static Py_ssize_t
slot_find(run_slot *t, Py_ssize_t mask, int64_t pid)
{
    Py_ssize_t i = (Py_ssize_t)(((uint64_t)pid * 0x9E3779B97F4A7C15ull) >> 20) & mask;
    while (t[i].used && t[i].pid != pid)
        i = (i + 1) & mask;
    return i;
}

/* One batch's table row at ``row``: (position, base offset, last offset, max timestamp) as four scalar
 * stores (a row built on the stack and copied whole stalls store forwarding). */
static inline void
table_row_put(char *row, const kx_header *r)
{
    int64_t at = (int64_t)r->position, max_ts = kx_max_timestamp(r);
    memcpy(row, &at, 8);
    memcpy(row + 8, &r->base_offset, 8);
    memcpy(row + 16, &r->last_offset, 8);
    memcpy(row + 24, &max_ts, 8);
}

/* verify's pass (crc_mode FOLD_CRC_FAILS_ONLY) over the batches that need nothing but their table row:
 * a whole magic-2 batch whose offsets move forward (a previous batch is known: *prev_last) and whose
 * CRC holds, while the table has room. Returns where it stopped: the batch the loop in fold_segment
 * takes as it takes every batch (or the end), so both give the same result; the fewer variables
 * here stay in registers. A batch ending at or before clean_until had its CRC checked by crc_clean_walk
 * (it holds): not computed again. */
static Py_ssize_t
fold_clean_run(const uint8_t *base, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t max_bytes, Py_ssize_t *scanned,
               Py_ssize_t *batches, int64_t seg_base, int64_t *prev_last, const int64_t *breaks, Py_ssize_t nbreaks,
               Py_ssize_t *bi, uint64_t *gen, char *table, Py_ssize_t *table_len, Py_ssize_t table_cap,
               Py_ssize_t clean_until)
{
    Py_ssize_t sc = *scanned, n = *batches, tl = *table_len, b = *bi;
    int64_t prev = *prev_last;
    uint64_t g = *gen;
    kx_walk w = {base, pos, end};
    kx_header r;
    while (sc < max_bytes && kx_frame_here(&w, &r) == KX_FRAMED) {
        if (r.base_offset < seg_base || r.base_offset <= prev || (table != NULL && tl + TABLE_ROW > table_cap) ||
            (r.position + r.size > clean_until && !kx_crc_holds(&r)))
            break; /* not taken here: fold_segment's loop takes it */
        kx_take(&w, &r);
        if (r.last_offset > prev)
            prev = r.last_offset;
        if (table != NULL) {
            table_row_put(table + tl, &r);
            tl += TABLE_ROW;
        }
        while (b < nbreaks && r.base_offset >= breaks[b]) {
            b++;
            g++;
        }
        n++;
        sc += r.size;
    }
    *scanned = sc;
    *batches = n;
    *table_len = tl;
    *bi = b;
    *prev_last = prev;
    *gen = g;
    return w.pos;
}

static PyObject *
sp_fold_segment(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    fold_state *st = get_state(self);
    const wire_cls *hc = &st->header;
    PyObject *buf, *breaks_arg;
    Py_ssize_t pos, end, max_bytes, clean_until;
    long crc_mode;
    int64_t seg_base, prev_last;
    int have_prev, want_table;
    if (wire_args("fold_segment", args, nargs, "OnnlOLzpnn", &buf, &pos, &end, &crc_mode, &breaks_arg, &seg_base,
                  &have_prev, &prev_last, &want_table, &max_bytes, &clean_until) < 0)
        return NULL;
    if (hc->tp == NULL || st->event_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "setup() was not called");
        return NULL;
    }
    PyTypeObject *event_type = st->event_type;
    PyObject *breaks_seq = PySequence_Fast(breaks_arg, "breaks must be a sequence of offsets");
    if (breaks_seq == NULL)
        return NULL;
    Py_ssize_t nbreaks = PySequence_Fast_GET_SIZE(breaks_seq);
    int64_t *breaks = PyMem_Malloc(sizeof(int64_t) * (size_t)(nbreaks + 1));
    if (breaks == NULL) {
        Py_DECREF(breaks_seq);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < nbreaks; i++) {
        breaks[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(breaks_seq, i));
        if (breaks[i] == -1 && PyErr_Occurred()) {
            Py_DECREF(breaks_seq);
            PyMem_Free(breaks);
            return NULL;
        }
    }
    Py_DECREF(breaks_seq);
    Py_buffer view;
    if (get_buffer(buf, &view, pos < end ? pos : end, end) < 0) {
        PyMem_Free(breaks);
        return NULL;
    }
    const uint8_t *base = (const uint8_t *)view.buf;
    Py_ssize_t nev = 0, cap_ev = 64, mask = 63, nslots_used = 0;
    fold_ev *evs = PyMem_Calloc((size_t)cap_ev, sizeof(fold_ev));
    run_slot *slots = PyMem_Calloc((size_t)(mask + 1), sizeof(run_slot));
    /* the table: written straight into the bytearray returned (no copy), sized for the most batches
     * the chunk can hold (each at least HEADER_SIZE bytes; at most TABLE_FIRST_ROWS at first) */
    PyObject *tbl = NULL;
    char *table = NULL;
    Py_ssize_t table_len = 0, table_cap = 0;
    PyObject *order = PyList_New(0);
    PyObject *result = NULL;
    uint64_t gen = 1;
    Py_ssize_t bi = 0, batches = 0, scanned = 0;
    if (evs == NULL || slots == NULL || order == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (want_table) {
        Py_ssize_t span = end - pos < max_bytes ? end - pos : max_bytes;
        Py_ssize_t rows = span > 0 ? span / HEADER_SIZE + 1 : 0;
        if (rows > TABLE_FIRST_ROWS)
            rows = TABLE_FIRST_ROWS;
        tbl = PyByteArray_FromStringAndSize(NULL, rows * TABLE_ROW);
        if (tbl == NULL)
            goto done;
        table = PyByteArray_AS_STRING(tbl);
        table_cap = rows * TABLE_ROW;
    }
    kx_walk w = {base, pos, end};
    kx_header r;
    while (w.pos < end && scanned < max_bytes) {
        if (crc_mode == FOLD_CRC_FAILS_ONLY && have_prev) {
            w.pos = fold_clean_run(base, w.pos, end, max_bytes, &scanned, &batches, seg_base, &prev_last, breaks,
                                   nbreaks, &bi, &gen, want_table ? table : NULL, &table_len, table_cap, clean_until);
            if (!(w.pos < end && scanned < max_bytes))
                break;
        }
        if (kx_frame_next(&w, &r, 0) == KX_NONE)
            break;
        scanned += r.size;
        const int64_t base_offset = r.base_offset, pid = kx_producer_id(&r);
        const int epoch = kx_producer_epoch(&r), is_txn = kx_transactional(&r);
        batches++;
        /* offsets only move forward (verify) */
        if (base_offset < seg_base || (have_prev && base_offset <= prev_last)) {
            PyObject *pl = have_prev ? PyLong_FromLongLong(prev_last) : Py_NewRef(Py_None);
            if (pl == NULL)
                goto done;
            PyObject *t = Py_BuildValue("(inLN)", base_offset < seg_base ? 0 : 1, r.position, (long long)base_offset,
                                        pl);
            if (t == NULL)
                goto done;
            int rc = PyList_Append(order, t);
            Py_DECREF(t);
            if (rc < 0)
                goto done;
        }
        prev_last = (!have_prev || r.last_offset > prev_last) ? r.last_offset : prev_last;
        have_prev = 1;
        if (want_table) {
            if (table_len + TABLE_ROW > table_cap) {
                Py_ssize_t nc;
                if (table_cap > PY_SSIZE_T_MAX / 2 - TABLE_ROW) {
                    PyErr_NoMemory();
                    goto done;
                }
                nc = table_cap * 2 + TABLE_ROW;
                if (PyByteArray_Resize(tbl, nc) < 0)
                    goto done;
                table = PyByteArray_AS_STRING(tbl);
                table_cap = nc;
            }
            table_row_put(table + table_len, &r);
            table_len += TABLE_ROW;
        }
        /* a break offset ends every open run: no run spans one */
        while (bi < nbreaks && base_offset >= breaks[bi]) {
            bi++;
            gen++;
        }
        if (crc_mode == FOLD_TABLE_ONLY)  /* the table and the order problems, no CRC, no event */
            continue;
        if (nev == cap_ev) {
            fold_ev *ne = PyMem_Realloc(evs, sizeof(fold_ev) * (size_t)cap_ev * 2);
            if (ne == NULL) {
                PyErr_NoMemory();
                goto done;
            }
            evs = ne;
            memset(evs + cap_ev, 0, sizeof(fold_ev) * (size_t)cap_ev);
            cap_ev *= 2;
        }
        int single = 0, crc_ok = 1, parsed = 0, ctype = -1;
        int64_t coord = -1;
        if (crc_mode == FOLD_CRC_FAILS_ONLY) {
            /* every CRC (one crc_clean_walk checked, up to clean_until, holds); an event only where it fails
             * (no runs, no markers) */
            if (r.position + r.size <= clean_until || kx_crc_holds(&r))
                continue;
            single = 1;
            crc_ok = 0;
        }
        else if (kx_control(&r) && pid >= 0) {
            single = 1;
            crc_ok = kx_crc_holds(&r);
            if (crc_ok && kx_records_count(&r) != 0)
                parsed = parse_control(&r, &ctype, &coord);
        }
        else if (crc_mode >= 2 || (crc_mode == 1 && !kx_control(&r))) {
            crc_ok = kx_crc_holds(&r);
            single = !crc_ok;
        }
        int64_t key = pid >= 0 ? pid : -1;
        Py_ssize_t si = slot_find(slots, mask, key);
        if (!single && slots[si].used && slots[si].gen == gen) {
            fold_ev *e = &evs[slots[si].ev];
            if (key < 0 || (e->epoch == epoch && e->txn == is_txn)) {
                e->last_pos = r.position;
                e->count++;
                continue;
            }
        }
        fold_ev *e = &evs[nev];
        e->first = kx_new_header(hc, &r);
        if (e->first == NULL)
            goto done;
        e->last_pos = r.position;
        e->count = 1;
        e->pid = pid;
        e->epoch = epoch;
        e->txn = is_txn;
        e->single = single;
        e->crc_ok = crc_ok;
        e->parsed = parsed;
        e->ctype = ctype;
        e->coord = coord;
        if (single) {
            if (slots[si].used)
                slots[si].gen = 0; /* closed: the producer's next data batch starts a new run */
        }
        else {
            if (!slots[si].used) {
                nslots_used++;
                slots[si].used = 1;
                slots[si].pid = key;
            }
            slots[si].gen = gen;
            slots[si].ev = nev;
        }
        nev++;
        if (nslots_used * 2 > mask) {
            /* grow the table: rehash the live entries */
            Py_ssize_t nmask = mask * 2 + 1;
            run_slot *ns = PyMem_Calloc((size_t)(nmask + 1), sizeof(run_slot));
            if (ns == NULL) {
                PyErr_NoMemory();
                goto done;
            }
            nslots_used = 0;
            for (Py_ssize_t i = 0; i <= mask; i++) {
                if (slots[i].used && slots[i].gen == gen) {
                    Py_ssize_t j = slot_find(ns, nmask, slots[i].pid);
                    ns[j] = slots[i];
                    nslots_used++;
                }
            }
            PyMem_Free(slots);
            slots = ns;
            mask = nmask;
        }
    }
    {
        PyObject *events = PyList_New(nev);
        if (events == NULL)
            goto done;
        for (Py_ssize_t i = 0; i < nev; i++) {
            fold_ev *e = &evs[i];
            PyObject *last;
            if (e->count > 1) {
                /* the run's last batch, framed again (cheaper than keeping every row) */
                last = kx_frame(base + e->last_pos, end - e->last_pos, e->last_pos, &r) ? kx_new_header(hc, &r) : NULL;
                if (last == NULL) {
                    if (!PyErr_Occurred())
                        PyErr_SetString(PyExc_SystemError, "fold_segment(): a run's last batch no longer frames");
                    Py_DECREF(events);
                    goto done;
                }
            }
            else
                last = Py_NewRef(Py_None);
            PyObject *v[3];
            int failed = 0;
            WIRE_SET(v, 0, failed, e->parsed ? PyLong_FromLong(e->ctype) : Py_NewRef(Py_None));
            WIRE_SET(v, 1, failed, (e->parsed && (e->ctype == CONTROL_ABORT || e->ctype == CONTROL_COMMIT))
                                       ? PyLong_FromLongLong(e->coord) : Py_NewRef(Py_None));
            WIRE_SET(v, 2, failed, PyLong_FromSsize_t(e->count));
            PyObject *ct = v[0], *ce = v[1], *cnt = v[2];
            PyObject *t = failed ? NULL : event_type->tp_alloc(event_type, 7);
            if (t == NULL) {
                Py_XDECREF(ct);
                Py_XDECREF(ce);
                Py_XDECREF(cnt);
                Py_DECREF(last);
                Py_DECREF(events);
                goto done;
            }
            /* the items: references handed to the tuple (the first header's is shared with evs) */
            PyTuple_SET_ITEM(t, 0, Py_NewRef(e->first));
            PyTuple_SET_ITEM(t, 1, last);
            PyTuple_SET_ITEM(t, 2, cnt);
            PyTuple_SET_ITEM(t, 3, Py_NewRef(e->crc_ok ? Py_True : Py_False));
            PyTuple_SET_ITEM(t, 4, ct);
            PyTuple_SET_ITEM(t, 5, ce);
            PyTuple_SET_ITEM(t, 6, Py_NewRef(e->parsed ? Py_True : Py_False));
            PyList_SET_ITEM(events, i, t);
        }
        if (tbl != NULL && PyByteArray_Resize(tbl, table_len) < 0) {
            Py_DECREF(events);
            goto done;
        }
        PyObject *pl = have_prev ? PyLong_FromLongLong(prev_last) : Py_NewRef(Py_None);
        if (pl == NULL) {
            Py_DECREF(events);
            goto done;
        }
        result = Py_BuildValue("(NnnNOO)", events, w.pos, batches, pl, order, tbl != NULL ? tbl : Py_None);
    }
done:
    PyBuffer_Release(&view);
    if (evs != NULL) {
        for (Py_ssize_t i = 0; i < nev; i++)
            Py_XDECREF(evs[i].first);
        PyMem_Free(evs);
    }
    PyMem_Free(slots);
    Py_XDECREF(tbl);
    PyMem_Free(breaks);
    Py_XDECREF(order);
    return result;
}

/* bisect_many(a, xs, exact) -> list: [bisect.bisect_left(a, x) for x in xs] for a buffer a of native
 * int64 in non-decreasing order (a column of fold_segment's table); exact: -k-1 where a[k] != x (x is
 * not in a). segment_fold.bisect_many is the Python twin; verify looks up every index entry of a
 * chunk in its batch table with it (one call, not a Python bisect per entry). */
static PyObject *
sp_bisect_many(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *a_arg, *xs_arg;
    int exact;
    if (wire_args("bisect_many", args, nargs, "OOp", &a_arg, &xs_arg, &exact) < 0)
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(a_arg, &view, PyBUF_FORMAT) < 0)
        return NULL;
    /* native signed int64 items (array('q')), or raw bytes holding them (fold_segment's table) */
    const char *fmt = view.format != NULL ? view.format : "B";
    if (*fmt == '@' || *fmt == '=')
        fmt++;
    int int64_items = view.itemsize == 8 && (strcmp(fmt, "q") == 0 || strcmp(fmt, "l") == 0);
    if (!(int64_items || (view.itemsize == 1 && strcmp(fmt, "B") == 0)) || view.len % 8 != 0) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "bisect_many() needs a buffer of native int64 values");
        return NULL;
    }
    const char *a = (const char *)view.buf;
    Py_ssize_t n = view.len / 8;
    PyObject *seq = PySequence_Fast(xs_arg, "bisect_many() needs a sequence of ints");
    if (seq == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    Py_ssize_t m = PySequence_Fast_GET_SIZE(seq);
    PyObject *out = PyList_New(m);
    long long prev_x = 0;
    Py_ssize_t prev_k = -1; /* bisect_left of prev_x (-1: none yet) */
    for (Py_ssize_t j = 0; out != NULL && j < m; j++) {
        int overflow = 0;
        long long x = PyLong_AsLongLongAndOverflow(PySequence_Fast_GET_ITEM(seq, j), &overflow);
        if (x == -1 && PyErr_Occurred()) {
            Py_CLEAR(out);
            break;
        }
        Py_ssize_t lo = 0, hi = n;
        if (overflow > 0)
            lo = n; /* above every int64 */
        else if (overflow == 0) {
            if (prev_k >= 0 && x >= prev_x) {
                /* xs in order (the usual case): gallop from the previous answer; every a[i] below
                 * it is < prev_x <= x */
                Py_ssize_t step = 1;
                int64_t v;
                lo = prev_k;
                while (lo + step < n) {
                    memcpy(&v, a + (lo + step - 1) * 8, 8);
                    if (v >= x)
                        break;
                    lo += step;
                    step <<= 1;
                }
                hi = lo + step < n ? lo + step : n;
            }
            while (lo < hi) {
                Py_ssize_t mid = lo + (hi - lo) / 2;
                int64_t v;
                memcpy(&v, a + mid * 8, 8);
                if (v < x)
                    lo = mid + 1;
                else
                    hi = mid;
            }
        }
        Py_ssize_t k = lo;
        if (overflow == 0) {
            prev_x = x;
            prev_k = k;
        }
        if (exact) {
            int64_t v = 0;
            if (k < n)
                memcpy(&v, a + k * 8, 8);
            if (overflow != 0 || k == n || v != x)
                k = -k - 1;
        }
        PyObject *o = PyLong_FromSsize_t(k);
        if (o == NULL) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, j, o);
    }
    Py_DECREF(seq);
    PyBuffer_Release(&view);
    return out;
}


/* A column of ints: a native int32/int64 buffer (an index file's array('i'), a table's array('q'))
 * read in place, else the items of a sequence (a list: no copy). */
typedef struct {
    Py_buffer view;
    int width;           /* 4 or 8: the buffer's; 0: the sequence's items */
    PyObject *seq;
    PyObject *const *items;
    Py_ssize_t n;
} int_col;

static int
int_col_open(PyObject *o, int_col *c, const char *what)
{
    memset(c, 0, sizeof *c);
    if (PyObject_CheckBuffer(o) && !PyBytes_Check(o) && !PyByteArray_Check(o)) {
        if (PyObject_GetBuffer(o, &c->view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) == 0) {
            const char *fmt = c->view.format != NULL ? c->view.format : "B";
            if (*fmt == '@' || *fmt == '=')
                fmt++;
            if (c->view.itemsize == 4 && strcmp(fmt, "i") == 0)
                c->width = 4;
            else if (c->view.itemsize == 8 && (strcmp(fmt, "q") == 0 || strcmp(fmt, "l") == 0))
                c->width = 8;
            if (c->width) {
                c->n = c->view.len / c->width;
                return 0;
            }
            PyBuffer_Release(&c->view);
        }
        else
            PyErr_Clear(); /* not a plain buffer: read it as a sequence */
    }
    c->seq = PySequence_Fast(o, what);
    if (c->seq == NULL)
        return -1;
    c->items = PySequence_Fast_ITEMS(c->seq);
    c->n = PySequence_Fast_GET_SIZE(c->seq);
    return 0;
}

static void
int_col_close(int_col *c)
{
    if (c->width)
        PyBuffer_Release(&c->view);
    Py_XDECREF(c->seq);
}

/* A batch table (whole TABLE_ROW rows, read in place) and two int columns, the arguments of
 * entries_at_batches and time_entries_at_batches: all opened, or none (-1, the error set, nothing held).
 * The callers read copies of the fields; table_cols_close releases what was opened, once. */
typedef struct {
    Py_buffer view;
    int_col a, b;
} table_cols;

static int
table_cols_open(table_cols *t, const char *fn, PyObject *tbl, PyObject *a, PyObject *b)
{
    char what[96];
    if (PyObject_GetBuffer(tbl, &t->view, PyBUF_SIMPLE) < 0)
        return -1;
    if (t->view.len % TABLE_ROW != 0) {
        PyBuffer_Release(&t->view);
        PyErr_Format(PyExc_ValueError, "%s() needs a table of whole rows", fn);
        return -1;
    }
    PyOS_snprintf(what, sizeof what, "%s() needs sequences of ints", fn);
    if (int_col_open(a, &t->a, what) < 0) {
        PyBuffer_Release(&t->view);
        return -1;
    }
    if (int_col_open(b, &t->b, what) < 0) {
        int_col_close(&t->a);
        PyBuffer_Release(&t->view);
        return -1;
    }
    return 0;
}

static void
table_cols_close(table_cols *t)
{
    int_col_close(&t->b);
    int_col_close(&t->a);
    PyBuffer_Release(&t->view);
}

/* Item i as int64: 0 done (*overflow: past int64 that way, *v then meaningless), -1 error set (not an int). */
static inline int
int_col_get(const int_col *c, Py_ssize_t i, long long *v, int *overflow)
{
    *overflow = 0;
    if (c->width == 4) {
        int32_t x;
        memcpy(&x, (const char *)c->view.buf + i * 4, 4);
        *v = x;
        return 0;
    }
    if (c->width == 8) {
        int64_t x;
        memcpy(&x, (const char *)c->view.buf + i * 8, 8);
        *v = x;
        return 0;
    }
    *v = PyLong_AsLongLongAndOverflow(c->items[i], overflow);
    return *v == -1 && PyErr_Occurred() ? -1 : 0;
}

/* increasing(values) -> bool: every value of the sequence strictly above the one before (an index
 * file's offsets and positions: verify's SegmentIndexCheck asks before it looks an entry up).
 * segment_fold.increasing is the Python twin. Values past int64 are compared as Python ints. */
static PyObject *
sp_increasing(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *arg;
    if (wire_args("increasing", args, nargs, "O", &arg) < 0)
        return NULL;
    int_col c;
    if (int_col_open(arg, &c, "increasing() needs a sequence of ints") < 0)
        return NULL;
    int holds = 1, have_prev = 0;
    long long prev = 0;
    for (Py_ssize_t i = 0; holds && i < c.n; i++) {
        int overflow = 0;
        long long v = 0;
        int is_int = c.width != 0 || PyLong_Check(c.items[i]);
        if (is_int && int_col_get(&c, i, &v, &overflow) < 0) {
            int_col_close(&c);
            return NULL;
        }
        if (!is_int || overflow || (!have_prev && i > 0)) {
            /* not an int64 (or after one): Python's comparison with the neighbour */
            if (i > 0) {
                int lt = PyObject_RichCompareBool(c.items[i - 1], c.items[i], Py_LT);
                if (lt < 0) {
                    int_col_close(&c);
                    return NULL;
                }
                holds = lt;
            }
            have_prev = is_int && !overflow;
            prev = v;
            continue;
        }
        if (have_prev)
            holds = prev < v;
        prev = v;
        have_prev = 1;
    }
    int_col_close(&c);
    return Py_NewRef(holds ? Py_True : Py_False);
}

/* entries_at_batches(table, positions, offsets, lo, hi, base) -> bool: does every index entry j in
 * [lo, hi) (positions[j], base + offsets[j]; positions in increasing order) name the position where
 * a batch of the table starts, one whose base offset is at or below base + offsets[j]?
 * segment_fold.entries_at_batches is the Python twin; verify's SegmentIndexCheck.table asks it per
 * chunk and states the rule per entry (its rows) only when the answer is no. The columns: native
 * int buffers (read in place) or sequences of ints. A position past int64 is no. */
static PyObject *
sp_entries_at_batches(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *tbl_arg, *pos_arg, *off_arg, *base_arg;
    Py_ssize_t lo, hi;
    if (wire_args("entries_at_batches", args, nargs, "OOOnnO", &tbl_arg, &pos_arg, &off_arg, &lo, &hi, &base_arg)
        < 0)
        return NULL;
    int bover = 0;
    long long obase = PyLong_AsLongLongAndOverflow(base_arg, &bover);
    if (obase == -1 && PyErr_Occurred())
        return NULL;
    if (bover) {
        PyErr_SetString(PyExc_OverflowError, "entries_at_batches(): the base offset is past int64");
        return NULL;
    }
    if (lo < 0 || hi < lo) {
        PyErr_SetString(PyExc_ValueError, "entries_at_batches(): bad entry range");
        return NULL;
    }
    table_cols tc;
    if (table_cols_open(&tc, "entries_at_batches", tbl_arg, pos_arg, off_arg) < 0)
        return NULL;
    Py_buffer view = tc.view;
    int_col pc = tc.a, oc = tc.b;
    PyObject *result = NULL;
    Py_ssize_t ph = hi < pc.n ? hi : pc.n, oh = hi < oc.n ? hi : oc.n; /* as a slice clamps */
    Py_ssize_t m = ph > lo ? ph - lo : 0;
    if ((oh > lo ? oh - lo : 0) != m) {
        PyErr_SetString(PyExc_ValueError, "entries_at_batches(): positions and offsets differ in length");
        goto done;
    }
    const char *rows = (const char *)view.buf;
    Py_ssize_t n = view.len / TABLE_ROW, k = 0;
    int holds = 1;
    for (Py_ssize_t j = lo; holds && j < lo + m; j++) {
        int o1 = 0, o2 = 0;
        long long p, off;
        if (int_col_get(&pc, j, &p, &o1) < 0 || int_col_get(&oc, j, &off, &o2) < 0)
            goto done;
        if (o1) {  /* no batch starts past int64 */
            holds = 0;
            break;
        }
        int past = 0; /* base + offsets[j] past int64: 1 above, -1 below every base offset */
        if (o2) {
            PyObject *sum = PyNumber_Add(oc.items[j], base_arg);
            if (sum == NULL)
                goto done;
            off = PyLong_AsLongLongAndOverflow(sum, &past);
            Py_DECREF(sum);
            if (off == -1 && PyErr_Occurred())
                goto done;
        }
        else if (__builtin_add_overflow(off, obase, &off))
            past = obase > 0 ? 1 : -1;
        /* the first row at or after p, from the last one found (the positions increase) */
        Py_ssize_t a = k, b = n;
        while (a < b) {
            Py_ssize_t mid = a + (b - a) / 2;
            int64_t v;
            memcpy(&v, rows + mid * TABLE_ROW, 8);
            if (v < p)
                a = mid + 1;
            else
                b = mid;
        }
        k = a;
        int64_t at = 0, start = 0;
        if (k < n) {
            memcpy(&at, rows + k * TABLE_ROW, 8);
            memcpy(&start, rows + k * TABLE_ROW + 8, 8);
        }
        holds = k < n && at == p && (past > 0 || (past == 0 && off >= start));
    }
    result = Py_NewRef(holds ? Py_True : Py_False);
done:
    table_cols_close(&tc);
    return result;
}

/* time_entries_at_batches(table, offsets, stamps, lo) -> (hi, holds): the time index entries a chunk's
 * batches reach, hi = bisect.bisect_right(offsets, the table's highest last offset, lo), and whether
 * each entry j in [lo, hi) sits where Kafka's TimeIndex.maybeAppend put it: at the first batch whose
 * last offset, or one before it, reaches offsets[j] (bisect_left over the running maximum), a batch
 * holding it (base offset at or below it) whose max timestamp is stamps[j].
 * segment_fold.time_entries_at_batches is the Python twin; verify's SegmentIndexCheck.table asks it
 * per chunk and states the rule per entry (its rows) only when the answer is no. Columns: native int
 * buffers or sequences of ints; a value past int64 is compared as the Python int it is. */
static PyObject *
sp_time_entries_at_batches(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *tbl_arg, *off_arg, *ts_arg;
    Py_ssize_t lo;
    if (wire_args("time_entries_at_batches", args, nargs, "OOOn", &tbl_arg, &off_arg, &ts_arg, &lo) < 0)
        return NULL;
    table_cols cols;
    if (table_cols_open(&cols, "time_entries_at_batches", tbl_arg, off_arg, ts_arg) < 0)
        return NULL;
    Py_buffer view = cols.view;
    int_col oc = cols.a, tc = cols.b;
    PyObject *result = NULL;
    int64_t *reach = NULL;
    if (oc.n != tc.n) {
        PyErr_SetString(PyExc_ValueError, "time_entries_at_batches(): offsets and stamps differ in length");
        goto done;
    }
    if (lo < 0 || lo > oc.n) {
        PyErr_SetString(PyExc_ValueError, "time_entries_at_batches(): bad entry range");
        goto done;
    }
    const char *rows = (const char *)view.buf;
    Py_ssize_t n = view.len / TABLE_ROW;
    if (n == 0) {
        result = Py_BuildValue("(nO)", lo, Py_True);
        goto done;
    }
    reach = PyMem_Malloc((size_t)n * sizeof *reach);
    if (reach == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    int64_t top = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        int64_t last;
        memcpy(&last, rows + k * TABLE_ROW + 16, 8);
        top = k == 0 || last > top ? last : top;
        reach[k] = top;
    }
    /* hi: bisect_right(offsets, top, lo), step for step */
    Py_ssize_t a = lo, b = oc.n;
    while (a < b) {
        Py_ssize_t mid = a + (b - a) / 2;
        int over = 0;
        long long v;
        if (int_col_get(&oc, mid, &v, &over) < 0)
            goto done;
        if (over > 0 || (over == 0 && top < v))
            b = mid;
        else
            a = mid + 1;
    }
    Py_ssize_t hi = a;
    int holds = 1;
    for (Py_ssize_t j = lo; holds && j < hi; j++) {
        int o1 = 0, o2 = 0;
        long long off, ts;
        if (int_col_get(&oc, j, &off, &o1) < 0 || int_col_get(&tc, j, &ts, &o2) < 0)
            goto done;
        if (o1 || o2) {  /* past int64: below every base (or above every reach), or no max timestamp */
            holds = 0;
            break;
        }
        Py_ssize_t x = 0, y = n; /* bisect_left(reach, off) */
        while (x < y) {
            Py_ssize_t mid = x + (y - x) / 2;
            if (reach[mid] < off)
                x = mid + 1;
            else
                y = mid;
        }
        int64_t start = 0, maxts = 0;
        if (x < n) {
            memcpy(&start, rows + x * TABLE_ROW + 8, 8);
            memcpy(&maxts, rows + x * TABLE_ROW + 24, 8);
        }
        holds = x < n && off >= start && maxts == ts;
    }
    result = Py_BuildValue("(nO)", hi, holds ? Py_True : Py_False);
done:
    PyMem_Free(reach);
    table_cols_close(&cols);
    return result;
}

/* setup(BatchHeader, FoldEvent): both checked before either is kept (a refused setup changes nothing). */
/* crc_clean_walk(buf, start, end, cell) -> int: from start, the whole magic-2 batches (framed as every walker
 * frames them: kx_frame_next, within end) whose CRC holds; where the walk stopped (the first batch that is not
 * such a batch, or end). cell: a writable buffer of two int64: the walk stores in cell[0] where the clean
 * batches end so far, after each batch, and stops early once cell[1] is not 0. The GIL is released for the
 * whole walk: verify runs it on another thread ahead of its fold (segment_fold.CrcAhead), which reads cell[0]
 * and leaves the CRCs before it alone (fold_segment's clean_until). */
static PyObject *
sp_crc_clean_walk(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *buf, *cell_obj;
    Py_ssize_t pos, end;
    if (wire_args("crc_clean_walk", args, nargs, "OnnO", &buf, &pos, &end, &cell_obj) < 0)
        return NULL;
    Py_buffer cell;
    if (PyObject_GetBuffer(cell_obj, &cell, PyBUF_WRITABLE) < 0)
        return NULL;
    if (cell.len < 2 * (Py_ssize_t)sizeof(int64_t) || ((uintptr_t)cell.buf % sizeof(int64_t)) != 0) {
        PyBuffer_Release(&cell);
        PyErr_SetString(PyExc_ValueError, "crc_clean_walk(): cell must be two aligned int64");
        return NULL;
    }
    Py_buffer view;
    if (get_buffer(buf, &view, pos < end ? pos : end, end) < 0) {
        PyBuffer_Release(&cell);
        return NULL;
    }
    const uint8_t *base = (const uint8_t *)view.buf;
    int64_t *shared = (int64_t *)cell.buf;
    Py_BEGIN_ALLOW_THREADS
    kx_walk w = {base, pos, end};
    kx_header r;
    while (__atomic_load_n(&shared[1], __ATOMIC_RELAXED) == 0 && kx_frame_next(&w, &r, 1) == KX_FRAMED)
        __atomic_store_n(&shared[0], (int64_t)w.pos, __ATOMIC_RELEASE);
    pos = w.pos;
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    PyBuffer_Release(&cell);
    return PyLong_FromSsize_t(pos);
}

static PyObject *
fold_setup(PyObject *self, PyObject *args)
{
    PyObject *hcls, *ecls;
    if (!PyArg_ParseTuple(args, "OO:setup", &hcls, &ecls))
        return NULL;
    if (!PyType_Check(ecls) || !PyType_IsSubtype((PyTypeObject *)ecls, &PyTuple_Type) ||
        ((PyTypeObject *)ecls)->tp_itemsize != PyTuple_Type.tp_itemsize ||
        ((PyTypeObject *)ecls)->tp_basicsize != PyTuple_Type.tp_basicsize) {
        PyErr_SetString(PyExc_TypeError, "setup(): the event class must be a tuple subclass without instance fields");
        return NULL;
    }
    fold_state *st = get_state(self);
    if (wire_cls_set(&st->header, hcls, hdr_names, N_HDR) < 0)
        return NULL;
    Py_XSETREF(st->event_type, (PyTypeObject *)Py_NewRef(ecls));
    Py_RETURN_NONE;
}

static PyMethodDef fold_methods[] = {
    {"setup", (PyCFunction)fold_setup, METH_VARARGS,
     "setup(BatchHeader, FoldEvent): the classes fold_segment makes (FoldEvent: a namedtuple class)"},
    {"fold_segment", (PyCFunction)(void (*)(void))sp_fold_segment, METH_FASTCALL,
     "fold_segment(buf, start, end, crc_mode, breaks, seg_base, prev_last, want_table, max_bytes, clean_until)"},
    {"crc_clean_walk", (PyCFunction)(void (*)(void))sp_crc_clean_walk, METH_FASTCALL,
     "crc_clean_walk(buf, start, end, cell) -> where the whole magic-2 batches with a holding CRC from start stop "
     "(cell[0] the progress, cell[1] a stop flag; the GIL released)"},
    {"increasing", (PyCFunction)(void (*)(void))sp_increasing, METH_FASTCALL,
     "increasing(values) -> whether every value is strictly above the one before"},
    {"entries_at_batches", (PyCFunction)(void (*)(void))sp_entries_at_batches, METH_FASTCALL,
     "entries_at_batches(table, positions, offsets, lo, hi, base) -> whether every entry in [lo, hi) is at a "
     "batch starting at or below its offset (base + offsets[j])"},
    {"time_entries_at_batches", (PyCFunction)(void (*)(void))sp_time_entries_at_batches, METH_FASTCALL,
     "time_entries_at_batches(table, offsets, stamps, lo) -> (hi, whether every time entry in [lo, hi) is at "
     "the batch TimeIndex.maybeAppend put it at)"},
    {"bisect_many", (PyCFunction)(void (*)(void))sp_bisect_many, METH_FASTCALL,
     "bisect_many(a, xs, exact) -> [bisect_left(a, x) for x in xs] over an int64 buffer (exact: -k-1 if absent)"},
    {NULL, NULL, 0, NULL}};

static int
fold_traverse(PyObject *m, visitproc visit, void *arg)
{
    fold_state *st = get_state(m);
    Py_VISIT(st->header.tp);
    Py_VISIT(st->event_type);
    return 0;
}

static int
fold_clear(PyObject *m)
{
    fold_state *st = get_state(m);
    Py_CLEAR(st->header.tp);
    Py_CLEAR(st->event_type);
    return 0;
}

static void
fold_free(void *m)
{
    fold_clear((PyObject *)m);
}

static PyModuleDef_Slot fold_slots[] = {
    {Py_mod_exec, wire_exec},
#ifdef Py_mod_multiple_interpreters
    {Py_mod_multiple_interpreters, Py_MOD_PER_INTERPRETER_GIL_SUPPORTED},
#endif
    {0, NULL}};

static struct PyModuleDef fold_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "kafkatx.format._fold",
    .m_doc = "Compiled segment fold for kafkatx.format.segment_fold (optional; see _fold.c).",
    .m_size = sizeof(fold_state),
    .m_methods = fold_methods,
    .m_slots = fold_slots,
    .m_traverse = fold_traverse,
    .m_clear = fold_clear,
    .m_free = fold_free,
};

PyMODINIT_FUNC
PyInit__fold(void)
{
    return PyModuleDef_Init(&fold_module);
}
