/*
 * kafkatx.format._speedups -- optional compiled fast paths for record_batch.py.
 *
 * The pure-Python module (record_batch.py) is the reference; every function here
 * mirrors one of its loops byte for byte, including which DecodeError subclass,
 * message and position a malformed input produces. record_batch.py uses this
 * module only when it imports (built with a C compiler) and KAFKATX_PURE_PYTHON
 * is not set; tests/format/test_speedups.py checks both paths agree.
 *
 * Functions (all positions are byte positions in the buffer given, which is read
 * through the buffer protocol -- an mmap is never copied -- and released again
 * before returning, so the caller can still close the mmap):
 *
 *   setup(Record, BatchHeader) -> None
 *       Resolve the slot offsets of the two frozen slotted dataclasses.
 *
 *   decode_records(buf, start, end, p, rec, count, base_offset, base_ts, append_ts, limit)
 *       -> (records: list[Record], p: int, rec: int, err: None | (kind, message, position))
 *       Decode at most `limit` magic-2 records of the records section buf[start:end]
 *       (uncompressed slice or decompressed bytes), resuming at relative position p
 *       with record index rec of `count`. Mirrors record_batch._v2_records; `err`
 *       (kind 0 DecodeError, 1 BadLength, 2 Truncated, 3 BadVarint, position
 *       relative to `start`) is what the Python loop would have raised after
 *       yielding the records returned with it.
 *
 *   scan_headers(buf, pos, end, verify_crc, max_count, max_bytes)
 *       -> (headers: list[BatchHeader], pos: int, bad_crc: int | None)
 *       The fast path of record_batch.iter_batches: consecutive complete magic-2
 *       batches with a sane length (and, with verify_crc, a matching CRC-32C).
 *       Stops before the first batch that needs the Python slow path; bad_crc is
 *       the stored CRC when it stopped at a CRC mismatch. max_count -1: the list
 *       holds only the last of those headers (iter_batches(last_only=True)).
 *
 *   replay_setup(Entry, CompletedTxn, "ABORT", "COMMIT") -> None
 *   replay_fold(buf, pos, hi, producers, start, end, stop, check_data_crc, spans, span_floor,
 *               completed, topic, partition, max_bytes) -> (pos, batches, seen, reason)
 *       kafkatx.txn.replay.ProducerReplay.fold: applies a segment's batches to the
 *       replay's per-producer _Entry objects (their slots written directly), returning
 *       at the first batch the Python replay must handle. See sp_replay_fold.
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
 *       and last header of a run become BatchHeader objects. The events are instances of the
 *       class given to set_fold_event(cls) (segment_fold.FoldEvent), else plain tuples.
 *
 *   bisect_many(a, xs, exact) -> list
 *       bisect.bisect_left(a, x) of every x over an int64 buffer (a table column), in one call.
 *
 *   crc32c(buf, start, end) -> int
 *       CRC-32C (Castagnoli) of buf[start:end]: SSE4.2 crc32 instructions when the
 *       CPU has them (checked at import), slicing-by-8 tables otherwise.
 *
 * How Record/BatchHeader instances are made fast: both are
 * @dataclass(frozen=True, slots=True), so every field is a slot, i.e. a
 * PyObject* at a fixed offset inside the instance, described by a
 * member_descriptor on the class (PyMemberDescrObject->d_member->offset).
 * setup() reads those offsets once (checking each is an object slot defined on
 * that very class, and that the class has exactly those slots, so no slot can be
 * left NULL); an instance is then tp_alloc(type, 0) -- what object.__new__ does,
 * zero-filled, GC-tracked, holding a reference to the heap type -- plus one
 * pointer store per field. That skips the dataclass __init__ (which assigns
 * through object.__setattr__ because the class is frozen) exactly like the
 * pure-Python path's __class__ retyping trick does, and gives an ordinary
 * instance of the very same class: type(r) is Record, ==, hash and repr as usual.
 *
 * Record layout (DefaultRecord.java), zigzag varints:
 *   length varint, attributes i8, timestampDelta varlong, offsetDelta varint,
 *   keyLength varint (-1 = null), key, valueLength varint, value,
 *   headerCount varint, [headerKeyLength varint, headerKey (utf-8),
 *                        headerValueLength varint (-1 = null), headerValue]*
 * https://github.com/apache/kafka/blob/trunk/clients/src/main/java/org/apache/kafka/common/record/DefaultRecord.java
 * Batch header (DefaultRecordBatch.java): see record_batch.py's docstring.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>

#if !defined(__SIZEOF_INT128__)
#error "kafkatx._speedups needs a compiler with __int128 (the pure-Python path is used instead)"
#endif

typedef __int128 i128;
typedef unsigned __int128 u128;

/* ----------------------------------------------------------------- constants */

#define HEADER_SIZE 61          /* magic 2 batch header */
#define LOG_OVERHEAD 12         /* baseOffset + batchLength */
#define CRC_START 21            /* the CRC covers attributes onwards */
#define MIN_BATCH_LENGTH (HEADER_SIZE - LOG_OVERHEAD)
#define MAX_BATCH_SIZE (64 * 1024 * 1024)
#define MIN_RECORD 7

enum { K_DECODE = 0, K_BADLENGTH = 1, K_TRUNCATED = 2, K_BADVARINT = 3 };

/* ----------------------------------------------------------------- slot maps */

#define N_REC 6
static const char *const rec_names[N_REC] = {
    "offset", "timestamp", "key", "value", "headers", "attributes"};
enum { R_OFFSET, R_TIMESTAMP, R_KEY, R_VALUE, R_HEADERS, R_ATTRIBUTES };

#define N_HDR 14
static const char *const hdr_names[N_HDR] = {
    "position", "base_offset", "batch_length", "partition_leader_epoch", "magic", "crc",
    "attributes", "last_offset_delta", "base_timestamp", "max_timestamp", "producer_id",
    "producer_epoch", "base_sequence", "records_count"};

static PyTypeObject *record_type = NULL;
static Py_ssize_t rec_off[N_REC];
static PyTypeObject *header_type = NULL;
static Py_ssize_t hdr_off[N_HDR];

#define SLOT(obj, off) (*(PyObject **)((char *)(obj) + (off)))

static int
resolve_slots(PyObject *cls, const char *const *names, int n, Py_ssize_t *offs)
{
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "setup() needs classes");
        return -1;
    }
    PyTypeObject *tp = (PyTypeObject *)cls;
    if (tp->tp_itemsize != 0 || tp->tp_dictoffset != 0 || !(tp->tp_flags & Py_TPFLAGS_HEAPTYPE)) {
        PyErr_Format(PyExc_TypeError, "%s is not a plain slotted class", tp->tp_name);
        return -1;
    }
    PyObject *slots = PyObject_GetAttrString(cls, "__slots__");
    if (slots == NULL)
        return -1;
    Py_ssize_t nslots = PySequence_Size(slots);
    Py_DECREF(slots);
    if (nslots != n) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_TypeError, "%s has %zd slots, expected %d", tp->tp_name, nslots, n);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        PyObject *d = PyDict_GetItemString(tp->tp_dict, names[i]);  /* borrowed */
        if (d == NULL || !Py_IS_TYPE(d, &PyMemberDescr_Type)) {
            PyErr_Format(PyExc_TypeError, "%s.%s is not a slot", tp->tp_name, names[i]);
            return -1;
        }
        PyMemberDescrObject *md = (PyMemberDescrObject *)d;
        if (md->d_common.d_type != tp || md->d_member->type != T_OBJECT_EX ||
            md->d_member->offset < (Py_ssize_t)sizeof(PyObject) ||
            md->d_member->offset + (Py_ssize_t)sizeof(PyObject *) > tp->tp_basicsize) {
            PyErr_Format(PyExc_TypeError, "%s.%s is not an object slot of that class", tp->tp_name, names[i]);
            return -1;
        }
        offs[i] = md->d_member->offset;
    }
    return 0;
}

static PyObject *
sp_setup(PyObject *self, PyObject *args)
{
    PyObject *rcls, *hcls;
    if (!PyArg_ParseTuple(args, "OO:setup", &rcls, &hcls))
        return NULL;
    Py_ssize_t roff[N_REC], hoff[N_HDR];
    if (resolve_slots(rcls, rec_names, N_REC, roff) < 0 || resolve_slots(hcls, hdr_names, N_HDR, hoff) < 0)
        return NULL;
    Py_INCREF(rcls);
    Py_INCREF(hcls);
    Py_XSETREF(record_type, (PyTypeObject *)rcls);
    Py_XSETREF(header_type, (PyTypeObject *)hcls);
    memcpy(rec_off, roff, sizeof roff);
    memcpy(hdr_off, hoff, sizeof hoff);
    Py_RETURN_NONE;
}

/* The class fold_segment's events are made as (segment_fold.FoldEvent, a 7-field namedtuple,
 * i.e. a tuple subclass without instance dict): set_fold_event(cls); plain tuples until then. */
static PyTypeObject *fold_event_type = NULL;

static PyObject *
sp_set_fold_event(PyObject *self, PyObject *cls)
{
    if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, &PyTuple_Type) ||
        ((PyTypeObject *)cls)->tp_itemsize != PyTuple_Type.tp_itemsize ||
        ((PyTypeObject *)cls)->tp_basicsize != PyTuple_Type.tp_basicsize) {
        PyErr_SetString(PyExc_TypeError, "set_fold_event() needs a tuple subclass without instance fields");
        return NULL;
    }
    Py_INCREF(cls);
    Py_XSETREF(fold_event_type, (PyTypeObject *)cls);
    Py_RETURN_NONE;
}

/* ----------------------------------------------------------------- helpers */

/* A Python int from a 128-bit value (record offsets/timestamps that overflow int64:
 * Python ints do not, so neither may we). */
static PyObject *
long_from_i128(i128 v)
{
    if (v >= (i128)INT64_MIN && v <= (i128)INT64_MAX)
        return PyLong_FromLongLong((long long)v);
    unsigned char bytes[16];
    u128 u = (u128)v;
    for (int i = 0; i < 16; i++) {
        bytes[i] = (unsigned char)(u & 0xFF);
        u >>= 8;
    }
    return _PyLong_FromByteArray(bytes, 16, 1 /* little endian */, 1 /* signed */);
}

static int
get_buffer(PyObject *obj, Py_buffer *view, Py_ssize_t start, Py_ssize_t end)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_SIMPLE) < 0)
        return -1;
    if (start < 0 || end < start || end > view->len) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_ValueError, "range outside the buffer");
        return -1;
    }
    return 0;
}

/* ----------------------------------------------------------------- varints */

/* Mirrors kafkatx.format.varint.read_zigzag: a zigzag varint of at most max_bytes
 * (5 = varint, 10 = varlong) at start, read no further than n. A 10-byte varlong
 * can carry 70 bits and Python keeps them all, hence 128-bit arithmetic.
 * Returns 0, or -1 with *why = 1 (runs past the end), 2 (too long), 3 (> 32 bits). */
static int
read_zz(const uint8_t *d, Py_ssize_t n, Py_ssize_t start, int max_bytes, i128 *out, Py_ssize_t *next,
        int *why)
{
    u128 result = 0;
    int shift = 0;
    Py_ssize_t pos = start;
    for (;;) {
        if (pos >= n) {
            *why = 1;
            return -1;
        }
        uint8_t b = d[pos++];
        result |= (u128)(b & 0x7F) << shift;
        if (b < 0x80)
            break;
        shift += 7;
        if (pos - start >= max_bytes) {
            *why = 2;
            return -1;
        }
    }
    if (max_bytes == 5 && result > 0xFFFFFFFFu) {
        *why = 3;
        return -1;
    }
    *out = (i128)(result >> 1) ^ -(i128)(result & 1);
    *next = pos;
    return 0;
}

