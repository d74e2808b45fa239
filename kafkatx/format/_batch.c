/*
 * kafkatx.format._batch -- the compiled framing, records and CRC-32C of record_batch.py.
 *
 * The pure-Python module (record_batch.py) is the reference; every function here
 * mirrors one of its loops byte for byte, including which DecodeError subclass,
 * message and position a malformed input produces. record_batch.py uses this
 * module only when it imports (built with a C compiler) and the compiled path is on
 * (kafkatx.format.compiled); tests/format/test_speedups.py checks both paths agree.
 * The wire helpers (big-endian reads, varints, CRC-32C) are kafkatx/format/_wire.h, the batch
 * framer kafkatx/format/_framer.h.
 *
 * Functions (all positions are byte positions in the buffer given, which is read
 * through the buffer protocol -- an mmap is never copied -- and released again
 * before returning, so the caller can still close the mmap):
 *
 *   setup(Record, BatchHeader) -> None
 *       Resolve the slot offsets of the two frozen slotted dataclasses (see _wire.h).
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
 *   frame_columns(buf, pos, end, verify_crc, max_count, max_bytes)
 *       -> (columns: bytearray, count: int, pos: int, bad_crc: int | None)
 *       The rows of _framer.h's walk from pos (the batches scan_headers frames, on the same stop
 *       rules, at most max_count) as struct-of-arrays: FRAME_COLUMNS int64 columns of `count`
 *       rows each, column k at bytes [8 * k * count, 8 * (k + 1) * count). record_batch.frame_columns.
 *
 *   crc32c(buf, start, end) -> int
 *       CRC-32C (Castagnoli) of buf[start:end]: SSE4.2 crc32 instructions when the
 *       CPU has them (checked at import), slicing-by-8 tables otherwise.
 *
 * Record layout (DefaultRecord.java), zigzag varints:
 *   length varint, attributes i8, timestampDelta varlong, offsetDelta varint,
 *   keyLength varint (-1 = null), key, valueLength varint, value,
 *   headerCount varint, [headerKeyLength varint, headerKey (utf-8),
 *                        headerValueLength varint (-1 = null), headerValue]*
 * https://github.com/apache/kafka/blob/trunk/clients/src/main/java/org/apache/kafka/common/record/DefaultRecord.java
 */
#include "_framer.h"

/* ----------------------------------------------------------------- slot maps */

#define N_REC 6
static const char *const rec_names[N_REC] = {
    "offset", "timestamp", "key", "value", "headers", "attributes"};
enum { R_OFFSET, R_TIMESTAMP, R_KEY, R_VALUE, R_HEADERS, R_ATTRIBUTES };

/* The module's state (PEP 489 multi-phase init: one per module object, no mutable static): the
 * classes setup() registered. */
typedef struct {
    wire_cls record;  /* record_batch.Record, slots in rec_names' order */
    wire_cls header;  /* record_batch.BatchHeader, slots in hdr_names' order */
} batch_state;

