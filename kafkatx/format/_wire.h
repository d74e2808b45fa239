/*
 * kafkatx/format/_wire.h -- the wire helpers every compiled module of kafkatx shares.
 *
 * kafkatx's C code is one compiled module per Python module it speeds up (as aiokafka keeps one
 * compiled module per Python module), each importable on its own:
 *
 *   kafkatx/format/_batch.c    framing, records, CRC-32C        (kafkatx/format/record_batch.py)
 *   kafkatx/format/_fold.c     the segment fold, bisect_many    (kafkatx/format/segment_fold.py)
 *   kafkatx/format/_txn_log.c  __transaction_state records      (kafkatx/format/txn_log.py)
 *   kafkatx/storage/_replay.c      the producer-state fold          (kafkatx/storage/producer_state.py)
 *   kafkatx/coordinator/_coordinator.c the __transaction_state load     (kafkatx/coordinator/state_manager.py)
 *   kafkatx/render/_dump.c     kafka-dump-log rendering         (kafkatx/render/kafka_dump.py)
 *
 * This header is the lowest layer of them (kafkatx.format: bytes on disk): big-endian reads,
 * zigzag varints, CRC-32C, and making instances of slotted classes. The magic-2 batch framing every
 * walker uses is _framer.h beside it (which includes this). A module includes these and nothing of
 * another module (but _txn_log.h beside them: the __transaction_state record decoder, static like
 * this, that coordinator/_coordinator.c decodes with);
 * none imports another (tests/test_architecture.py checks the sources). Everything here is static: each module gets
 * its own copy.
 *
 * The slotted-class trick (resolve_slots, new_slotted): a @dataclass(frozen=True, slots=True) (or a
 * plain __slots__ class, or a gc=False msgspec Struct) keeps every field in a slot, i.e. a
 * PyObject* at a fixed offset inside the instance, described by a member_descriptor on the class
 * (PyMemberDescrObject->d_member->offset). resolve_slots reads those offsets once (checking each is
 * an object slot defined on that very class, and that the class has exactly those slots, so no
 * slot can be left NULL); an instance is then tp_alloc(type, 0) -- what object.__new__ does,
 * zero-filled, GC-tracked, holding a reference to the heap type -- plus one pointer store per
 * field. That skips the frozen dataclass's __init__ (an object.__setattr__ per field) and gives an
 * ordinary instance of the very same class. It is the one speed trick of kafkatx outside plain
 * tuples, kept because it earns its place: calling the class instead costs
 * `dump-segment --deep-iteration --format json` 40% more CPU time on a 100 MB segment (a Record
 * per record; benchmarks/bench_tricks.py, docs/internals.md "Speed tricks, measured"). Every
 * instance compiled code makes goes through new_slotted (no module stores into a slot itself); the
 * Python twins call the class.
 *
 * Batch header (DefaultRecordBatch.java): see record_batch.py's docstring; read in _framer.h only.
 */
#ifndef KAFKATX_WIRE_H
#define KAFKATX_WIRE_H

#define WIRE_UNUSED __attribute__((unused))
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>

#if !defined(__SIZEOF_INT128__)
#error "kafkatx's compiled modules need a compiler with __int128 (the pure-Python path is used instead)"
#endif

typedef __int128 i128;
typedef unsigned __int128 u128;

/* ----------------------------------------------------------------- constants */

/* ----------------------------------------------------------------- shared constants
 *
 * Declared once here for every compiled module; each module exports them as attributes
 * (wire_add_constants) and tests/format/test_shared_constants.py holds every one to the Python
 * constant it mirrors (record_batch, control, segment_fold). */

/* DefaultRecordBatch's layout */
#define HEADER_SIZE 61          /* magic 2 batch header (record_batch.HEADER_SIZE) */
#define LOG_OVERHEAD 12         /* baseOffset + batchLength (record_batch.LOG_OVERHEAD) */
#define CRC_START 21            /* the CRC covers attributes onwards (record_batch._CRC_START) */
#define MIN_BATCH_LENGTH (HEADER_SIZE - LOG_OVERHEAD)
#define MAX_BATCH_SIZE (64 * 1024 * 1024)  /* record_batch.MAX_BATCH_SIZE */
#define MIN_RECORD 7            /* record_batch._MIN_RECORD */