/* ----------------------------------------------------------------- decode_records */

typedef struct {
    int kind;
    Py_ssize_t pos;
    PyObject *msg;  /* new reference, or NULL with a Python exception set */
} err_t;

#define FAIL(k, position, ...)                              \
    do {                                                    \
        err.kind = (k);                                     \
        err.pos = (position);                               \
        err.msg = PyUnicode_FromFormat(__VA_ARGS__);        \
        goto failed;                                        \
    } while (0)

/* record_batch._v2_records inlines the 1- and 2-byte forms of record-level varints
 * with plain indexing: an index past the data is an IndexError there, reported as
 * Truncated("record N runs past the end of the records") at the record start.
 * Longer varints go through read_zigzag (BadVarint at the varint start). */
#define READ_V2(dst, maxb)                                                          \
    do {                                                                            \
        if (p >= n)                                                                 \
            goto trunc_rec;                                                         \
        uint8_t b_ = d[p];                                                          \
        if (b_ < 0x80) {                                                            \
            dst = (b_ >> 1) ^ -(int64_t)(b_ & 1);                                   \
            p += 1;                                                                 \
        }                                                                           \
        else {                                                                      \
            if (p + 1 >= n)                                                         \
                goto trunc_rec;                                                     \
            uint8_t c_ = d[p + 1];                                                  \
            if (c_ < 0x80) {                                                        \
                uint32_t z_ = (uint32_t)(b_ & 0x7F) | ((uint32_t)c_ << 7);          \
                dst = (int64_t)(z_ >> 1) ^ -(int64_t)(z_ & 1);                      \
                p += 2;                                                             \
            }                                                                       \
            else {                                                                  \
                i128 v_;                                                            \
                vstart = p;                                                         \
                vmax = (maxb);                                                      \
                if (read_zz(d, n, p, (maxb), &v_, &p, &why) < 0)                    \
                    goto bad_varint;                                                \
                dst = v_;                                                           \
            }                                                                       \
        }                                                                           \
    } while (0)

/* _read_headers inlines only the 1-byte form (data[p] may still be an IndexError). */
#define READ_V1(dst)                                                                \
    do {                                                                            \
        if (p >= n)                                                                 \
            goto trunc_rec;                                                         \
        uint8_t b_ = d[p];                                                          \
        if (b_ < 0x80) {                                                            \
            dst = (b_ >> 1) ^ -(int64_t)(b_ & 1);                                   \
            p += 1;                                                                 \
        }                                                                           \
        else {                                                                      \
            i128 v_;                                                                \
            vstart = p;                                                             \
            vmax = 5;                                                               \
            if (read_zz(d, n, p, 5, &v_, &p, &why) < 0)                             \
                goto bad_varint;                                                    \
            dst = (int64_t)v_;                                                      \
        }                                                                           \
    } while (0)

static PyObject *
make_record(PyObject *offset, PyObject *timestamp, PyObject *key, PyObject *value, PyObject *headers,
            PyObject *attributes)
{
    /* steals every argument, also on failure */
    PyObject *r = record_type->tp_alloc(record_type, 0);
    if (r == NULL) {
        Py_DECREF(offset);
        Py_DECREF(timestamp);
        Py_DECREF(key);
        Py_DECREF(value);
        Py_DECREF(headers);
        Py_DECREF(attributes);
        return NULL;
    }
    SLOT(r, rec_off[R_OFFSET]) = offset;
    SLOT(r, rec_off[R_TIMESTAMP]) = timestamp;
    SLOT(r, rec_off[R_KEY]) = key;
    SLOT(r, rec_off[R_VALUE]) = value;
    SLOT(r, rec_off[R_HEADERS]) = headers;
    SLOT(r, rec_off[R_ATTRIBUTES]) = attributes;
    return r;
}

static PyObject *
sp_decode_records(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "decode_records() takes 10 arguments");
        return NULL;
    }
    if (record_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "setup() was not called");
        return NULL;
    }
    Py_ssize_t start = PyLong_AsSsize_t(args[1]);
    Py_ssize_t end = PyLong_AsSsize_t(args[2]);
    Py_ssize_t p = PyLong_AsSsize_t(args[3]);
    Py_ssize_t rec = PyLong_AsSsize_t(args[4]);
    Py_ssize_t count = PyLong_AsSsize_t(args[5]);
    long long base_offset = PyLong_AsLongLong(args[6]);
    long long base_ts = PyLong_AsLongLong(args[7]);
    PyObject *append_ts = args[8];
    Py_ssize_t limit = PyLong_AsSsize_t(args[9]);
    if (PyErr_Occurred())
        return NULL;  /* OverflowError for ints past int64: the caller falls back to Python */
    if (append_ts == Py_None)
        append_ts = NULL;
    else if (!PyLong_CheckExact(append_ts)) {
        PyErr_SetString(PyExc_TypeError, "append_ts must be an int or None");
        return NULL;
    }

    Py_buffer view;
    if (get_buffer(args[0], &view, start, end) < 0)
        return NULL;
    const uint8_t *d = (const uint8_t *)view.buf + start;
    const Py_ssize_t n = end - start;
    if (p < 0 || p > n || rec < 0 || count < 0 || limit < 1) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "bad resume state");
        return NULL;
    }

    Py_ssize_t todo = count - rec;
    if (todo > limit)
        todo = limit;
    PyObject *out = PyList_New(todo > 0 ? todo : 0);  /* bounded by limit */
    if (out == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    Py_ssize_t done = 0;
    err_t err = {0, 0, NULL};
    Py_ssize_t rec_start = p, vstart = p;
    int why = 0, vmax = 5;
    PyObject *key = NULL, *value = NULL, *headers = NULL;

    for (; done < todo; done++, rec++) {
        int64_t length, off_delta, klen, vlen;
        i128 ts_delta;
        rec_start = p;
        READ_V2(length, 5);
        Py_ssize_t rec_end = p + (Py_ssize_t)length;
        if (length < MIN_RECORD - 1)
            FAIL(K_BADLENGTH, rec_start, "record %zd has length %lld", rec, (long long)length);
        if (rec_end > n)
            FAIL(K_TRUNCATED, rec_start, "record %zd of %lld bytes runs past the batch (%zd left)", rec,
                 (long long)length, n - p);
        long attributes = d[p];  /* p < rec_end <= n: the length is at least 6 */
        p += 1;
        READ_V2(ts_delta, 10);
        READ_V2(off_delta, 5);
        READ_V2(klen, 5);
        if (klen < 0) {
            if (klen != -1)
                FAIL(K_BADLENGTH, p - 1, "record %zd has key length %lld", rec, (long long)klen);
            key = Py_NewRef(Py_None);
        }
        else {
            if (p + klen > rec_end)
                FAIL(K_BADLENGTH, p - 1, "record %zd key of %lld bytes runs past the record", rec,
                     (long long)klen);
            key = PyBytes_FromStringAndSize((const char *)d + p, (Py_ssize_t)klen);
            if (key == NULL)
                goto pyerror;
            p += (Py_ssize_t)klen;
        }
        READ_V2(vlen, 5);
        if (vlen < 0) {
            if (vlen != -1)
                FAIL(K_BADLENGTH, p - 1, "record %zd has value length %lld", rec, (long long)vlen);
            value = Py_NewRef(Py_None);
        }
        else {
            if (p + vlen > rec_end)
                FAIL(K_BADLENGTH, p - 1, "record %zd value of %lld bytes runs past the record", rec,
                     (long long)vlen);
            value = PyBytes_FromStringAndSize((const char *)d + p, (Py_ssize_t)vlen);
            if (value == NULL)
                goto pyerror;
            p += (Py_ssize_t)vlen;
        }
        if (p >= n)
            goto trunc_rec;
        if (d[p] == 0) {
            headers = PyTuple_New(0);
            if (headers == NULL)
                goto pyerror;
            p += 1;
        }
        else {
            int64_t hcount;
            READ_V1(hcount);
            if (hcount < 0 || hcount * 2 > rec_end - p)
                FAIL(K_BADLENGTH, p - 1, "record %zd has header count %lld", rec, (long long)hcount);
            headers = PyTuple_New((Py_ssize_t)hcount);  /* bounded by the record's bytes */
            if (headers == NULL)
                goto pyerror;
            for (Py_ssize_t h = 0; h < hcount; h++) {
                Py_ssize_t hstart = p;
                int64_t hklen, hvlen;
                READ_V1(hklen);
                Py_ssize_t q = p + (Py_ssize_t)hklen;
                if (hklen < 0 || q > rec_end)
                    FAIL(K_BADLENGTH, hstart, "record %zd has header key length %lld", rec, (long long)hklen);
                PyObject *hkey = PyUnicode_DecodeUTF8((const char *)d + p, (Py_ssize_t)hklen, NULL);
                if (hkey == NULL) {
                    if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
                        goto pyerror;
                    PyObject *etype, *exc, *etb;
                    PyErr_Fetch(&etype, &exc, &etb);
                    PyErr_NormalizeException(&etype, &exc, &etb);
                    PyObject *reason = exc != NULL ? PyUnicodeDecodeError_GetReason(exc) : NULL;
                    Py_XDECREF(etype);
                    Py_XDECREF(exc);
                    Py_XDECREF(etb);
                    if (reason == NULL)
                        goto pyerror;
                    err.kind = K_DECODE;
                    err.pos = p;
                    err.msg = PyUnicode_FromFormat("record %zd header key is not UTF-8: %U", rec, reason);
                    Py_DECREF(reason);
                    goto failed;
                }
                p = q;
                if (p >= n) {
                    Py_DECREF(hkey);
                    goto trunc_rec;
                }
                {
                    uint8_t b_ = d[p];
                    if (b_ < 0x80) {
                        hvlen = (b_ >> 1) ^ -(int64_t)(b_ & 1);
                        p += 1;
                    }
                    else {
                        i128 v_;
                        vstart = p;
                        vmax = 5;
                        if (read_zz(d, n, p, 5, &v_, &p, &why) < 0) {
                            Py_DECREF(hkey);
                            goto bad_varint;
                        }
                        hvlen = (int64_t)v_;
                    }
                }
                PyObject *hval;
                if (hvlen < 0) {
                    if (hvlen != -1) {
                        Py_DECREF(hkey);
                        FAIL(K_BADLENGTH, q, "record %zd has header value length %lld", rec, (long long)hvlen);
                    }
                    hval = Py_NewRef(Py_None);
                }
                else {
                    if (p + hvlen > rec_end) {
                        Py_DECREF(hkey);
                        FAIL(K_BADLENGTH, q, "record %zd header value of %lld bytes runs past the record", rec,
                             (long long)hvlen);
                    }
                    hval = PyBytes_FromStringAndSize((const char *)d + p, (Py_ssize_t)hvlen);
                    if (hval == NULL) {
                        Py_DECREF(hkey);
                        goto pyerror;
                    }
                    p += (Py_ssize_t)hvlen;
                }
                PyObject *pair = PyTuple_New(2);
                if (pair == NULL) {
                    Py_DECREF(hkey);
                    Py_DECREF(hval);
                    goto pyerror;
                }
                PyTuple_SET_ITEM(pair, 0, hkey);
                PyTuple_SET_ITEM(pair, 1, hval);
                PyTuple_SET_ITEM(headers, h, pair);
            }
        }
        if (p != rec_end) {
            Py_ssize_t diff = p - rec_end;
            FAIL(K_BADLENGTH, rec_start, "record %zd declares %lld bytes but its fields end %c%zd bytes from there",
                 rec, (long long)length, diff < 0 ? '-' : '+', diff < 0 ? -diff : diff);
        }
        PyObject *o_off, *o_ts, *o_attr;
        long long off_sum;
        if (__builtin_add_overflow(base_offset, (long long)off_delta, &off_sum))
            o_off = long_from_i128((i128)base_offset + off_delta);
        else
            o_off = PyLong_FromLongLong(off_sum);
        if (append_ts != NULL)
            o_ts = Py_NewRef(append_ts);
        else
            o_ts = long_from_i128((i128)base_ts + ts_delta);
        o_attr = PyLong_FromLong(attributes);
        if (o_off == NULL || o_ts == NULL || o_attr == NULL) {
            Py_XDECREF(o_off);
            Py_XDECREF(o_ts);
            Py_XDECREF(o_attr);
            goto pyerror;
        }
        PyObject *r = make_record(o_off, o_ts, key, value, headers, o_attr);
        key = value = headers = NULL;
        if (r == NULL)
            goto pyerror;
        PyList_SET_ITEM(out, done, r);
    }
    /* DefaultRecordBatch: "Incorrect declared batch size, records still remaining in file" */
    if (rec >= count && p != n) {
        err.kind = K_BADLENGTH;
        err.pos = p;
        err.msg = PyUnicode_FromFormat("%zd bytes left after the %zd declared records", n - p, count);
        goto failed;
    }
    goto finish;

trunc_rec:
    err.kind = K_TRUNCATED;
    err.pos = rec_start;
    err.msg = PyUnicode_FromFormat("record %zd runs past the end of the records", rec);
    goto failed;

bad_varint:
    err.kind = K_BADVARINT;
    err.pos = vstart;
    if (why == 1)
        err.msg = PyUnicode_FromString("varint runs past the end of the data");
    else if (why == 2)
        err.msg = PyUnicode_FromFormat("varint longer than %d bytes", vmax);
    else
        err.msg = PyUnicode_FromString("varint does not fit in 32 bits");
    goto failed;

failed:
    Py_CLEAR(key);
    Py_CLEAR(value);
    Py_CLEAR(headers);
    if (err.msg == NULL)
        goto pyerror;
    p = err.pos;
finish:;
    PyBuffer_Release(&view);
    /* an error stops the chunk early: the list's unused tail is still NULL */
    Py_SET_SIZE(out, done);
    PyObject *e;
    if (err.msg != NULL) {
        e = Py_BuildValue("(iNn)", err.kind, err.msg, err.pos);
        if (e == NULL) {
            Py_DECREF(out);
            return NULL;
        }
    }
    else
        e = Py_NewRef(Py_None);
    return Py_BuildValue("(NnnN)", out, p, rec, e);

pyerror:
    Py_XDECREF(key);
    Py_XDECREF(value);
    Py_XDECREF(headers);
    PyBuffer_Release(&view);
    /* list items past `done` are NULL; list_dealloc uses Py_XDECREF */
    Py_DECREF(out);
    return NULL;
}

