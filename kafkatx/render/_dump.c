/*
 * kafkatx.render._dump -- the compiled kafka-dump-log rendering of kafkatx/render/kafka_dump.py.
 *
 *   render_setup(BatchRow, RecordRow, HeaderRow, UNSET) -> None
 *   render_batches(buf, pos, end, text, flags, start_offset, end_offset, max_bytes) -> (bytes | rows, pos, stop)
 *   render_batch(buf, pos, data, text, flags) -> bytes | BatchRow | None
 *
 * Render layer: it includes the format layer's wire helpers (kafkatx/format/_wire.h) and imports
 * no other compiled module.
 */
#include "../format/_framer.h"

/* ----------------------------------------------------------------- render_batches */

/* dump-segment's batches from pos, for the consecutive clean magic-2 batches there
 * (kafkatx.render.kafka_dump.render_batches is the Python side; kafkatx/render/dump.py's per-batch
 * loop is the reference and handles everything this stops at), in one of two outputs:
 *   text:  kafka-dump-log.sh's lines, written straight to bytes;
 *   jsonl: the row objects dump.py's dicts stand for, as instances of the msgspec Struct classes
 *          given to render_setup (kafkatx.render.rows): the batch row with its fields in
 *          the dicts' key order, records and headers nested. No JSON is written here: msgspec
 *          serialises them (kafkatx.render.rows.encode_lines).
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
    if (attr & ATTR_TIMESTAMP_TYPE)
        OB_LIT(o, " LogAppendTime: ");
    else
        OB_LIT(o, " CreateTime: ");
}

/* The jsonl row classes (render_setup: kafkatx.render.rows.BatchRow, RecordRow, HeaderRow, with
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

typedef wire_cls row_cls;  /* tp NULL until render_setup */

/* The module's state (PEP 489 multi-phase init: one per module object, no mutable static): the row
 * classes render_setup() registered and the strs the rows share. */
typedef struct {
    row_cls batch_row, record_row, header_row;
    PyObject *row_unset;  /* msgspec.UNSET: a field left out of the JSON (records when not deep) */
    PyObject *codec_str[5], *control_str[7];
} dump_state;

static inline dump_state *
get_state(PyObject *module)
{
    return (dump_state *)PyModule_GetState(module);
}

static int
setup_row(row_cls *rc, PyObject *cls, const char *const *names, int n)
{
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
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "render_setup() needs classes");
        return -1;
    }
    PyTypeObject *tp = (PyTypeObject *)cls;
    if ((tp->tp_flags & Py_TPFLAGS_HAVE_GC) || tp->tp_basicsize != (Py_ssize_t)(sizeof(PyObject) + n * sizeof(PyObject *))) {
        PyErr_Format(PyExc_TypeError, "render_setup(): %R holds more than its fields (or is tracked by gc)", cls);
        return -1;
    }
    return wire_cls_set(rc, cls, names, n);
}