static inline batch_state *
get_state(PyObject *module)
{
    return (batch_state *)PyModule_GetState(module);
}
static PyObject *
sp_setup(PyObject *self, PyObject *args)
{
    PyObject *rcls, *hcls;
    if (!PyArg_ParseTuple(args, "OO:setup", &rcls, &hcls))
        return NULL;
    batch_state *st = get_state(self);
    wire_cls rec = {NULL, {0}}, hdr = {NULL, {0}};
    if (wire_cls_set(&rec, rcls, rec_names, N_REC) < 0 || wire_cls_set(&hdr, hcls, hdr_names, N_HDR) < 0) {
        Py_XDECREF(rec.tp);
        return NULL;
    }
    Py_XSETREF(st->record.tp, rec.tp);
    memcpy(st->record.off, rec.off, sizeof rec.off);
    Py_XSETREF(st->header.tp, hdr.tp);
    memcpy(st->header.off, hdr.off, sizeof hdr.off);
    Py_RETURN_NONE;
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
make_record(const wire_cls *rc, PyObject *offset, PyObject *timestamp, PyObject *key, PyObject *value, PyObject *headers,
            PyObject *attributes)
{
    /* steals every argument, also on failure: made as every compiled instance is (_wire.h's new_slotted) */
    PyObject *v[N_REC] = {[R_OFFSET] = offset, [R_TIMESTAMP] = timestamp, [R_KEY] = key, [R_VALUE] = value,
                          [R_HEADERS] = headers, [R_ATTRIBUTES] = attributes};
    return new_slotted(rc->tp, rc->off, v, N_REC);
}

static PyObject *
sp_decode_records(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    const wire_cls *rc = &get_state(self)->record;
    PyObject *buf, *append_ts;
    Py_ssize_t start, end, p, rec, count, limit;
    int64_t base_offset, base_ts;
    /* OverflowError for ints past int64: the caller falls back to Python */
    if (wire_args("decode_records", args, nargs, "OnnnnnLLOn", &buf, &start, &end, &p, &rec, &count,
                  &base_offset, &base_ts, &append_ts, &limit) < 0)
        return NULL;
    if (rc->tp == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "setup() was not called");
        return NULL;
    }
    if (append_ts == Py_None)
        append_ts = NULL;
    else if (!PyLong_CheckExact(append_ts)) {
        PyErr_SetString(PyExc_TypeError, "append_ts must be an int or None");
        return NULL;
    }

    Py_buffer view;
    if (get_buffer(buf, &view, start, end) < 0)
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
        PyObject *r = make_record(rc, o_off, o_ts, key, value, headers, o_attr);
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

static PyObject *
sp_crc32c(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *buf;
    Py_ssize_t start, end;
    if (wire_args("crc32c", args, nargs, "Onn", &buf, &start, &end) < 0)
        return NULL;
    Py_buffer view;
    if (get_buffer(buf, &view, start, end) < 0)
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

/* The buffer of a walk over buf[pos:end] (view, released by the caller), and *cap: the most batches the
 * walk can frame there (each at least HEADER_SIZE bytes), at most max_count. */
static int
walk_view(PyObject *buf, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t max_count, Py_buffer *view, Py_ssize_t *cap)
{
    if (get_buffer(buf, view, pos < end ? pos : end, end) < 0)
        return -1;
    Py_ssize_t c = (end - pos) / HEADER_SIZE + 1;
    *cap = c > max_count ? max_count : c < 0 ? 0 : c;
    return 0;
}

static PyObject *
sp_scan_headers(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    const wire_cls *hc = &get_state(self)->header;
    PyObject *buf;
    Py_ssize_t pos, end, max_count, max_bytes;
    int verify;
    if (wire_args("scan_headers", args, nargs, "Onnpnn", &buf, &pos, &end, &verify, &max_count, &max_bytes) < 0)
        return NULL;
    if (hc->tp == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "setup() was not called");
        return NULL;
    }
    /* max_count -1: only the last header of the scan is built (callers that keep only the last) */
    int last_only = max_count == -1;
    if (last_only)
        max_count = PY_SSIZE_T_MAX;
    if (max_count < 1) {
        PyErr_SetString(PyExc_ValueError, "max_count must be positive (or -1)");
        return NULL;
    }
    Py_buffer view;
    Py_ssize_t cap;
    if (walk_view(buf, pos, end, last_only ? 1 : max_count, &view, &cap) < 0)
        return NULL;
    const uint8_t *base = (const uint8_t *)view.buf;
    Py_ssize_t last_pos = -1;
    PyObject *out = PyList_New(cap);
    if (out == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    Py_ssize_t got = 0, scanned = 0;
    PyObject *bad_crc = NULL;
    kx_walk w = {base, pos, end};
    int framed = KX_NONE;
    uint32_t stored = 0;  /* the CRC of the batch whose check failed */
    if (last_only) {  /* a loop of its own: nothing but the last position lives across the CRC call */
        while (scanned < max_bytes) {
            kx_header r;
            if ((framed = kx_frame_next(&w, &r, verify)) != KX_FRAMED) {
                stored = framed == KX_BAD_CRC ? kx_crc(&r) : 0;
                break;
            }
            last_pos = r.position;
            scanned += r.size;
        }
    }
    else {
        while (got < cap && scanned < max_bytes) {
            kx_header r;
            if ((framed = kx_frame_next(&w, &r, verify)) != KX_FRAMED) {
                stored = framed == KX_BAD_CRC ? kx_crc(&r) : 0;
                break;
            }
            PyObject *o = kx_new_header(hc, &r);
            if (o == NULL)
                goto error;
            PyList_SET_ITEM(out, got, o);
            got++;
            scanned += r.size;
        }
    }
    if (framed == KX_BAD_CRC && (bad_crc = PyLong_FromUnsignedLong(stored)) == NULL)
        goto error;
    pos = w.pos;
    if (last_pos >= 0) {
        /* framed again: cheaper than keeping every row of the walk */
        kx_header r;
        if (!kx_frame(base + last_pos, end - last_pos, last_pos, &r)) {
            PyErr_SetString(PyExc_SystemError, "scan_headers(): the last batch no longer frames");
            goto error;
        }
        PyObject *o = kx_new_header(hc, &r);
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


static PyObject *
sp_frame_columns(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *buf;
    Py_ssize_t pos, end, max_count, max_bytes;
    int verify;
    if (wire_args("frame_columns", args, nargs, "Onnpnn", &buf, &pos, &end, &verify, &max_count, &max_bytes) < 0)
        return NULL;
    if (max_count < 0) {
        PyErr_SetString(PyExc_ValueError, "max_count must not be negative");
        return NULL;
    }
    Py_buffer view;
    Py_ssize_t cap;
    if (walk_view(buf, pos, end, max_count, &view, &cap) < 0)
        return NULL;
    PyObject *cols = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)sizeof(int64_t) * KX_N_COLUMNS * cap);
    if (cols == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    int64_t *c = (int64_t *)PyByteArray_AS_STRING(cols);
    kx_walk w = {(const uint8_t *)view.buf, pos, end};
    kx_header r;
    Py_ssize_t got = 0, scanned = 0;
    int framed = KX_NONE;
    uint32_t stored = 0;  /* the CRC of the batch whose check failed */
    while (got < cap && scanned < max_bytes) {
        framed = kx_frame_next(&w, &r, verify);
        if (framed == KX_BAD_CRC)
            stored = kx_crc(&r);
        if (framed != KX_FRAMED)
            break;
        kx_put_columns(c, cap, got++, &r);
        scanned += r.size;
    }
    PyBuffer_Release(&view);
    if (got < cap) {  /* the columns moved together: column k at k * got */
        for (int k = 1; k < KX_N_COLUMNS; k++)
            memmove(c + (Py_ssize_t)k * got, c + (Py_ssize_t)k * cap, sizeof(int64_t) * (size_t)got);
        if (PyByteArray_Resize(cols, (Py_ssize_t)sizeof(int64_t) * KX_N_COLUMNS * got) < 0) {
            Py_DECREF(cols);
            return NULL;
        }
    }
    PyObject *bad = framed == KX_BAD_CRC ? PyLong_FromUnsignedLong(stored) : Py_NewRef(Py_None);
    if (bad == NULL) {
        Py_DECREF(cols);
        return NULL;
    }
    return Py_BuildValue("(NnnN)", cols, got, w.pos, bad);
}

static PyMethodDef batch_methods[] = {
    {"setup", (PyCFunction)sp_setup, METH_VARARGS, "setup(Record, BatchHeader): resolve slot offsets"},
    {"decode_records", (PyCFunction)(void (*)(void))sp_decode_records, METH_FASTCALL,
     "decode_records(buf, start, end, p, rec, count, base_offset, base_ts, append_ts, limit)"},
    {"scan_headers", (PyCFunction)(void (*)(void))sp_scan_headers, METH_FASTCALL,
     "scan_headers(buf, pos, end, verify_crc, max_count, max_bytes); max_count -1: the last header only"},
    {"frame_columns", (PyCFunction)(void (*)(void))sp_frame_columns, METH_FASTCALL,
     "frame_columns(buf, pos, end, verify_crc, max_count, max_bytes) -> (columns, count, pos, bad_crc)"},
    {"crc32c", (PyCFunction)(void (*)(void))sp_crc32c, METH_FASTCALL, "crc32c(buf, start, end) -> int"},
    {NULL, NULL, 0, NULL}};

static int
batch_traverse(PyObject *m, visitproc visit, void *arg)
{
    batch_state *st = get_state(m);
    Py_VISIT(st->record.tp);
    Py_VISIT(st->header.tp);
    return 0;
}

static int
batch_clear(PyObject *m)
{
    batch_state *st = get_state(m);
    Py_CLEAR(st->record.tp);
    Py_CLEAR(st->header.tp);
    return 0;
}

static void
batch_free(void *m)
{
    batch_clear((PyObject *)m);
}

static int
batch_exec(PyObject *m)
{
    if (wire_exec(m) < 0 || wire_add_names(m, "FRAME_COLUMNS", kx_column_names, KX_N_COLUMNS) < 0)
        return -1;
    return wire_add_names(m, "RECORD_FIELDS", rec_names, N_REC);
}

static PyModuleDef_Slot batch_slots[] = {
    {Py_mod_exec, batch_exec},
#ifdef Py_mod_multiple_interpreters
    {Py_mod_multiple_interpreters, Py_MOD_PER_INTERPRETER_GIL_SUPPORTED},
#endif
    {0, NULL}};

static struct PyModuleDef batch_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "kafkatx.format._batch",
    .m_doc = "Compiled framing, records and CRC-32C for kafkatx.format.record_batch (optional; see _batch.c).",
    .m_size = sizeof(batch_state),
    .m_methods = batch_methods,
    .m_slots = batch_slots,
    .m_traverse = batch_traverse,
    .m_clear = batch_clear,
    .m_free = batch_free,
};

PyMODINIT_FUNC
PyInit__batch(void)
{
    return PyModuleDef_Init(&batch_module);
}