/* ----------------------------------------------------------------- CRC-32C */

/* Kafka checksums magic-2 batches with CRC-32C (Castagnoli, reflected polynomial
 * 0x82F63B78; Crc32C.java). x86-64 has it in hardware since SSE4.2 (the crc32
 * instruction computes exactly this polynomial), detected at import so the module
 * still runs on CPUs without it; everywhere else slicing-by-8 tables. */
static uint32_t crc_table[8][256];

static void
crc_init_tables(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xFF];
}

static uint32_t
crc32c_sw(uint32_t crc, const uint8_t *p, size_t len)
{
    crc = ~crc;
    while (len && ((uintptr_t)p & 7)) {
        crc = (crc >> 8) ^ crc_table[0][(crc ^ *p++) & 0xFF];
        len--;
    }
    while (len >= 8) {
        uint32_t lo = crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
        crc = crc_table[7][lo & 0xFF] ^ crc_table[6][(lo >> 8) & 0xFF] ^ crc_table[5][(lo >> 16) & 0xFF] ^
              crc_table[4][lo >> 24] ^ crc_table[3][p[4]] ^ crc_table[2][p[5]] ^ crc_table[1][p[6]] ^
              crc_table[0][p[7]];
        p += 8;
        len -= 8;
    }
    while (len--)
        crc = (crc >> 8) ^ crc_table[0][(crc ^ *p++) & 0xFF];
    return ~crc;
}

/* Appending zero bytes to a CRC: the raw register (not inverted) after data D from a start state
 * s is zeros(s, |D|) ^ raw(0, D), as the CRC is linear over GF(2). That lets the hardware path run
 * three independent streams over consecutive blocks of one buffer (the crc32 instruction has a
 * latency of 3 cycles and a throughput of 1, so one stream leaves the unit idle two thirds of the
 * time) and join them: crc = zeros(zeros(c0, B) ^ c1, B) ^ c2. zeros(., B) for a fixed block size B
 * is a 32x32 GF(2) matrix, applied a byte of the register at a time through 4 tables of 256. */
typedef struct {
    uint32_t t[4][256];
} crc_shift;

/* The register after appending len zero bytes to the raw register c (table-driven, one byte a step). */
static uint32_t
crc_append_zeros(uint32_t c, size_t len)
{
    while (len--)
        c = (c >> 8) ^ crc_table[0][c & 0xFF];
    return c;
}

/* The tables of zeros(., len): the image of each register bit, combined per byte value. */
static void
crc_shift_init(crc_shift *sh, size_t len)
{
    uint32_t col[32];
    for (int i = 0; i < 32; i++)
        col[i] = crc_append_zeros(1u << i, len);
    for (int k = 0; k < 4; k++)
        for (uint32_t b = 0; b < 256; b++) {
            uint32_t v = 0;
            for (int i = 0; i < 8; i++)
                if (b & (1u << i))
                    v ^= col[8 * k + i];
            sh->t[k][b] = v;
        }
}

static inline uint32_t
crc_shift_apply(const crc_shift *sh, uint32_t c)
{
    return sh->t[0][c & 0xFF] ^ sh->t[1][(c >> 8) & 0xFF] ^ sh->t[2][(c >> 16) & 0xFF] ^ sh->t[3][c >> 24];
}

/* Block sizes of the three streams: long for big buffers (a 64 KB crc32c() call, a large batch), short
 * for the ~1 KB batches of a busy topic. Multiples of 8 (the streams read 8 bytes a step). */
#define CRC_LONG 2048
#define CRC_SHORT 128
static crc_shift crc_shift_long, crc_shift_short;

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>
#define HAVE_HW_CRC 1

/* Three streams over 3 * block bytes from p, joined into the register c0 (see crc_shift above). */
#define CRC_HW_ROUND(block, shift)                                                                  \
    do {                                                                                            \
        uint64_t c1 = 0, c2 = 0;                                                                    \
        for (size_t i = 0; i < (block); i += 8) {                                                   \
            uint64_t v0, v1, v2;                                                                    \
            memcpy(&v0, p + i, 8);                                                                  \
            memcpy(&v1, p + (block) + i, 8);                                                        \
            memcpy(&v2, p + 2 * (block) + i, 8);                                                    \
            c0 = _mm_crc32_u64(c0, v0);                                                             \
            c1 = _mm_crc32_u64(c1, v1);                                                             \
            c2 = _mm_crc32_u64(c2, v2);                                                             \
        }                                                                                           \
        c0 = crc_shift_apply((shift), (uint32_t)c0) ^ (uint32_t)c1;                                 \
        c0 = crc_shift_apply((shift), (uint32_t)c0) ^ (uint32_t)c2;                                 \
        p += 3 * (block);                                                                           \
        len -= 3 * (block);                                                                         \
    } while (0)

__attribute__((target("sse4.2"))) static uint32_t
crc32c_hw(uint32_t crc, const uint8_t *p, size_t len)
{
    uint64_t c0 = ~crc;
    while (len && ((uintptr_t)p & 7)) {
        c0 = _mm_crc32_u8((uint32_t)c0, *p++);
        len--;
    }
    while (len >= 3 * CRC_LONG)
        CRC_HW_ROUND(CRC_LONG, &crc_shift_long);
    while (len >= 3 * CRC_SHORT)
        CRC_HW_ROUND(CRC_SHORT, &crc_shift_short);
    while (len >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c0 = _mm_crc32_u64(c0, v);
        p += 8;
        len -= 8;
    }
    while (len--)
        c0 = _mm_crc32_u8((uint32_t)c0, *p++);
    return ~(uint32_t)c0;
}
#endif

static uint32_t (*crc32c_impl)(uint32_t, const uint8_t *, size_t) = crc32c_sw;

static PyObject *
sp_crc32c(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "crc32c() takes 3 arguments");
        return NULL;
    }
    Py_ssize_t start = PyLong_AsSsize_t(args[1]);
    Py_ssize_t end = PyLong_AsSsize_t(args[2]);
    if (PyErr_Occurred())
        return NULL;
    Py_buffer view;
    if (get_buffer(args[0], &view, start, end) < 0)
        return NULL;
    uint32_t crc;
    const uint8_t *p = (const uint8_t *)view.buf + start;
    size_t len = (size_t)(end - start);
    if (len > 65536) {
        Py_BEGIN_ALLOW_THREADS
        crc = crc32c_impl(0, p, len);
        Py_END_ALLOW_THREADS
    }
    else
        crc = crc32c_impl(0, p, len);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(crc);
}

/* ----------------------------------------------------------------- scan_headers */

static inline int64_t be64(const uint8_t *p) {
    return (int64_t)((uint64_t)p[0] << 56 | (uint64_t)p[1] << 48 | (uint64_t)p[2] << 40 | (uint64_t)p[3] << 32 |
                     (uint64_t)p[4] << 24 | (uint64_t)p[5] << 16 | (uint64_t)p[6] << 8 | (uint64_t)p[7]);
}
static inline uint32_t be32u(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}
static inline int32_t be32(const uint8_t *p) { return (int32_t)be32u(p); }
static inline int16_t be16(const uint8_t *p) { return (int16_t)(uint16_t)((uint16_t)p[0] << 8 | p[1]); }

/* The size of the magic-2 batch framed at h (left: the bytes from h to the end of what is read):
 * a whole v2 header, a sane length field (record_batch.read_batch_header's rules) and the whole
 * batch present; 0 when the bytes there are not such a batch. Every compiled walker frames with it. */
static inline Py_ssize_t
v2_batch_size(const uint8_t *h, Py_ssize_t left)
{
    if (left < HEADER_SIZE || h[16] != 2)
        return 0;
    int32_t length = be32(h + 8);
    if (length < MIN_BATCH_LENGTH || length > MAX_BATCH_SIZE || (Py_ssize_t)length + LOG_OVERHEAD > left)
        return 0;
    /* base offset + last offset delta outside int64 (record_batch.last_offset_overflows, after
     * Kafka's LogSegment.recover -> ensureOffsetInRange(batch.lastOffset())): the Python slow
     * path raises the DecodeError, so every loop stops before such a batch. */
    int64_t last_offset;
    if (__builtin_add_overflow(be64(h), (int64_t)be32(h + 23), &last_offset))
        return 0;
    return (Py_ssize_t)length + LOG_OVERHEAD;
}

/* An instance of the slotted class tp with its n slots (at offs) set to v, made as setup()'s
 * comment says (tp_alloc + one store per slot). Takes the references in v (NULL entries: a
 * failed conversion, then every other value is released and NULL returned). */
static PyObject *
new_slotted(PyTypeObject *tp, const Py_ssize_t *offs, PyObject *const *v, int n)
{
    PyObject *o = tp->tp_alloc(tp, 0);
    int failed = o == NULL;
    for (int i = 0; i < n; i++) {
        if (v[i] == NULL)
            failed = 1;
        if (o != NULL)
            SLOT(o, offs[i]) = v[i];
        else
            Py_XDECREF(v[i]);
    }
    if (failed) {
        Py_XDECREF(o);
        return NULL;
    }
    return o;
}