/* The batch attributes (DefaultRecordBatch: COMPRESSION_CODEC_MASK, TIMESTAMP_TYPE_MASK,
 * TRANSACTIONAL_FLAG_MASK, CONTROL_FLAG_MASK, DELETE_HORIZON_FLAG_MASK) */
#define ATTR_CODEC_MASK 0x07
#define ATTR_TIMESTAMP_TYPE 0x08
#define ATTR_TRANSACTIONAL 0x10
#define ATTR_CONTROL 0x20
#define ATTR_DELETE_HORIZON 0x40

/* ControlRecordType (control.ControlType) the compiled code reads */
#define CONTROL_ABORT 0
#define CONTROL_COMMIT 1

/* fold_segment's crc_mode values beyond 0-2 (segment_fold.CRC_FAILS_ONLY, segment_fold.TABLE_ONLY) */
#define FOLD_CRC_FAILS_ONLY 3
#define FOLD_TABLE_ONLY 4

/* The error kinds decode_records reports, by index (record_batch._C_ERRORS: DecodeError, BadLength,
 * Truncated, BadVarint) */
enum { K_DECODE = 0, K_BADLENGTH = 1, K_TRUNCATED = 2, K_BADVARINT = 3 };

/* record_batch.BatchHeader's fields, in order (_framer.h's kx_new_header fills them) */
#define N_HDR 14
static const char *const hdr_names[N_HDR] WIRE_UNUSED = {
    "position", "base_offset", "batch_length", "partition_leader_epoch", "magic", "crc",
    "attributes", "last_offset_delta", "base_timestamp", "max_timestamp", "producer_id",
    "producer_epoch", "base_sequence", "records_count"};
#define SLOT(obj, off) (*(PyObject **)((char *)(obj) + (off)))

static inline int
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
/* ----------------------------------------------------------------- helpers */

/* A Python int from a 128-bit value (record offsets/timestamps that overflow int64:
 * Python ints do not, so neither may we). */
static inline PyObject *
long_from_i128(i128 v)
{
    if (v >= (i128)INT64_MIN && v <= (i128)INT64_MAX)
        return PyLong_FromLongLong((long long)v);
    /* public API only: (high 64 bits, signed) << 64 | (low 64 bits, unsigned); the low half has
     * no bit set at or above 64, so the OR is the sum */
    PyObject *hi = PyLong_FromLongLong((long long)(int64_t)(v >> 64));
    if (hi == NULL)
        return NULL;
    PyObject *shift = PyLong_FromLong(64), *shifted = NULL, *lo = NULL, *out = NULL;
    if (shift != NULL)
        shifted = PyNumber_Lshift(hi, shift);
    if (shifted != NULL)
        lo = PyLong_FromUnsignedLongLong((unsigned long long)(uint64_t)(u128)v);
    if (lo != NULL)
        out = PyNumber_Or(shifted, lo);
    Py_DECREF(hi);
    Py_XDECREF(shift);
    Py_XDECREF(shifted);
    Py_XDECREF(lo);
    return out;
}