static PyObject *
sp_render_setup(PyObject *self, PyObject *args)
{
    PyObject *b, *r, *h, *unset;
    if (!PyArg_ParseTuple(args, "OOOO:render_setup", &b, &r, &h, &unset))
        return NULL;
    dump_state *st = get_state(self);
    Py_CLEAR(st->batch_row.tp);  /* a failed setup leaves render_batches refusing jsonl */
    if (setup_row(&st->header_row, h, hrow_names, N_HROW) < 0 || setup_row(&st->record_row, r, rrow_names, N_RROW) < 0
        || setup_row(&st->batch_row, b, brow_names, N_BROW) < 0) {
        Py_CLEAR(st->batch_row.tp);
        return NULL;
    }
    Py_XSETREF(st->row_unset, Py_NewRef(unset));
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
    const dump_state *st;  /* the module's row classes and strs */
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

/* The bytes of a key, value or header printed at most (kafka_dump.PRINT_BOUND): a record with a
 * longer one is left to the Python path, which prints it cut with its length. */
#define PRINT_BOUND ((Py_ssize_t)1 << 20)

static int
over_print_bound(Py_ssize_t klen, Py_ssize_t vlen, const hdr_t *hd, Py_ssize_t hc, int values)
{
    if (values && (klen > PRINT_BOUND || vlen > PRINT_BOUND))
        return 1;
    for (Py_ssize_t k = 0; k < hc; k++)
        if (hd[k].klen > PRINT_BOUND || (values && hd[k].vlen > PRINT_BOUND))
            return 1;
    return 0;
}

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
        PyObject *row = new_row(&s->st->header_row, v, N_HROW);
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

/* The records of one batch (framed row bh; records section d[0:n], decompressed if need be): text record
 * lines into s->o, or (*recs != NULL on return) a tuple of RecordRow. The one record walker of both
 * outputs. 1 when rendered, 0 when the Python path must take the batch (the output is then left as
 * it was), -1 on a Python error. */
static int
render_records(sink *s, PyObject **recs, const kx_header *bh, const uint8_t *d, Py_ssize_t n, int flags, int control,
               int ctype, int64_t cepoch)
{
    obuf *o = &s->o;
    const int text = s->rows == NULL;
    const Py_ssize_t mark = o->len;
    const int32_t count = kx_records_count(bh);
    const int16_t attr = kx_attributes(bh);
    const int64_t base = bh->base_offset, base_ts = kx_base_timestamp(bh), max_ts = kx_max_timestamp(bh);
    const int32_t bseq = kx_base_sequence(bh);
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
        /* rows carry keys and values; text prints them with RF_PRINT_DATA (header keys always) */
        if (over_print_bound(klen, vlen, hd, hc, !text || ((flags & RF_PRINT_DATA) && !control)))
            goto python;
        i128 offset = (i128)base + off_delta;
        i128 ts = (attr & ATTR_TIMESTAMP_TYPE) ? (i128)max_ts : (i128)base_ts + ts_delta;
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
            int failed = 0;
            WIRE_SET(v, 0, failed, long_from_i128(offset));
            WIRE_SET(v, 1, failed, ms_obj(ts));
            WIRE_SET(v, 2, failed, payload_obj(key, klen, b64));
            WIRE_SET(v, 3, failed, payload_obj(val, vlen, b64));
            PyObject *row = new_row(&s->st->record_row, v, N_RROW);
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
        if (ob_reserve(o, 4 * ((flags & RF_PRINT_DATA) ? rec_len : rec_len - klen - vlen) + 512) < 0)
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
        /* DefaultRecord.readFrom: NO_SEQUENCE under a negative base sequence (kafka_dump.record_sequence) */
        ob_int(o, bseq < 0 ? -1 : kx_increment_sequence(bseq, off_delta));
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

/* The row (jsonl) or lines (text) of the framed magic-2 batch hd (its size and buffer position in the row)
 * whose records section is d[0:n]; checks done by the caller (CRC, control record). 1 when
 * rendered, 0 when its records need the Python path (output left as it was), -1 on a Python error. */
static int
render_one(sink *s, const kx_header *hd, const uint8_t *d, Py_ssize_t n, int flags,
           int control, int ctype, int64_t cepoch)
{
    obuf *o = &s->o;
    const int deep = (flags & RF_DEEP) != 0, verify = (flags & RF_VERIFY) != 0;
    const Py_ssize_t pos = hd->position, size = hd->size;
    const int64_t base = hd->base_offset;
    const int32_t lod = hd->last_offset_delta;
    const i128 last = hd->last_offset;
    const uint32_t crc = kx_crc(hd);
    const int16_t attr = kx_attributes(hd);
    const int codec = kx_codec(hd);
    const int64_t bts = kx_base_timestamp(hd), mts = kx_max_timestamp(hd), pid = kx_producer_id(hd);
    const int32_t ple = kx_partition_leader_epoch(hd), bseq = kx_base_sequence(hd), count = kx_records_count(hd);
    const int16_t pep = kx_producer_epoch(hd);
    const int64_t lseq = bseq == -1 ? -1 : kx_increment_sequence(bseq, lod); /* DefaultRecordBatch.lastSequence */
    const Py_ssize_t mark = o->len;
    if (s->rows != NULL) {
        /* dump.py _batch_dict (+ "records" when deep) */
        PyObject *recs = NULL;
        if (deep) {
            int r = render_records(s, &recs, hd, d, n, flags, control, ctype, cepoch);
            if (r <= 0)
                return r;
        }
        /* each conversion checked: after a failure none runs, new_row releases what was made */
        PyObject *v[N_BROW];
        int failed = 0;
        WIRE_SET(v, 0, failed, PyLong_FromLongLong(base));
        WIRE_SET(v, 1, failed, long_from_i128(last));
        WIRE_SET(v, 2, failed, same_int(s, 0, count));
        WIRE_SET(v, 3, failed, PyLong_FromSsize_t(pos));
        WIRE_SET(v, 4, failed, same_int(s, 1, size));
        WIRE_SET(v, 5, failed, PyLong_FromLong(2));
        WIRE_SET(v, 6, failed, PyLong_FromUnsignedLong(crc));
        WIRE_SET(v, 7, failed, Py_NewRef(verify ? Py_True : Py_None));
        WIRE_SET(v, 8, failed, Py_NewRef(s->st->codec_str[codec]));
        WIRE_SET(v, 9, failed, same_int(s, 2, ple));
        WIRE_SET(v, 10, failed, same_int(s, 3, pid));
        WIRE_SET(v, 11, failed, same_int(s, 4, pep));
        WIRE_SET(v, 12, failed, same_int(s, 5, bseq));
        WIRE_SET(v, 13, failed, same_int(s, 6, lseq));
        WIRE_SET(v, 14, failed, PyBool_FromLong(attr & ATTR_TRANSACTIONAL));
        WIRE_SET(v, 15, failed, PyBool_FromLong(control));
        if (!control) {
            WIRE_SET(v, 16, failed, Py_NewRef(Py_None));
            WIRE_SET(v, 17, failed, Py_NewRef(Py_None));
        }
        else {
            WIRE_SET(v, 16, failed, ctype >= 0 && ctype <= 6 ? Py_NewRef(s->st->control_str[ctype])
                                                             : PyUnicode_FromFormat("%d", ctype));
            WIRE_SET(v, 17, failed, ctype == CONTROL_ABORT || ctype == CONTROL_COMMIT ? PyLong_FromLongLong(cepoch)
                                                                                    : Py_NewRef(Py_None));
        }
        WIRE_SET(v, 18, failed, bts < 0 ? Py_NewRef(Py_None) : same_int(s, 7, bts));
        WIRE_SET(v, 19, failed, mts < 0 ? Py_NewRef(Py_None) : same_int(s, 8, mts));
        if (deep)
            v[20] = recs;  /* made above (deep: never NULL here) */
        else
            WIRE_SET(v, 20, failed, Py_NewRef(s->st->row_unset));
        PyObject *row = new_row(&s->st->batch_row, v, N_BROW);
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
    if (attr & ATTR_TRANSACTIONAL)
        OB_LIT(o, " isTransactional: true");
    else
        OB_LIT(o, " isTransactional: false");
    if (control)
        OB_LIT(o, " isControl: true");
    else
        OB_LIT(o, " isControl: false");
    if (attr & ATTR_DELETE_HORIZON) {
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
        int r = render_records(s, NULL, hd, d, n, flags, control, ctype, cepoch);
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
sink_init(sink *s, const dump_state *st, int text)
{
    memset(s, 0, sizeof *s);
    s->st = st;
    if (text)
        return 0;
    if (st->batch_row.tp == NULL) {
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
    PyObject *buf, *start_arg, *end_arg;
    Py_ssize_t pos, end, max_bytes;
    int text;
    long flags;
    if (wire_args("render_batches", args, nargs, "OnnplOOn", &buf, &pos, &end, &text, &flags, &start_arg, &end_arg,
                  &max_bytes) < 0)
        return NULL;
    int has_start, has_end;
    int64_t start_off = 0, end_off = 0;
    if (opt_offset(start_arg, &has_start, &start_off) < 0 || opt_offset(end_arg, &has_end, &end_off) < 0)
        return NULL;
    if (pos < 0 || end < pos) {
        PyErr_SetString(PyExc_ValueError, "range outside the buffer");
        return NULL;
    }
    sink s;
    if (sink_init(&s, get_state(self), text) < 0)
        return NULL;
    Py_buffer view;
    if (get_buffer(buf, &view, pos, end) < 0) {
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
    kx_walk w = {bufp, pos, end};
    kx_header hd;
    while (scanned < max_bytes && kx_frame_here(&w, &hd) == KX_FRAMED) {
        if (has_start && (i128)hd.last_offset < start_off) {  /* dump.py: skipped before any check */
            kx_take(&w, &hd);
            scanned += hd.size;
            continue;
        }
        if (has_end && (i128)hd.base_offset > end_off) {
            stop = 1;
            break;
        }
        if (verify && !kx_crc_holds(&hd))
            break;
        if (kx_codec(&hd) > 4 || (deep && kx_codec(&hd) != 0))
            break;
        int ctype = 0;
        int64_t cepoch = -1;
        /* read_control_record decodes the first record; a records count that cannot fit is its
         * error even then (record_batch._iter_v2), which parse_control does not look at */
        if (kx_control(&hd) && ((int64_t)kx_records_count(&hd) * MIN_RECORD > hd.size - HEADER_SIZE
                           || !parse_control(&hd, &ctype, &cepoch)))
            break;
        int r = render_one(&s, &hd, hd.bytes + HEADER_SIZE, hd.size - HEADER_SIZE, (int)flags, kx_control(&hd), ctype,
                           cepoch);
        if (r < 0) {
            PyBuffer_Release(&view);
            sink_clear(&s);
            return NULL;
        }
        if (r == 0)
            break;
        kx_take(&w, &hd);
        scanned += hd.size;
    }
    pos = w.pos;
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
    PyObject *buf, *data_arg;
    Py_ssize_t pos;
    int text;
    long flags;
    if (wire_args("render_batch", args, nargs, "OnOpl", &buf, &pos, &data_arg, &text, &flags) < 0)
        return NULL;
    Py_buffer view, dv;
    if (PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    kx_header hd;
    if (pos < 0 || pos > view.len || !kx_frame((const uint8_t *)view.buf + pos, view.len - pos, pos, &hd)) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "no complete magic 2 batch at pos");
        return NULL;
    }
    if (kx_control(&hd)) {  /* control batches: render_batches or the Python path */
        PyBuffer_Release(&view);
        Py_RETURN_NONE;
    }
    if (PyObject_GetBuffer(data_arg, &dv, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    sink s;
    if (sink_init(&s, get_state(self), text) < 0) {
        PyBuffer_Release(&dv);
        PyBuffer_Release(&view);
        return NULL;
    }
    int r = render_one(&s, &hd, (const uint8_t *)dv.buf, dv.len, (int)flags, 0, 0, -1);
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


static PyMethodDef dump_methods[] = {
    {"render_setup", (PyCFunction)sp_render_setup, METH_VARARGS,
     "render_setup(BatchRow, RecordRow, HeaderRow, UNSET): the classes of render_batches' jsonl rows"},
    {"render_batches", (PyCFunction)(void (*)(void))sp_render_batches, METH_FASTCALL,
     "render_batches(buf, pos, end, text, flags, start_offset, end_offset, max_bytes) -> (bytes | rows, pos, stop)"},
    {"render_batch", (PyCFunction)(void (*)(void))sp_render_batch, METH_FASTCALL,
     "render_batch(buf, pos, data, text, flags) -> bytes | BatchRow | None"},
    {NULL, NULL, 0, NULL}};

static int
dump_traverse(PyObject *m, visitproc visit, void *arg)
{
    dump_state *st = get_state(m);
    Py_VISIT(st->batch_row.tp);
    Py_VISIT(st->record_row.tp);
    Py_VISIT(st->header_row.tp);
    Py_VISIT(st->row_unset);
    return 0;
}

static int
dump_clear(PyObject *m)
{
    dump_state *st = get_state(m);
    Py_CLEAR(st->batch_row.tp);
    Py_CLEAR(st->record_row.tp);
    Py_CLEAR(st->header_row.tp);
    Py_CLEAR(st->row_unset);
    for (int i = 0; i < 5; i++)
        Py_CLEAR(st->codec_str[i]);
    for (int i = 0; i < 7; i++)
        Py_CLEAR(st->control_str[i]);
    return 0;
}

static void
dump_free(void *m)
{
    dump_clear((PyObject *)m);
}

/* The strs the rows share, the render layer's constants (render_batches' flags, kafka_dump's
 * RENDER_*) and the row field lists, beside the shared constants. */
static int
dump_exec(PyObject *m)
{
    dump_state *st = get_state(m);
    if (wire_exec(m) < 0)
        return -1;
    for (int i = 0; i < 5; i++)
        if ((st->codec_str[i] = PyUnicode_InternFromString(codec_names[i])) == NULL)
            return -1;
    for (int i = 0; i < 7; i++)
        if ((st->control_str[i] = PyUnicode_InternFromString(control_names[i])) == NULL)
            return -1;
    if (PyModule_AddIntConstant(m, "RENDER_DEEP", RF_DEEP) < 0 || PyModule_AddIntConstant(m, "RENDER_VERIFY", RF_VERIFY) < 0
        || PyModule_AddIntConstant(m, "RENDER_BASE64", RF_BASE64) < 0
        || PyModule_AddIntConstant(m, "RENDER_PRINT_DATA", RF_PRINT_DATA) < 0
        || PyModule_AddIntConstant(m, "PRINT_BOUND", (long)PRINT_BOUND) < 0
        || PyModule_AddIntConstant(m, "RENDER_RAW", RF_RAW) < 0)
        return -1;
    if (wire_add_names(m, "BATCH_ROW_FIELDS", brow_names, N_BROW) < 0
        || wire_add_names(m, "RECORD_ROW_FIELDS", rrow_names, N_RROW) < 0)
        return -1;
    return wire_add_names(m, "HEADER_ROW_FIELDS", hrow_names, N_HROW);
}

static PyModuleDef_Slot dump_slots[] = {
    {Py_mod_exec, dump_exec},
#ifdef Py_mod_multiple_interpreters
    {Py_mod_multiple_interpreters, Py_MOD_PER_INTERPRETER_GIL_SUPPORTED},
#endif
    {0, NULL}};

static struct PyModuleDef dump_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "kafkatx.render._dump",
    .m_doc = "Compiled kafka-dump-log rendering for kafkatx.render.kafka_dump (optional; see _dump.c).",
    .m_size = sizeof(dump_state),
    .m_methods = dump_methods,
    .m_slots = dump_slots,
    .m_traverse = dump_traverse,
    .m_clear = dump_clear,
    .m_free = dump_free,
};

PyMODINIT_FUNC
PyInit__dump(void)
{
    return PyModuleDef_Init(&dump_module);
}