/* A BatchHeader for the complete magic-2 batch at h (buffer position pos). */
static PyObject *
new_header(const uint8_t *h, Py_ssize_t pos)
{
    PyObject *v[N_HDR] = {
        PyLong_FromSsize_t(pos),      PyLong_FromLongLong(be64(h)),       PyLong_FromLong(be32(h + 8)),
        PyLong_FromLong(be32(h + 12)), PyLong_FromLong(2),                 PyLong_FromUnsignedLong(be32u(h + 17)),
        PyLong_FromLong(be16(h + 21)), PyLong_FromLong(be32(h + 23)),      PyLong_FromLongLong(be64(h + 27)),
        PyLong_FromLongLong(be64(h + 35)), PyLong_FromLongLong(be64(h + 43)), PyLong_FromLong(be16(h + 51)),
        PyLong_FromLong(be32(h + 53)), PyLong_FromLong(be32(h + 57))};
    return new_slotted(header_type, hdr_off, v, N_HDR);
}

static PyObject *
sp_scan_headers(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "scan_headers() takes 6 arguments");
        return NULL;
    }
    if (header_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "setup() was not called");
        return NULL;
    }
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    Py_ssize_t end = PyLong_AsSsize_t(args[2]);
    int verify = PyObject_IsTrue(args[3]);
    Py_ssize_t max_count = PyLong_AsSsize_t(args[4]);
    Py_ssize_t max_bytes = PyLong_AsSsize_t(args[5]);
    if (PyErr_Occurred())
        return NULL;
    /* max_count -1: only the last header of the scan is built (callers that keep only the last) */
    int last_only = max_count == -1;
    if (last_only)
        max_count = PY_SSIZE_T_MAX;
    if (max_count < 1) {
        PyErr_SetString(PyExc_ValueError, "max_count must be positive (or -1)");
        return NULL;
    }
    Py_buffer view;
    if (get_buffer(args[0], &view, pos < end ? pos : end, end) < 0)
        return NULL;
    const uint8_t *base = (const uint8_t *)view.buf;
    Py_ssize_t cap = last_only ? 1 : (end - pos) / HEADER_SIZE + 1;
    if (cap > max_count)
        cap = max_count;
    if (cap < 0)
        cap = 0;
    Py_ssize_t last_pos = -1;
    PyObject *out = PyList_New(cap);
    if (out == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    Py_ssize_t got = 0, scanned = 0;
    PyObject *bad_crc = NULL;
    while (pos < end && got < cap && scanned < max_bytes) {
        const uint8_t *h = base + pos;
        Py_ssize_t size = v2_batch_size(h, end - pos);
        if (size == 0)
            break;
        uint32_t crc = be32u(h + 17);
        if (verify && crc32c_impl(0, h + CRC_START, (size_t)(size - CRC_START)) != crc) {
            bad_crc = PyLong_FromUnsignedLong(crc);
            if (bad_crc == NULL)
                goto error;
            break;
        }
        if (last_only)
            last_pos = pos;
        else {
            PyObject *o = new_header(h, pos);
            if (o == NULL)
                goto error;
            PyList_SET_ITEM(out, got, o);
            got++;
        }
        pos += size;
        scanned += size;
    }
    if (last_pos >= 0) {
        PyObject *o = new_header(base + last_pos, last_pos);
        if (o == NULL)
            goto error;
        PyList_SET_ITEM(out, 0, o);
        got = 1;
    }
    PyBuffer_Release(&view);
    Py_SET_SIZE(out, got);
    return Py_BuildValue("(NnN)", out, pos, bad_crc != NULL ? bad_crc : Py_NewRef(Py_None));

error:
    PyBuffer_Release(&view);
    Py_XDECREF(bad_crc);
    Py_DECREF(out);
    return NULL;
}

/* ----------------------------------------------------------------- fold_segment */

#define TABLE_ROW 32 /* (position, base offset, last offset, max timestamp) as native int64 */

/* The control record of the uncompressed control batch at h (size bytes): 1 with *type and
 * *epoch (-1: none, for types other than ABORT/COMMIT) when its first record has the plain
 * layout Kafka writes (key version >= 0, 4+ byte key; ABORT/COMMIT: 6+ byte value with
 * version >= 0; no headers; the record inside the batch); 0 otherwise: then the caller
 * asks record_batch.read_control_record, which reports whatever is unusual exactly. */
static int
parse_control(const uint8_t *h, Py_ssize_t size, int *type, int64_t *epoch)
{
    if ((be16(h + 21) & 0x07) != 0 || be32(h + 57) < 1)
        return 0;
    const uint8_t *d = h + HEADER_SIZE;
    Py_ssize_t n = size - HEADER_SIZE, p = 0, q;
    i128 v, len, klen, vlen;
    int why;
    if (read_zz(d, n, p, 5, &len, &p, &why) < 0 || len < MIN_RECORD - 1 || p + (Py_ssize_t)len > n)
        return 0;
    Py_ssize_t rec_end = p + (Py_ssize_t)len;
    p += 1; /* attributes */
    if (read_zz(d, rec_end, p, 10, &v, &q, &why) < 0) return 0;
    if (read_zz(d, rec_end, q, 5, &v, &p, &why) < 0) return 0;
    if (read_zz(d, rec_end, p, 5, &klen, &p, &why) < 0 || klen < 4 || p + (Py_ssize_t)klen > rec_end)
        return 0;
    const uint8_t *key = d + p;
    p += (Py_ssize_t)klen;
    if (read_zz(d, rec_end, p, 5, &vlen, &p, &why) < 0 || vlen < -1 || p + (vlen < 0 ? 0 : (Py_ssize_t)vlen) > rec_end)
        return 0;
    const uint8_t *val = d + p;
    p += vlen < 0 ? 0 : (Py_ssize_t)vlen;
    if (read_zz(d, rec_end, p, 5, &v, &p, &why) < 0 || v != 0 || p != rec_end)
        return 0;
    if (be16(key) < 0)
        return 0;
    *type = be16(key + 2);
    *epoch = -1;
    if (*type == 0 || *type == 1) {
        if (vlen < 6 || be16(val) < 0)
            return 0;
        *epoch = be32(val + 2);
    }
    return 1;
}

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

/* fold_segment's crc_mode values beyond 0-2 (segment_fold.CRC_FAILS_ONLY, segment_fold.TABLE_ONLY) */
#define FOLD_CRC_FAILS_ONLY 3
#define FOLD_TABLE_ONLY 4

static PyObject *
sp_fold_segment(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 9) {
        PyErr_SetString(PyExc_TypeError, "fold_segment() takes 9 arguments");
        return NULL;
    }
    if (header_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "setup() was not called");
        return NULL;
    }
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    Py_ssize_t end = PyLong_AsSsize_t(args[2]);
    int crc_mode = PyLong_AsLong(args[3]);
    int64_t seg_base = PyLong_AsLongLong(args[5]);
    int have_prev = args[6] != Py_None;
    int64_t prev_last = have_prev ? PyLong_AsLongLong(args[6]) : 0;
    int want_table = PyObject_IsTrue(args[7]);
    Py_ssize_t max_bytes = PyLong_AsSsize_t(args[8]);
    if (PyErr_Occurred())
        return NULL;
    PyObject *breaks_seq = PySequence_Fast(args[4], "breaks must be a sequence of offsets");
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
    }
    Py_DECREF(breaks_seq);
    if (PyErr_Occurred()) {
        PyMem_Free(breaks);
        return NULL;
    }
    Py_buffer view;
    if (get_buffer(args[0], &view, pos < end ? pos : end, end) < 0) {
        PyMem_Free(breaks);
        return NULL;
    }
    const uint8_t *base = (const uint8_t *)view.buf;
    Py_ssize_t nev = 0, cap_ev = 64, mask = 63, nslots_used = 0;
    fold_ev *evs = PyMem_Calloc((size_t)cap_ev, sizeof(fold_ev));
    run_slot *slots = PyMem_Calloc((size_t)(mask + 1), sizeof(run_slot));
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
    while (pos < end && scanned < max_bytes) {
        const uint8_t *h = base + pos;
        Py_ssize_t size = v2_batch_size(h, end - pos);
        if (size == 0)
            break;
        int64_t base_offset = be64(h);
        int64_t last_offset = base_offset + be32(h + 23); /* cannot overflow: v2_batch_size checked it */
        int16_t attr = be16(h + 21);
        int64_t pid = be64(h + 43);
        int epoch = be16(h + 51);
        int is_control = (attr & 0x20) != 0, is_txn = (attr & 0x10) != 0;
        batches++;
        /* offsets only move forward (verify) */
        if (base_offset < seg_base || (have_prev && base_offset <= prev_last)) {
            PyObject *pl = have_prev ? PyLong_FromLongLong(prev_last) : Py_NewRef(Py_None);
            if (pl == NULL)
                goto done;
            PyObject *t = Py_BuildValue("(inLN)", base_offset < seg_base ? 0 : 1, pos, (long long)base_offset, pl);
            if (t == NULL)
                goto done;
            int rc = PyList_Append(order, t);
            Py_DECREF(t);
            if (rc < 0)
                goto done;
        }
        prev_last = (!have_prev || last_offset > prev_last) ? last_offset : prev_last;
        have_prev = 1;
        if (want_table) {
            if (table_len + TABLE_ROW > table_cap) {
                Py_ssize_t nc = table_cap ? table_cap * 2 : TABLE_ROW * 1024;
                char *nt = PyMem_Realloc(table, (size_t)nc);
                if (nt == NULL) {
                    PyErr_NoMemory();
                    goto done;
                }
                table = nt;
                table_cap = nc;
            }
            int64_t row[4] = {(int64_t)pos, base_offset, last_offset, be64(h + 35)};
            memcpy(table + table_len, row, TABLE_ROW);
            table_len += TABLE_ROW;
        }
        /* a break offset ends every open run: no run spans one */
        while (bi < nbreaks && base_offset >= breaks[bi]) {
            bi++;
            gen++;
        }
        if (crc_mode == FOLD_TABLE_ONLY) {  /* the table and the order problems, no CRC, no event */
            pos += size;
            scanned += size;
            continue;
        }
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
            /* every CRC; an event only where it fails (no runs, no markers) */
            if (crc32c_impl(0, h + CRC_START, (size_t)(size - CRC_START)) == be32u(h + 17)) {
                pos += size;
                scanned += size;
                continue;
            }
            single = 1;
            crc_ok = 0;
        }
        else if (is_control && pid >= 0) {
            single = 1;
            crc_ok = crc32c_impl(0, h + CRC_START, (size_t)(size - CRC_START)) == be32u(h + 17);
            if (crc_ok && be32(h + 57) != 0)
                parsed = parse_control(h, size, &ctype, &coord);
        }
        else if (crc_mode >= 2 || (crc_mode == 1 && !is_control)) {
            crc_ok = crc32c_impl(0, h + CRC_START, (size_t)(size - CRC_START)) == be32u(h + 17);
            single = !crc_ok;
        }
        int64_t key = pid >= 0 ? pid : -1;
        Py_ssize_t si = slot_find(slots, mask, key);
        if (!single && slots[si].used && slots[si].gen == gen) {
            fold_ev *r = &evs[slots[si].ev];
            if (key < 0 || (r->epoch == epoch && r->txn == is_txn)) {
                r->last_pos = pos;
                r->count++;
                pos += size;
                scanned += size;
                continue;
            }
        }
        fold_ev *e = &evs[nev];
        e->first = new_header(h, pos);
        if (e->first == NULL)
            goto done;
        e->last_pos = pos;
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
        pos += size;
        scanned += size;
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
                last = new_header(base + e->last_pos, e->last_pos);
                if (last == NULL) {
                    Py_DECREF(events);
                    goto done;
                }
            }
            else
                last = Py_NewRef(Py_None);
            PyObject *ct = e->parsed ? PyLong_FromLong(e->ctype) : Py_NewRef(Py_None);
            PyObject *ce = (e->parsed && (e->ctype == 0 || e->ctype == 1))
                               ? PyLong_FromLongLong(e->coord) : Py_NewRef(Py_None);
            PyObject *cnt = PyLong_FromSsize_t(e->count);
            PyObject *t = NULL;
            if (ct != NULL && ce != NULL && cnt != NULL)
                t = fold_event_type != NULL ? fold_event_type->tp_alloc(fold_event_type, 7) : PyTuple_New(7);
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
        PyObject *tbl = want_table ? PyBytes_FromStringAndSize(table ? table : "", table_len) : Py_NewRef(Py_None);
        PyObject *pl = have_prev ? PyLong_FromLongLong(prev_last) : Py_NewRef(Py_None);
        if (tbl == NULL || pl == NULL) {
            Py_XDECREF(tbl);
            Py_XDECREF(pl);
            Py_DECREF(events);
            goto done;
        }
        result = Py_BuildValue("(NnnNON)", events, pos, batches, pl, order, tbl);
    }