static inline int
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
static inline int
read_zz(const uint8_t *d, Py_ssize_t n, Py_ssize_t start, int max_bytes, i128 *out, Py_ssize_t *next,
        int *why)
{
    if (start < n && d[start] < 0x80) { /* one byte (every length and count of a small record) */
        *out = (i128)(d[start] >> 1) ^ -(i128)(d[start] & 1);
        *next = start + 1;
        return 0;
    }
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

/* ----------------------------------------------------------------- CRC-32C */

/* Kafka checksums magic-2 batches with CRC-32C (Castagnoli, reflected polynomial
 * 0x82F63B78; Crc32C.java). x86-64 has it in hardware since SSE4.2 (the crc32
 * instruction computes exactly this polynomial), detected at import so the module
 * still runs on CPUs without it; everywhere else slicing-by-8 tables. */
/* Process-wide tables, not module state: written once by the first module's exec (wire_crc_init)
 * with the same values every time, read-only after. */
static uint32_t crc_table[8][256] WIRE_UNUSED;

static inline void
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

static inline uint32_t
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

/* The register after appending len zero bytes to the raw register c: eight bytes a step through the
 * slicing-by-8 tables (crc32c_sw's step with zero data), the rest one byte a step. */
static inline uint32_t
crc_append_zeros(uint32_t c, size_t len)
{
    for (; len >= 8; len -= 8)
        c = crc_table[7][c & 0xFF] ^ crc_table[6][(c >> 8) & 0xFF] ^ crc_table[5][(c >> 16) & 0xFF] ^
            crc_table[4][c >> 24];
    while (len--)
        c = (c >> 8) ^ crc_table[0][c & 0xFF];
    return c;
}

/* The tables of zeros(., len): the image of each register bit, combined per byte value. */
static inline void
crc_shift_init(crc_shift *sh, size_t len)
{
    uint32_t col[32];
    for (int i = 0; i < 32; i++)
        col[i] = crc_append_zeros(1u << i, len);
    for (int k = 0; k < 4; k++) {
        sh->t[k][0] = 0;
        for (uint32_t b = 1; b < 256; b++)  /* linear: b's image is its lowest bit's column ^ the rest's image */
            sh->t[k][b] = sh->t[k][b & (b - 1)] ^ col[8 * k + __builtin_ctz(b)];
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
static crc_shift crc_shift_long WIRE_UNUSED, crc_shift_short WIRE_UNUSED;

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

__attribute__((target("sse4.2"), unused)) static uint32_t
crc32c_hw(uint32_t crc, const uint8_t *p, size_t len)
{
    uint64_t c0 = ~crc;
    /* A short buffer (a small batch) in 8-byte steps from where it starts (unaligned loads cost x86
     * nothing; an alignment prologue would add up to 7 one-byte steps, each as slow as an 8-byte
     * one), the tail in 4, 2 and 1-byte steps. */
    if (len < 3 * CRC_SHORT) {
        for (; len >= 8; p += 8, len -= 8) {
            uint64_t v;
            memcpy(&v, p, 8);
            c0 = _mm_crc32_u64(c0, v);
        }
        uint32_t c = (uint32_t)c0;
        if (len & 4) {
            uint32_t v;
            memcpy(&v, p, 4);
            c = _mm_crc32_u32(c, v);
            p += 4;
        }
        if (len & 2) {
            uint16_t v;
            memcpy(&v, p, 2);
            c = _mm_crc32_u16(c, v);
            p += 2;
        }
        if (len & 1)
            c = _mm_crc32_u8(c, *p);
        return ~c;
    }
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

static uint32_t (*crc32c_impl)(uint32_t, const uint8_t *, size_t) WIRE_UNUSED = crc32c_sw;
/* ----------------------------------------------------------------- big-endian reads (_framer.h's) */

static inline int64_t be64(const uint8_t *p) {
    return (int64_t)((uint64_t)p[0] << 56 | (uint64_t)p[1] << 48 | (uint64_t)p[2] << 40 | (uint64_t)p[3] << 32 |
                     (uint64_t)p[4] << 24 | (uint64_t)p[5] << 16 | (uint64_t)p[6] << 8 | (uint64_t)p[7]);
}
static inline uint32_t be32u(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}
static inline int32_t be32(const uint8_t *p) { return (int32_t)be32u(p); }
static inline int16_t be16(const uint8_t *p) { return (int16_t)(uint16_t)((uint16_t)p[0] << 8 | p[1]); }

/* An instance of the slotted class tp with its n slots (at offs) set to v, made as setup()'s
 * comment says (tp_alloc + one store per slot). Takes the references in v (NULL entries: a
 * failed conversion, then every other value is released and NULL returned). */
static inline PyObject *
new_slotted(PyTypeObject *tp, const Py_ssize_t *offs, PyObject *const *v, int n)
{
    int failed = 0;
    for (int i = 0; i < n; i++)
        failed |= v[i] == NULL;
    PyObject *o = failed ? NULL : tp->tp_alloc(tp, 0);  /* never allocate with an exception set */
    for (int i = 0; i < n; i++) {
        if (o != NULL)
            SLOT(o, offs[i]) = v[i];
        else
            Py_XDECREF(v[i]);
    }
    return o;
}

/* v[i] = expr unless an earlier conversion for the same object failed (`failed` set): then NULL and
 * expr is not evaluated, so no C API call runs with an exception set; new_slotted (or the caller)
 * releases what was made. Every conversion of a row goes through it. */
#define WIRE_SET(v, i, failed, expr)              \
    do {                                          \
        (v)[i] = (failed) ? NULL : (expr);        \
        if ((v)[i] == NULL)                       \
            (failed) = 1;                         \
    } while (0)

/* A class whose instances compiled code makes directly (resolve_slots): the type (a strong reference,
 * held in a module's state; NULL until that module's setup) and its slot offsets. */
#define WIRE_MAX_SLOTS 24
typedef struct {
    PyTypeObject *tp;
    Py_ssize_t off[WIRE_MAX_SLOTS];
} wire_cls;

/* c = cls with the n slots named (checked as resolve_slots says); c is unchanged when it fails. */
static inline int
wire_cls_set(wire_cls *c, PyObject *cls, const char *const *names, int n)
{
    Py_ssize_t off[WIRE_MAX_SLOTS];
    if (n > WIRE_MAX_SLOTS) {
        PyErr_SetString(PyExc_SystemError, "too many slots");
        return -1;
    }
    if (resolve_slots(cls, names, n, off) < 0)
        return -1;
    Py_XSETREF(c->tp, (PyTypeObject *)Py_NewRef(cls));
    memcpy(c->off, off, sizeof(Py_ssize_t) * (size_t)n);
    return 0;
}

/* ----------------------------------------------------------------- arguments */

/* The one argument parser of every METH_FASTCALL function: exactly strlen(fmt) positional
 * arguments, each converted by its letter of fmt into the pointer(s) that follow, in order:
 *   O  PyObject **          the object itself (borrowed)
 *   n  Py_ssize_t *         an int (PyLong_AsSsize_t)
 *   L  int64_t *            an int (PyLong_AsLongLong)
 *   l  long *               an int (PyLong_AsLong)
 *   p  int *                its truth value (PyObject_IsTrue)
 *   z  int *, int64_t *     None (0) or an int (1, and its value)
 * Returns 0, or -1 with the exception of the first argument that does not convert (TypeError,
 * OverflowError: the callers' Python side falls back to Python where ints may pass int64).
 * Called as wire_args(name, args, nargs, fmt, &a, &b, ...): a macro over wire_parse, which is
 * always inlined with its format a literal, so the loop unrolls and each letter's switch folds
 * away (no cost over hand-written conversions on the per-batch calls). */
#define wire_args(fname, args, nargs, fmt, ...) \
    wire_parse((fname), (args), (nargs), (fmt), (void *const[]){__VA_ARGS__})

static inline __attribute__((always_inline)) int
wire_parse(const char *fname, PyObject *const *args, Py_ssize_t nargs, const char *fmt, void *const *out)
{
    const Py_ssize_t want = (Py_ssize_t)__builtin_strlen(fmt);
    if (nargs != want) {
        PyErr_Format(PyExc_TypeError, "%s() takes %zd arguments (%zd given)", fname, want, nargs);
        return -1;
    }
    int j = 0;
#pragma GCC unroll 16
    for (Py_ssize_t i = 0; i < want; i++) {
        PyObject *a = args[i];
        switch (fmt[i]) {
        case 'O':
            *(PyObject **)out[j++] = a;
            break;
        case 'n': {
            Py_ssize_t v = PyLong_AsSsize_t(a);
            *(Py_ssize_t *)out[j++] = v;
            if (v == -1 && PyErr_Occurred())
                return -1;
            break;
        }
        case 'L': {
            long long v = PyLong_AsLongLong(a);
            *(int64_t *)out[j++] = (int64_t)v;
            if (v == -1 && PyErr_Occurred())
                return -1;
            break;
        }
        case 'l': {
            long v = PyLong_AsLong(a);
            *(long *)out[j++] = v;
            if (v == -1 && PyErr_Occurred())
                return -1;
            break;
        }
        case 'p': {
            int v = PyObject_IsTrue(a);
            *(int *)out[j++] = v;
            if (v < 0)
                return -1;
            break;
        }
        case 'z': {
            int *has = (int *)out[j++];
            int64_t *value = (int64_t *)out[j++];
            *has = a != Py_None;
            *value = 0;
            if (*has) {
                long long v = PyLong_AsLongLong(a);
                *value = (int64_t)v;
                if (v == -1 && PyErr_Occurred())
                    return -1;
            }
            break;
        }
        default:
            PyErr_Format(PyExc_SystemError, "%s(): bad argument format %s", fname, fmt);
            return -1;
        }
    }
    return 0;
}
/* The CRC-32C tables, and the hardware path where the CPU has it; every module calls this from its
 * init (the tables are the same every time: computed once per process). Returns 1 with the
 * hardware path. */
static inline int
wire_crc_init(void)
{
    static int ready = 0;
    int hw = 0;
    if (!ready) {
        crc_init_tables();
        crc_shift_init(&crc_shift_long, CRC_LONG);
        crc_shift_init(&crc_shift_short, CRC_SHORT);
        ready = 1;
    }
#ifdef HAVE_HW_CRC
    __builtin_cpu_init();
    if (__builtin_cpu_supports("sse4.2")) {
        crc32c_impl = crc32c_hw;
        hw = 1;
    }
#endif
    return hw;
}

/* names[0:n] as a tuple of str (a field list exported as a module attribute) */
static inline PyObject *
wire_names(const char *const *names, int n)
{
    PyObject *t = PyTuple_New(n);
    for (int i = 0; t != NULL && i < n; i++) {
        PyObject *u = PyUnicode_FromString(names[i]);
        if (u == NULL)
            Py_CLEAR(t);
        else
            PyTuple_SET_ITEM(t, i, u);
    }
    return t;
}

/* Adds the tuple names[0:n] to m as `attr` (0, or -1 with an exception). */
static inline int
wire_add_names(PyObject *m, const char *attr, const char *const *names, int n)
{
    PyObject *t = wire_names(names, n);
    if (t == NULL)
        return -1;
    int rc = PyModule_AddObjectRef(m, attr, t);
    Py_DECREF(t);
    return rc;
}

/* The shared constants above as attributes of module m. */
static inline int
wire_add_constants(PyObject *m)
{
    static const struct {
        const char *name;
        long value;
    } ints[] = {
        {"HEADER_SIZE", HEADER_SIZE}, {"LOG_OVERHEAD", LOG_OVERHEAD}, {"CRC_START", CRC_START},
        {"MAX_BATCH_SIZE", MAX_BATCH_SIZE}, {"MIN_RECORD", MIN_RECORD},
        {"ATTR_CODEC_MASK", ATTR_CODEC_MASK}, {"ATTR_TIMESTAMP_TYPE", ATTR_TIMESTAMP_TYPE},
        {"ATTR_TRANSACTIONAL", ATTR_TRANSACTIONAL}, {"ATTR_CONTROL", ATTR_CONTROL},
        {"ATTR_DELETE_HORIZON", ATTR_DELETE_HORIZON},
        {"CONTROL_ABORT", CONTROL_ABORT}, {"CONTROL_COMMIT", CONTROL_COMMIT},
        {"FOLD_CRC_FAILS_ONLY", FOLD_CRC_FAILS_ONLY}, {"FOLD_TABLE_ONLY", FOLD_TABLE_ONLY},
        {"K_DECODE", K_DECODE}, {"K_BADLENGTH", K_BADLENGTH}, {"K_TRUNCATED", K_TRUNCATED},
        {"K_BADVARINT", K_BADVARINT},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (PyModule_AddIntConstant(m, ints[i].name, ints[i].value) < 0)
            return -1;
    return wire_add_names(m, "BATCH_HEADER_FIELDS", hdr_names, N_HDR);
}

/* What every module's Py_mod_exec does first: the CRC-32C tables (HW_CRC32C: 1 with the SSE4.2
 * path) and the shared constants as module attributes (tests/format/test_shared_constants.py
 * holds each to its Python twin). */
static inline int
wire_exec(PyObject *m)
{
    int hw = wire_crc_init();
    if (PyModule_AddIntConstant(m, "HW_CRC32C", hw) < 0)
        return -1;
    return wire_add_constants(m);
}

#endif /* KAFKATX_WIRE_H */