done:
    PyBuffer_Release(&view);
    if (evs != NULL) {
        for (Py_ssize_t i = 0; i < nev; i++)
            Py_XDECREF(evs[i].first);
        PyMem_Free(evs);
    }
    PyMem_Free(slots);
    PyMem_Free(table);
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
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "bisect_many() takes 3 arguments");
        return NULL;
    }
    int exact = PyObject_IsTrue(args[2]);
    if (exact < 0)
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_FORMAT) < 0)
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
    PyObject *seq = PySequence_Fast(args[1], "bisect_many() needs a sequence of ints");
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
 * ProducerReplay.fold in C: see kafkatx/txn/replay.py (ProducerReplay._fold_py is the
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

/* ----------------------------------------------------------------- render_batches */

/* dump-segment's batches from pos, for the consecutive clean magic-2 batches there
 * (kafkatx.render.kafka_dump.render_batches is the Python side; kafkatx/cli/dump.py's per-batch
 * loop is the reference and handles everything this stops at), in one of two outputs:
 *   text:  kafka-dump-log.sh's lines, written straight to bytes;
 *   jsonl: the row objects dump.py's dicts stand for, as instances of the msgspec Struct classes
 *          given to render_setup (kafkatx.render.jsonl_rows): the batch row with its fields in
 *          the dicts' key order, records and headers nested. No JSON is written here: msgspec
 *          serialises them (kafkatx.render.jsonl_rows.encode_lines).
 * A batch is rendered here only when the Python path would render it without a finding: framed
 * (sane length, complete), CRC matching when checked, a control batch whose control record has
 * Kafka's plain layout (parse_control), and, for deep iteration, a records section that decodes
 * completely (the very checks of decode_records). Anything else stops the chunk before that
 * batch, output untouched, for the Python path. tests/cli/test_dump_render.py compares the two
 * paths byte for byte. */

typedef struct {
    char *b;
    Py_ssize_t len, cap;
} obuf;

static int
ob_reserve(obuf *o, Py_ssize_t extra)
{
    if (o->len + extra <= o->cap)
        return 0;
    Py_ssize_t cap = o->cap ? o->cap : 1 << 16;
    while (cap < o->len + extra) {
        if (cap > PY_SSIZE_T_MAX / 2) {
            PyErr_NoMemory();
            return -1;
        }
        cap *= 2;
    }
    char *nb = PyMem_Realloc(o->b, (size_t)cap);
    if (nb == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    o->b = nb;
    o->cap = cap;
    return 0;
}

/* The writers below assume ob_reserve made room. */
static inline void
ob_mem(obuf *o, const void *s, Py_ssize_t n)
{
    memcpy(o->b + o->len, s, (size_t)n);
    o->len += n;
}
#define OB_LIT(o, s) ob_mem((o), (s), (Py_ssize_t)sizeof(s) - 1)

static const char digits2[] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

static inline void
ob_u64(obuf *o, uint64_t u)
{
    char tmp[24];
    int i = 24;
    while (u >= 100) {
        unsigned r = (unsigned)(u % 100);
        u /= 100;
        tmp[--i] = digits2[2 * r + 1];
        tmp[--i] = digits2[2 * r];
    }
    if (u >= 10) {
        tmp[--i] = digits2[2 * u + 1];
        tmp[--i] = digits2[2 * u];
    }
    else
        tmp[--i] = (char)('0' + (int)u);
    ob_mem(o, tmp + i, 24 - i);
}

static void
ob_u128(obuf *o, u128 u)
{
    char tmp[48];
    int i = 48;
    do {
        tmp[--i] = (char)('0' + (int)(u % 10));
        u /= 10;
    } while (u);
    ob_mem(o, tmp + i, 48 - i);
}

/* v in decimal, as Python prints an int (128 bits: record offsets/timestamps may pass int64). */
static inline void
ob_int(obuf *o, i128 v)
{
    if (v >= 0) {
        if (v <= (i128)UINT64_MAX)
            ob_u64(o, (uint64_t)v);
        else
            ob_u128(o, (u128)v);
        return;
    }
    o->b[o->len++] = '-';
    u128 m = (u128)0 - (u128)v;
    if (m <= (u128)UINT64_MAX)
        ob_u64(o, (uint64_t)m);
    else
        ob_u128(o, m);
}

static const char hexdig[] = "0123456789abcdef";

/* Eight bytes at a time (exact tests for "some byte is ...", Bit Twiddling Hacks). */
#define ONES8 0x0101010101010101ULL
#define HIGH8 0x8080808080808080ULL
static inline uint64_t has_zero8(uint64_t x) { return (x - ONES8) & ~x & HIGH8; }
static inline uint64_t has_less8(uint64_t x, unsigned n) { return (x - ONES8 * n) & ~x & HIGH8; }
static inline uint64_t load8(const uint8_t *p) { uint64_t x; memcpy(&x, p, 8); return x; }

/* A str of the n ASCII bytes at s. */
static inline PyObject *
str_ascii(const uint8_t *s, Py_ssize_t n)
{
    PyObject *u = PyUnicode_New(n, 127);
    if (u != NULL)
        memcpy(PyUnicode_DATA(u), s, (size_t)n);
    return u;
}

/* cli/options.py encode_payload's choice: 1 when the bytes are UTF-8 whose characters are all
 * printable (str.isprintable) or \t \n \r, 0 when they are shown hex/base64, -1 on a Python error.
 * With 1 and text != NULL, *text is that str (a new reference). */
static int
payload_is_text(const uint8_t *s, Py_ssize_t n, PyObject **text)
{
    Py_ssize_t i = 0;
    for (;;) {
        while (i + 8 <= n) {  /* printable ASCII: 0x20..0x7E */
            uint64_t x = load8(s + i);
            if ((x & HIGH8) | has_less8(x, 0x20) | has_zero8(x ^ (ONES8 * 0x7F)))
                break;
            i += 8;
        }
        if (i >= n) {
            if (text != NULL && (*text = str_ascii(s, n)) == NULL)
                return -1;
            return 1;
        }
        uint8_t c = s[i];
        if (c >= 0x80)
            break;
        if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7F)
            return 0;
        i++;
    }
    PyObject *u = PyUnicode_DecodeUTF8((const char *)s, n, NULL);
    if (u == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
            return -1;
        PyErr_Clear();
        return 0;
    }
    int kind = PyUnicode_KIND(u);
    const void *data = PyUnicode_DATA(u);
    Py_ssize_t len = PyUnicode_GET_LENGTH(u);
    int ok = 1;
    for (Py_ssize_t k = 0; k < len && ok; k++) {
        Py_UCS4 ch = PyUnicode_READ(kind, data, k);
        if (!(Py_UNICODE_ISPRINTABLE(ch) || ch == '\t' || ch == '\n' || ch == '\r'))
            ok = 0;
    }
    if (ok && text != NULL)
        *text = u;
    else
        Py_DECREF(u);
    return ok;
}

static const char b64dig[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* The length of bytes.hex() / base64.b64encode() of n bytes. */
static inline Py_ssize_t
binary_len(Py_ssize_t n, int b64)
{
    return b64 ? (n + 2) / 3 * 4 : 2 * n;
}

/* bytes.hex() / base64.b64encode() of s[0:n] written at w (binary_len bytes); returns the end. */
static char *
write_binary(char *w, const uint8_t *s, Py_ssize_t n, int b64)
{
    if (!b64) {
        for (Py_ssize_t i = 0; i < n; i++) {
            *w++ = hexdig[s[i] >> 4];
            *w++ = hexdig[s[i] & 15];
        }
        return w;
    }
    Py_ssize_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];
        *w++ = b64dig[v >> 18];
        *w++ = b64dig[(v >> 12) & 63];
        *w++ = b64dig[(v >> 6) & 63];
        *w++ = b64dig[v & 63];
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)s[i] << 16;
        *w++ = b64dig[v >> 18];
        *w++ = b64dig[(v >> 12) & 63];
        *w++ = '=';
        *w++ = '=';
    }
    else if (n - i == 2) {
        uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8;
        *w++ = b64dig[v >> 18];
        *w++ = b64dig[(v >> 12) & 63];
        *w++ = b64dig[(v >> 6) & 63];
        *w++ = '=';
    }
    return w;
}

/* A payload (key, value, header value) as --print-data prints it: the text encode_payload gives
 * (a null one is not printed: the caller's test). Room: 2n + 4. Returns -1 on a Python error. */
static inline int
ob_payload(obuf *o, const uint8_t *s, Py_ssize_t n, int b64)
{
    int text = payload_is_text(s, n, NULL);
    if (text < 0)
        return -1;
    if (text)
        ob_mem(o, s, n);
    else
        o->len = write_binary(o->b + o->len, s, n, b64) - o->b;
    return 0;
}

/* A payload as the jsonl rows carry it: None, or the str encode_payload gives (a new reference). */
static PyObject *
payload_obj(const uint8_t *s, Py_ssize_t n, int b64)
{
    if (s == NULL)
        Py_RETURN_NONE;
    /* printable ASCII, the common case: checked while copied into the str */
    PyObject *u = PyUnicode_New(n, 127);
    if (u == NULL)
        return NULL;
    uint8_t *w = PyUnicode_DATA(u);
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t x = load8(s + i);
        if ((x & HIGH8) | has_less8(x, 0x20) | has_zero8(x ^ (ONES8 * 0x7F)))
            break;
        memcpy(w + i, &x, 8);
    }
    for (; i < n && s[i] >= 0x20 && s[i] < 0x7F; i++)
        w[i] = s[i];
    if (i == n)
        return u;
    Py_DECREF(u);
    u = NULL;
    int text = payload_is_text(s, n, &u);
    if (text < 0)
        return NULL;
    if (text)
        return u;
    u = PyUnicode_New(binary_len(n, b64), 127);
    if (u != NULL)
        write_binary(PyUnicode_DATA(u), s, n, b64);
    return u;
}

static const char *const control_names[] = {
    "ABORT", "COMMIT", "LEADER_CHANGE", "SNAPSHOT_HEADER", "SNAPSHOT_FOOTER", "KRAFT_VERSION", "KRAFT_VOTERS"};

/* ControlRecord.type_name: the ControlType name, else the number. */
static void
ob_control_name(obuf *o, int type)
{
    if (type >= 0 && type <= 6) {
        const char *s = control_names[type];
        ob_mem(o, s, (Py_ssize_t)strlen(s));
    }
    else
        ob_int(o, type);
}

static const char *const codec_names[] = {"none", "gzip", "snappy", "lz4", "zstd"};

/* kafka_dump.timestamp_type_name (magic 2) with its spaces: " CreateTime: " / " LogAppendTime: ". */
static inline void
ob_ts_type(obuf *o, int16_t attr)
{
    if (attr & 0x08)
        OB_LIT(o, " LogAppendTime: ");
    else
        OB_LIT(o, " CreateTime: ");
}

/* The jsonl row classes (render_setup: kafkatx.render.jsonl_rows.BatchRow, RecordRow, HeaderRow, with
 * their fields in this order) and the strs the rows share. The classes are msgspec Structs with
 * gc=False: every field a slot (an object pointer at a fixed offset, behind a member descriptor, as
 * for Record above), nothing else in an instance, not tracked by the collector. A row is made like
 * a Record (resolve_slots, new_slotted: tp_alloc, then one store per field), what the Struct's own
 * constructor does for positional arguments, without its argument handling. */
#define N_BROW 21
static const char *const brow_names[N_BROW] = {
    "base_offset", "last_offset", "count", "position", "size", "magic", "crc", "crc_valid", "compression",
    "partition_leader_epoch", "producer_id", "producer_epoch", "base_sequence", "last_sequence",
    "is_transactional", "is_control", "control_type", "coordinator_epoch", "base_timestamp_ms",
    "max_timestamp_ms", "records"};
#define N_RROW 5
static const char *const rrow_names[N_RROW] = {"offset", "timestamp_ms", "key", "value", "headers"};
#define N_HROW 2
static const char *const hrow_names[N_HROW] = {"key", "value"};

typedef struct {
    PyTypeObject *tp;  /* NULL until render_setup */
    Py_ssize_t off[N_BROW];
} row_cls;
static row_cls batch_row, record_row, header_row;
static PyObject *row_unset = NULL;  /* msgspec.UNSET: a field left out of the JSON (records when not deep) */
static PyObject *codec_str[5], *control_str[7];

static int
setup_row(row_cls *rc, PyObject *cls, const char *const *names, int n)
{
    Py_ssize_t off[N_BROW];
    PyObject *fields = PyObject_GetAttrString(cls, "__struct_fields__");
    if (fields == NULL)
        return -1;
    int ok = PyTuple_Check(fields) && PyTuple_GET_SIZE(fields) == n;
    for (int i = 0; ok && i < n; i++) {
        PyObject *f = PyTuple_GET_ITEM(fields, i);
        ok = PyUnicode_Check(f) && PyUnicode_CompareWithASCIIString(f, names[i]) == 0;
    }
    Py_DECREF(fields);
    if (!ok) {
        PyErr_Format(PyExc_TypeError, "render_setup(): %R does not have the fields render_batches fills", cls);
        return -1;
    }
    if (resolve_slots(cls, names, n, off) < 0)
        return -1;
    PyTypeObject *tp = (PyTypeObject *)cls;
    if ((tp->tp_flags & Py_TPFLAGS_HAVE_GC) || tp->tp_basicsize != (Py_ssize_t)(sizeof(PyObject) + n * sizeof(PyObject *))) {
        PyErr_Format(PyExc_TypeError, "render_setup(): %R holds more than its fields (or is tracked by gc)", cls);
        return -1;
    }
    Py_XSETREF(rc->tp, (PyTypeObject *)Py_NewRef(cls));
    memcpy(rc->off, off, sizeof(Py_ssize_t) * (size_t)n);
    return 0;
}

static PyObject *
sp_render_setup(PyObject *self, PyObject *args)
{
    PyObject *b, *r, *h, *unset;
    if (!PyArg_ParseTuple(args, "OOOO:render_setup", &b, &r, &h, &unset))
        return NULL;
    for (int i = 0; i < 5; i++)
        if (codec_str[i] == NULL && (codec_str[i] = PyUnicode_InternFromString(codec_names[i])) == NULL)
            return NULL;
    for (int i = 0; i < 7; i++)
        if (control_str[i] == NULL && (control_str[i] = PyUnicode_InternFromString(control_names[i])) == NULL)
            return NULL;
    Py_CLEAR(batch_row.tp);  /* a failed setup leaves render_batches refusing jsonl */
    if (setup_row(&header_row, h, hrow_names, N_HROW) < 0 || setup_row(&record_row, r, rrow_names, N_RROW) < 0
        || setup_row(&batch_row, b, brow_names, N_BROW) < 0) {
        Py_CLEAR(batch_row.tp);
        return NULL;
    }
    Py_XSETREF(row_unset, Py_NewRef(unset));
    Py_RETURN_NONE;
}

/* A row of class rc with its fields v[0:n] (references taken; NULL entries: a failed conversion,
 * then NULL). */
static inline PyObject *
new_row(const row_cls *rc, PyObject **v, int n)
{
    return new_slotted(rc->tp, rc->off, v, n);
}

/* A timestamp as dump.py shows it: None when negative (`ts if ts >= 0 else None`). */
static inline PyObject *
ms_obj(i128 v)
{
    if (v < 0)
        Py_RETURN_NONE;
    return long_from_i128(v);
}

/* DefaultRecordBatch.incrementSequence (kafka_dump.increment_sequence), in Python's integers. */
static inline int64_t
inc_sequence(int64_t seq, int64_t inc)
{
    if (seq > 0x7FFFFFFFLL - inc)
        return inc - (0x7FFFFFFFLL - seq) - 1;
    return seq + inc;
}

typedef struct {
    const uint8_t *key, *val;     /* NULL: null */
    Py_ssize_t klen, vlen;
} hdr_t;

/* One record of a records section d[0:n] at *pp, as decode_records reads it; 0, or -1 when
 * decode_records would report an error (nothing is raised). Header fields go to hdrs (room for
 * (n - *pp) / 2 entries, the bound decode_records checks). */
static int
scan_record(const uint8_t *d, Py_ssize_t n, Py_ssize_t *pp, i128 *ts_delta, int64_t *off_delta,
            const uint8_t **key, Py_ssize_t *klen, const uint8_t **val, Py_ssize_t *vlen,
            hdr_t *hdrs, Py_ssize_t *hcount, Py_ssize_t *rec_len)
{
    Py_ssize_t p = *pp;
    i128 v;
    int why;
    if (read_zz(d, n, p, 5, &v, &p, &why) < 0 || v < MIN_RECORD - 1 || p + (Py_ssize_t)v > n)
        return -1;
    Py_ssize_t rec_end = p + (Py_ssize_t)v;
    *rec_len = rec_end - *pp;
    p += 1; /* attributes */
    if (read_zz(d, rec_end, p, 10, ts_delta, &p, &why) < 0)
        return -1;
    if (read_zz(d, rec_end, p, 5, &v, &p, &why) < 0)
        return -1;
    *off_delta = (int64_t)v;
    if (read_zz(d, rec_end, p, 5, &v, &p, &why) < 0 || v < -1 || p + (v < 0 ? 0 : (Py_ssize_t)v) > rec_end)
        return -1;
    *key = v < 0 ? NULL : d + p;
    *klen = v < 0 ? 0 : (Py_ssize_t)v;
    p += *klen;
    if (read_zz(d, rec_end, p, 5, &v, &p, &why) < 0 || v < -1 || p + (v < 0 ? 0 : (Py_ssize_t)v) > rec_end)
        return -1;
    *val = v < 0 ? NULL : d + p;
    *vlen = v < 0 ? 0 : (Py_ssize_t)v;
    p += *vlen;
    if (read_zz(d, rec_end, p, 5, &v, &p, &why) < 0 || v < 0 || v * 2 > rec_end - p)
        return -1;
    Py_ssize_t hc = (Py_ssize_t)v;
    for (Py_ssize_t h = 0; h < hc; h++) {
        if (read_zz(d, rec_end, p, 5, &v, &p, &why) < 0 || v < 0 || p + (Py_ssize_t)v > rec_end)
            return -1;
        hdrs[h].key = d + p;
        hdrs[h].klen = (Py_ssize_t)v;
        p += (Py_ssize_t)v;
        if (read_zz(d, rec_end, p, 5, &v, &p, &why) < 0 || v < -1 || p + (v < 0 ? 0 : (Py_ssize_t)v) > rec_end)
            return -1;
        hdrs[h].val = v < 0 ? NULL : d + p;
        hdrs[h].vlen = v < 0 ? 0 : (Py_ssize_t)v;
        p += hdrs[h].vlen;
    }
    if (p != rec_end)
        return -1;
    *hcount = hc;
    *pp = p;
    return 0;
}

/* 1 when s is UTF-8 (a header key: decode_records reports one that is not), 0 otherwise, -1 on error.
 * With 1 and out != NULL, *out is the str (a new reference). */
static int
decode_utf8(const uint8_t *s, Py_ssize_t n, PyObject **out)
{
    Py_ssize_t i = 0;
    while (i < n && s[i] < 0x80)
        i++;
    if (i == n) {
        if (out != NULL && (*out = str_ascii(s, n)) == NULL)
            return -1;
        return 1;
    }
    PyObject *u = PyUnicode_DecodeUTF8((const char *)s, n, NULL);
    if (u != NULL) {
        if (out != NULL)
            *out = u;
        else
            Py_DECREF(u);
        return 1;
    }
    if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
        return -1;
    PyErr_Clear();
    return 0;
}

/* The last HeaderRow made for the header at each of the first N_HCACHE places of a record: records
 * of a segment tend to carry the same headers, and an equal header (same key and value bytes) can
 * be the same immutable row. */
#define N_HCACHE 4
typedef struct {
    hdr_t h;          /* the bytes it was made from (in the buffer of this call) */
    PyObject *row;    /* NULL: none yet */
} hcache_t;

/* The batch row fields that tend to repeat from batch to batch (count, size, leader epoch, producer
 * id and epoch, sequences, timestamps): the last two ints made for each (two: producers' batches
 * interleave), reused while equal. */
#define N_ICACHE 9
typedef struct {
    int64_t v[2];
    PyObject *o[2];  /* NULL: none yet */
    int next;        /* the entry to replace */
} icache_t;

/* Where a batch is rendered: text lines into o, or (rows != NULL) jsonl row objects appended to rows. */
typedef struct {
    obuf o;
    PyObject *rows;
    hdr_t *hdrs;  /* scan_record's header fields */
    Py_ssize_t hdrs_cap;
    hcache_t hcache[N_HCACHE];
    icache_t icache[N_ICACHE];
} sink;

/* v as an int: an object made for the same field of a previous row when it holds v. */
static inline PyObject *
same_int(sink *s, int field, int64_t v)
{
    icache_t *c = &s->icache[field];
    for (int k = 0; k < 2; k++)
        if (c->o[k] != NULL && c->v[k] == v)
            return Py_NewRef(c->o[k]);
    PyObject *o = PyLong_FromLongLong(v);
    if (o == NULL)
        return NULL;
    Py_XSETREF(c->o[c->next], Py_NewRef(o));
    c->v[c->next] = v;
    c->next ^= 1;
    return o;
}

static inline int
same_bytes(const uint8_t *a, Py_ssize_t an, const uint8_t *b, Py_ssize_t bn)
{
    return an == bn && (a == NULL) == (b == NULL) && (an == 0 || memcmp(a, b, (size_t)an) == 0);
}

/* RF_RAW (text): payloads as kafka-dump-log.sh's StringDecoder prints them (kafka_dump.java_string):
 * UTF-8 written as it is, control characters included; a key or value that is not UTF-8 (Java and
 * Python replace its bytes with U+FFFD) sends the batch to the Python path. */
enum { RF_DEEP = 1, RF_VERIFY = 2, RF_BASE64 = 4, RF_PRINT_DATA = 8, RF_RAW = 16 };

/* The headers of one record as a tuple of HeaderRow; NULL with *python set when a key is not UTF-8. */
static PyObject *
header_rows(sink *s, const hdr_t *hd, Py_ssize_t hc, int b64, int *python)
{
    PyObject *t = PyTuple_New(hc);
    if (t == NULL || hc == 0)
        return t;
    for (Py_ssize_t k = 0; k < hc; k++) {
        hcache_t *c = k < N_HCACHE ? &s->hcache[k] : NULL;
        if (c != NULL && c->row != NULL && same_bytes(c->h.key, c->h.klen, hd[k].key, hd[k].klen)
            && same_bytes(c->h.val, c->h.vlen, hd[k].val, hd[k].vlen)) {
            PyTuple_SET_ITEM(t, k, Py_NewRef(c->row));
            continue;
        }
        PyObject *v[2] = {NULL, NULL};
        int u = decode_utf8(hd[k].key, hd[k].klen, &v[0]);
        if (u <= 0) {
            *python = u == 0;
            Py_DECREF(t);
            return NULL;
        }
        v[1] = payload_obj(hd[k].val, hd[k].vlen, b64);
        PyObject *row = new_row(&header_row, v, N_HROW);
        if (row == NULL) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, k, row);
        if (c != NULL) {
            c->h = hd[k];
            Py_XSETREF(c->row, Py_NewRef(row));
        }
    }
    PyObject_GC_UnTrack(t);  /* holds gc=False rows only: no cycle can pass through it */
    return t;
}

/* The records of one batch (header h; records section d[0:n], decompressed if need be): text record
 * lines into s->o, or (*recs != NULL on return) a tuple of RecordRow. The one record walker of both
 * outputs. 1 when rendered, 0 when the Python path must take the batch (the output is then left as
 * it was), -1 on a Python error. */
static int
render_records(sink *s, PyObject **recs, const uint8_t *h, const uint8_t *d, Py_ssize_t n, int flags, int control,
               int ctype, int64_t cepoch)
{
    obuf *o = &s->o;
    const int text = s->rows == NULL;
    const Py_ssize_t mark = o->len;
    const int32_t count = be32(h + 57);
    const int16_t attr = be16(h + 21);
    const int64_t base = be64(h), base_ts = be64(h + 27), max_ts = be64(h + 35);
    const int32_t bseq = be32(h + 53);
    const int b64 = (flags & RF_BASE64) != 0;
    if (count < 0 || (int64_t)count * MIN_RECORD > n)
        return 0;
    if (s->hdrs_cap < n / 2 + 1) {
        hdr_t *nh = PyMem_Realloc(s->hdrs, sizeof(hdr_t) * (size_t)(n / 2 + 1));
        if (nh == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        s->hdrs = nh;
        s->hdrs_cap = n / 2 + 1;
    }
    hdr_t *hd = s->hdrs;
    PyObject *out = NULL;
    if (!text && (out = PyTuple_New(count)) == NULL)
        return -1;
    Py_ssize_t p = 0;
    for (int32_t rec = 0; rec < count; rec++) {
        i128 ts_delta;
        int64_t off_delta;
        const uint8_t *key, *val;
        Py_ssize_t klen, vlen, hc, rec_len;
        if (scan_record(d, n, &p, &ts_delta, &off_delta, &key, &klen, &val, &vlen, hd, &hc, &rec_len) < 0)
            goto python;
        i128 offset = (i128)base + off_delta;
        i128 ts = (attr & 0x08) ? (i128)max_ts : (i128)base_ts + ts_delta;
        if (!text) {
            /* dump.py _batch_rows' record dict */
            int python = 0;
            PyObject *v[N_RROW] = {NULL, NULL, NULL, NULL, NULL};
            v[4] = header_rows(s, hd, hc, b64, &python);
            if (v[4] == NULL) {
                if (python)
                    goto python;
                goto error;
            }
            v[0] = long_from_i128(offset);
            v[1] = ms_obj(ts);
            v[2] = payload_obj(key, klen, b64);
            v[3] = payload_obj(val, vlen, b64);
            PyObject *row = new_row(&record_row, v, N_RROW);
            if (row == NULL)
                goto error;
            PyTuple_SET_ITEM(out, rec, row);
            continue;
        }
        /* kafka_dump.record_line */
        for (Py_ssize_t k = 0; k < hc; k++) {
            int u = decode_utf8(hd[k].key, hd[k].klen, NULL);
            if (u < 0)
                return -1;
            if (!u)
                goto python;
        }
        if ((flags & RF_RAW) && (flags & RF_PRINT_DATA) && !control) {
            int uk = key == NULL ? 1 : decode_utf8(key, klen, NULL);
            int uv = val == NULL ? 1 : decode_utf8(val, vlen, NULL);
            if (uk < 0 || uv < 0)
                goto error;
            if (!uk || !uv)
                goto python;
        }
        /* hex/base64: 2 bytes per byte of the record at most, plus the fixed text */
        if (ob_reserve(o, 4 * rec_len + 512) < 0)
            return -1;
        OB_LIT(o, "| offset: ");
        ob_int(o, offset);
        ob_ts_type(o, attr);
        ob_int(o, ts);
        OB_LIT(o, " keySize: ");
        ob_int(o, key == NULL ? -1 : klen);
        OB_LIT(o, " valueSize: ");
        ob_int(o, val == NULL ? -1 : vlen);
        OB_LIT(o, " sequence: ");
        ob_int(o, bseq == -1 ? -1 : inc_sequence(bseq, off_delta));
        OB_LIT(o, " headerKeys: [");
        for (Py_ssize_t k = 0; k < hc; k++) {
            if (k)
                o->b[o->len++] = ',';
            ob_mem(o, hd[k].key, hd[k].klen);
        }
        o->b[o->len++] = ']';
        if (control) {
            if (ctype == 0 || ctype == 1) {
                OB_LIT(o, " endTxnMarker: ");
                ob_control_name(o, ctype);
                OB_LIT(o, " coordinatorEpoch: ");
                ob_int(o, cepoch);
            }
            else {
                OB_LIT(o, " controlType: ");
                ob_control_name(o, ctype);
                o->b[o->len++] = '(';
                ob_int(o, ctype);
                o->b[o->len++] = ')';
            }
        }
        else if ((flags & RF_PRINT_DATA) && (flags & RF_RAW)) {
            if (key != NULL) {
                OB_LIT(o, " key: ");
                ob_mem(o, key, klen);
            }
            if (val != NULL) {
                OB_LIT(o, " payload: ");
                ob_mem(o, val, vlen);
            }
        }
        else if (flags & RF_PRINT_DATA) {
            if (key != NULL) {
                OB_LIT(o, " key: ");
                if (ob_payload(o, key, klen, b64) < 0)
                    return -1;
            }
            if (val != NULL) {
                OB_LIT(o, " payload: ");
                if (ob_payload(o, val, vlen, b64) < 0)
                    return -1;
            }
        }
        o->b[o->len++] = '\n';
    }
    if (p != n)
        goto python;
    if (recs != NULL) {
        if (out != NULL)
            PyObject_GC_UnTrack(out);  /* as header_rows' tuple */
        *recs = out;
    }
    return 1;

python:
    Py_XDECREF(out);
    o->len = mark;
    return 0;

error:
    Py_XDECREF(out);
    return -1;
}

/* The row (jsonl) or lines (text) of the framed magic-2 batch h (size bytes at buffer position pos)
 * whose records section is d[0:n]; checks done by the caller (CRC, control record). 1 when
 * rendered, 0 when its records need the Python path (output left as it was), -1 on a Python error. */
static int
render_one(sink *s, const uint8_t *h, Py_ssize_t pos, Py_ssize_t size, const uint8_t *d, Py_ssize_t n, int flags,
           int control, int ctype, int64_t cepoch)
{
    obuf *o = &s->o;
    const int deep = (flags & RF_DEEP) != 0, verify = (flags & RF_VERIFY) != 0;
    const int64_t base = be64(h);
    const int32_t lod = be32(h + 23);
    const i128 last = (i128)base + lod;
    const uint32_t crc = be32u(h + 17);
    const int16_t attr = be16(h + 21);
    const int codec = attr & 0x07;
    const int64_t bts = be64(h + 27), mts = be64(h + 35), pid = be64(h + 43);
    const int32_t ple = be32(h + 12), bseq = be32(h + 53), count = be32(h + 57);
    const int16_t pep = be16(h + 51);
    const int64_t lseq = bseq == -1 ? -1 : inc_sequence(bseq, lod);
    const Py_ssize_t mark = o->len;
    if (s->rows != NULL) {
        /* dump.py _batch_dict (+ "records" when deep) */
        PyObject *recs = NULL;
        if (deep) {
            int r = render_records(s, &recs, h, d, n, flags, control, ctype, cepoch);
            if (r <= 0)
                return r;
        }
        PyObject *v[N_BROW] = {
            PyLong_FromLongLong(base), long_from_i128(last), same_int(s, 0, count), PyLong_FromSsize_t(pos),
            same_int(s, 1, size), PyLong_FromLong(2), PyLong_FromUnsignedLong(crc),
            Py_NewRef(verify ? Py_True : Py_None), Py_NewRef(codec_str[codec]), same_int(s, 2, ple),
            same_int(s, 3, pid), same_int(s, 4, pep), same_int(s, 5, bseq), same_int(s, 6, lseq),
            PyBool_FromLong(attr & 0x10), PyBool_FromLong(control), NULL, NULL,
            bts < 0 ? Py_NewRef(Py_None) : same_int(s, 7, bts), mts < 0 ? Py_NewRef(Py_None) : same_int(s, 8, mts),
            recs};
        if (!control) {
            v[16] = Py_NewRef(Py_None);
            v[17] = Py_NewRef(Py_None);
        }
        else {
            v[16] = ctype >= 0 && ctype <= 6 ? Py_NewRef(control_str[ctype]) : PyUnicode_FromFormat("%d", ctype);
            v[17] = ctype == 0 || ctype == 1 ? PyLong_FromLongLong(cepoch) : Py_NewRef(Py_None);
        }
        if (!deep)
            v[20] = Py_NewRef(row_unset);
        PyObject *row = new_row(&batch_row, v, N_BROW);
        if (row == NULL)
            return -1;
        int r = PyList_Append(s->rows, row);
        Py_DECREF(row);
        return r < 0 ? -1 : 1;
    }
    /* kafka_dump.batch_line */
    if (ob_reserve(o, 1024) < 0)
        return -1;
    OB_LIT(o, "baseOffset: ");
    ob_int(o, base);
    OB_LIT(o, " lastOffset: ");
    ob_int(o, last);
    OB_LIT(o, " count: ");
    ob_int(o, count);
    OB_LIT(o, " baseSequence: ");
    ob_int(o, bseq);
    OB_LIT(o, " lastSequence: ");
    ob_int(o, lseq);
    OB_LIT(o, " producerId: ");
    ob_int(o, pid);
    OB_LIT(o, " producerEpoch: ");
    ob_int(o, pep);
    OB_LIT(o, " partitionLeaderEpoch: ");
    ob_int(o, ple);
    if (attr & 0x10)
        OB_LIT(o, " isTransactional: true");
    else
        OB_LIT(o, " isTransactional: false");
    if (control)
        OB_LIT(o, " isControl: true");
    else
        OB_LIT(o, " isControl: false");
    if (attr & 0x40) {
        OB_LIT(o, " deleteHorizonMs: OptionalLong[");
        ob_int(o, bts);
        o->b[o->len++] = ']';
    }
    else
        OB_LIT(o, " deleteHorizonMs: OptionalLong.empty");
    OB_LIT(o, " position: ");
    ob_int(o, pos);
    ob_ts_type(o, attr);
    ob_int(o, mts);
    OB_LIT(o, " size: ");
    ob_int(o, size);
    OB_LIT(o, " magic: 2 compresscodec: ");
    ob_mem(o, codec_names[codec], (Py_ssize_t)strlen(codec_names[codec]));
    OB_LIT(o, " crc: ");
    ob_int(o, crc);
    if (verify)
        OB_LIT(o, " isvalid: true\n");
    else
        OB_LIT(o, " isvalid: unchecked\n");
    if (deep) {
        int r = render_records(s, NULL, h, d, n, flags, control, ctype, cepoch);
        if (r <= 0) {
            o->len = mark;
            return r;
        }
    }
    return 1;
}

static int
opt_offset(PyObject *obj, int *has, int64_t *value)
{
    *has = 0;
    if (obj == Py_None)
        return 0;
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (overflow) {
        PyErr_SetString(PyExc_OverflowError, "offset out of range");
        return -1;
    }
    *has = 1;
    *value = v;
    return 0;
}

/* A sink for text (bytes) or, when jsonl, row objects (render_setup must have been called). */
static int
sink_init(sink *s, int text)
{
    memset(s, 0, sizeof *s);
    if (text)
        return 0;
    if (batch_row.tp == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "render_setup() was not called");
        return -1;
    }
    s->rows = PyList_New(0);
    return s->rows == NULL ? -1 : 0;
}

static void
sink_free(sink *s)
{
    PyMem_Free(s->hdrs);
    for (int k = 0; k < N_HCACHE; k++)
        Py_CLEAR(s->hcache[k].row);
    for (int k = 0; k < N_ICACHE; k++) {
        Py_CLEAR(s->icache[k].o[0]);
        Py_CLEAR(s->icache[k].o[1]);
    }
}

/* What the sink holds (bytes, or the list of rows), its buffers released; sink_clear only releases. */
static PyObject *
sink_result(sink *s)
{
    sink_free(s);
    if (s->rows != NULL)
        return s->rows;
    PyObject *data = PyBytes_FromStringAndSize(s->o.b ? s->o.b : "", s->o.len);
    PyMem_Free(s->o.b);
    return data;
}

static void
sink_clear(sink *s)
{
    sink_free(s);
    PyMem_Free(s->o.b);
    Py_CLEAR(s->rows);
}

static PyObject *
sp_render_batches(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "render_batches() takes 8 arguments");
        return NULL;
    }
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    Py_ssize_t end = PyLong_AsSsize_t(args[2]);
    int text = PyObject_IsTrue(args[3]);
    long flags = PyLong_AsLong(args[4]);
    Py_ssize_t max_bytes = PyLong_AsSsize_t(args[7]);
    if (PyErr_Occurred())
        return NULL;
    int has_start, has_end;
    int64_t start_off = 0, end_off = 0;
    if (opt_offset(args[5], &has_start, &start_off) < 0 || opt_offset(args[6], &has_end, &end_off) < 0)
        return NULL;
    if (pos < 0 || end < pos) {
        PyErr_SetString(PyExc_ValueError, "range outside the buffer");
        return NULL;
    }
    sink s;
    if (sink_init(&s, text) < 0)
        return NULL;
    Py_buffer view;
    if (get_buffer(args[0], &view, pos, end) < 0) {
        sink_clear(&s);
        return NULL;
    }
    const uint8_t *bufp = (const uint8_t *)view.buf;
    Py_ssize_t scanned = 0;
    int stop = 0;
    const int deep = (flags & RF_DEEP) != 0, verify = (flags & RF_VERIFY) != 0;
    /* text: room for what the chunk will likely print (deep: record lines ~2x the segment bytes,
     * else a batch line per ~1 KB), so that the buffer is seldom moved while it grows */
    Py_ssize_t expect = end - pos < max_bytes ? end - pos : max_bytes;
    if (text && expect > 0 && ob_reserve(&s.o, deep ? 2 * expect : expect / 2) < 0) {
        PyBuffer_Release(&view);
        sink_clear(&s);
        return NULL;
    }
    while (pos < end && scanned < max_bytes) {
        const uint8_t *h = bufp + pos;
        Py_ssize_t size = v2_batch_size(h, end - pos);
        if (size == 0)
            break;
        const int64_t base = be64(h);
        const int32_t lod = be32(h + 23);
        const i128 last = (i128)base + lod;
        if (has_start && last < start_off) {  /* dump.py: skipped before any check */
            pos += size;
            scanned += size;
            continue;
        }
        if (has_end && base > end_off) {
            stop = 1;
            break;
        }
        const uint32_t crc = be32u(h + 17);
        if (verify && crc32c_impl(0, h + CRC_START, (size_t)(size - CRC_START)) != crc)
            break;
        const int16_t attr = be16(h + 21);
        const int codec = attr & 0x07, control = (attr & 0x20) != 0;
        if (codec > 4 || (deep && codec != 0))
            break;
        int ctype = 0;
        int64_t cepoch = -1;
        /* read_control_record decodes the first record; a records count that cannot fit is its
         * error even then (record_batch._iter_v2), which parse_control does not look at */
        if (control && ((int64_t)be32(h + 57) * MIN_RECORD > size - HEADER_SIZE
                        || !parse_control(h, size, &ctype, &cepoch)))
            break;
        int r = render_one(&s, h, pos, size, h + HEADER_SIZE, size - HEADER_SIZE, (int)flags, control, ctype, cepoch);
        if (r < 0) {
            PyBuffer_Release(&view);
            sink_clear(&s);
            return NULL;
        }
        if (r == 0)
            break;
        pos += size;
        scanned += size;
    }
    PyBuffer_Release(&view);
    PyObject *data = sink_result(&s);
    if (data == NULL)
        return NULL;
    return Py_BuildValue("(NnO)", data, pos, stop ? Py_True : Py_False);
}

/* render_batch(buf, pos, data, text, flags) -> bytes | BatchRow | None: the compressed data batch
 * framed at pos (its CRC already checked when that is wanted) rendered with its records section
 * decompressed into data; None when its records need the Python path. */
static PyObject *
sp_render_batch(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "render_batch() takes 5 arguments");
        return NULL;
    }
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    int text = PyObject_IsTrue(args[3]);
    long flags = PyLong_AsLong(args[4]);
    if (PyErr_Occurred())
        return NULL;
    Py_buffer view, dv;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const uint8_t *h = (const uint8_t *)view.buf + (pos >= 0 ? pos : 0);
    Py_ssize_t size = pos >= 0 && pos <= view.len ? v2_batch_size(h, view.len - pos) : 0;
    if (size == 0) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "no complete magic 2 batch at pos");
        return NULL;
    }
    if (be16(h + 21) & 0x20) {  /* control batches: render_batches or the Python path */
        PyBuffer_Release(&view);
        Py_RETURN_NONE;
    }
    if (PyObject_GetBuffer(args[2], &dv, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    sink s;
    if (sink_init(&s, text) < 0) {
        PyBuffer_Release(&dv);
        PyBuffer_Release(&view);
        return NULL;
    }
    int r = render_one(&s, h, pos, size, (const uint8_t *)dv.buf, dv.len, (int)flags, 0, 0, -1);
    PyBuffer_Release(&dv);
    PyBuffer_Release(&view);
    if (r <= 0) {
        sink_clear(&s);
        return r < 0 ? NULL : Py_NewRef(Py_None);
    }
    PyObject *data = sink_result(&s);
    if (data == NULL || text)
        return data;
    PyObject *row = Py_NewRef(PyList_GET_ITEM(data, 0));
    Py_DECREF(data);
    return row;
}

/* ----------------------------------------------------------------- module */

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
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "txn_log_decode(key, value)");
        return NULL;
    }
    Py_buffer kv, vv;
    PyObject *tid = NULL, *parts = NULL, *result = NULL;
    if (PyObject_GetBuffer(args[0], &kv, PyBUF_SIMPLE) < 0)
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
    if (args[1] == Py_None) {
        result = PyTuple_Pack(2, tid, Py_None);
        Py_DECREF(tid);
        return result;
    }
    if (PyObject_GetBuffer(args[1], &vv, PyBUF_SIMPLE) < 0) {
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

static PyMethodDef sp_methods[] = {
    {"setup", (PyCFunction)sp_setup, METH_VARARGS, "setup(Record, BatchHeader): resolve slot offsets"},
    {"decode_records", (PyCFunction)(void (*)(void))sp_decode_records, METH_FASTCALL,
     "decode_records(buf, start, end, p, rec, count, base_offset, base_ts, append_ts, limit)"},
    {"scan_headers", (PyCFunction)(void (*)(void))sp_scan_headers, METH_FASTCALL,
     "scan_headers(buf, pos, end, verify_crc, max_count, max_bytes); max_count -1: the last header only"},
    {"crc32c", (PyCFunction)(void (*)(void))sp_crc32c, METH_FASTCALL, "crc32c(buf, start, end) -> int"},
    {"set_fold_event", (PyCFunction)sp_set_fold_event, METH_O,
     "set_fold_event(cls): fold_segment's events are made as instances of this namedtuple class"},
    {"fold_segment", (PyCFunction)(void (*)(void))sp_fold_segment, METH_FASTCALL,
     "fold_segment(buf, start, end, crc_mode, breaks, seg_base, prev_last, want_table, max_bytes)"},
    {"bisect_many", (PyCFunction)(void (*)(void))sp_bisect_many, METH_FASTCALL,
     "bisect_many(a, xs, exact) -> [bisect_left(a, x) for x in xs] over an int64 buffer (exact: -k-1 if absent)"},
    {"replay_setup", (PyCFunction)sp_replay_setup, METH_VARARGS,
     "replay_setup(Entry, CompletedTxn, 'ABORT', 'COMMIT'): resolve slot offsets for replay_fold"},
    {"replay_fold", (PyCFunction)(void (*)(void))sp_replay_fold, METH_FASTCALL,
     "replay_fold(buf, pos, hi, producers, start, end, stop, check_data_crc, spans, span_floor, completed, "
     "topic, partition, max_bytes) -> (pos, batches, seen, reason)"},
    {"render_setup", (PyCFunction)sp_render_setup, METH_VARARGS,
     "render_setup(BatchRow, RecordRow, HeaderRow, UNSET): the classes of render_batches' jsonl rows"},
    {"render_batches", (PyCFunction)(void (*)(void))sp_render_batches, METH_FASTCALL,
     "render_batches(buf, pos, end, text, flags, start_offset, end_offset, max_bytes) -> (bytes | rows, pos, stop)"},
    {"txn_log_decode", (PyCFunction)(void (*)(void))sp_txn_log_decode, METH_FASTCALL,
     "txn_log_decode(key, value) -> (transactional_id, fields | None) | None (None: let Python decode)"},
    {"render_batch", (PyCFunction)(void (*)(void))sp_render_batch, METH_FASTCALL,
     "render_batch(buf, pos, data, text, flags) -> bytes | BatchRow | None"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef sp_module = {
    PyModuleDef_HEAD_INIT, "kafkatx.format._speedups",
    "Compiled fast paths for kafkatx.format.record_batch (optional; see _speedups.c).", -1, sp_methods};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    crc_init_tables();
    crc_shift_init(&crc_shift_long, CRC_LONG);
    crc_shift_init(&crc_shift_short, CRC_SHORT);
    int hw = 0;
#ifdef HAVE_HW_CRC
    __builtin_cpu_init();
    if (__builtin_cpu_supports("sse4.2")) {
        crc32c_impl = crc32c_hw;
        hw = 1;
    }
#endif
    PyObject *m = PyModule_Create(&sp_module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddIntConstant(m, "HW_CRC32C", hw) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
