/*
 * kafkatx/format/_framer.h -- the one compiled framer of magic-2 batches.
 *
 * Every compiled walker of a segment (_batch.c scan_headers, _fold.c fold_segment / crc_clean_walk,
 * storage/_replay.c ProducerStateFold.fold, render/_dump.c render_batches, coordinator/_coordinator.c
 * txn_fold, and _batch.c frame_columns, the chunked form) takes its batches from kx_frame_next (or its
 * two halves, kx_frame_here and kx_take) and reads their header fields through the row it fills and the
 * row's accessors, never from the bytes: the header layout (DefaultRecordBatch's *_OFFSET constants) is
 * written here only. The Python reference is record_batch.frame_batch (the same rule; the row is its
 * BatchHeader, whose fields and properties are the accessors'), which read_batch_header and iter_batches
 * frame with; tests/format/test_framer.py holds the two to each other over random and corrupt segments.
 *
 * The framing rule is Kafka's FileLogInputStream.nextBatch (a length field, the whole batch present)
 * with DefaultRecordBatch's bounds on the length (RECORD_BATCH_OVERHEAD .. the largest batch kafkatx
 * reads) and LogSegment.recover's ensureOffsetInRange(batch.lastOffset()) (the last offset inside
 * int64). What the compiled framer does not take -- magic 0/1, a length out of bounds, a batch running
 * past the end, a last offset outside int64 -- is KX_NONE, and the walker's Python side frames those
 * bytes with read_batch_header, which says what is wrong (or reads the legacy batch).
 *
 * Each walker keeps its own stop rules (a stop offset, a byte budget, its CRC policy, the Python
 * fallback for a batch it cannot take), decided on the row.
 */
#ifndef KAFKATX_FRAMER_H
#define KAFKATX_FRAMER_H

#include "_wire.h"

/* DefaultRecordBatch's field offsets (BASE_OFFSET_OFFSET, LENGTH_OFFSET, ...): read here and nowhere else */
#define KX_BASE_OFFSET 0
#define KX_LENGTH 8
#define KX_LEADER_EPOCH 12
#define KX_MAGIC 16
#define KX_CRC 17
#define KX_ATTRIBUTES 21
#define KX_LAST_OFFSET_DELTA 23
#define KX_BASE_TIMESTAMP 27
#define KX_MAX_TIMESTAMP 35
#define KX_PRODUCER_ID 43
#define KX_PRODUCER_EPOCH 51
#define KX_BASE_SEQUENCE 53
#define KX_RECORDS_COUNT 57

/* One framed magic-2 batch (DefaultFileChannelRecordBatch: where it is, how big, its offsets), and its
 * other header fields through the accessors below (DefaultRecordBatch's producerId(), isControlBatch(),
 * ...: each reads its field from the batch's bytes when asked, so a walker reads only the fields it looks
 * at -- a row filled whole costs every walker ~40 instructions a batch, 5% of `lag` on a segment of small
 * batches). */
typedef struct {
    const uint8_t *bytes;            /* the batch's first byte; its records section at bytes + HEADER_SIZE */
    Py_ssize_t position;             /* its position in the buffer walked */
    Py_ssize_t size;                 /* batch_length + LOG_OVERHEAD (sizeInBytes) */
    int64_t base_offset;             /* baseOffset() */
    int64_t last_offset;             /* lastOffset(): base_offset + last_offset_delta (inside int64: checked) */
    int32_t batch_length;
    int32_t last_offset_delta;
} kx_header;

/* The row of the magic-2 batch at h (buffer position pos; left: the bytes from h to the end of what is
 * read): 1, or 0 when the bytes there are not a whole magic-2 batch by the rules above (r then undefined). */
static inline __attribute__((always_inline)) int
kx_frame(const uint8_t *h, Py_ssize_t left, Py_ssize_t pos, kx_header *r)
{
    if (left < HEADER_SIZE || h[KX_MAGIC] != 2)
        return 0;
    int32_t length = be32(h + KX_LENGTH);
    if (length < MIN_BATCH_LENGTH || length > MAX_BATCH_SIZE || (Py_ssize_t)length + LOG_OVERHEAD > left)
        return 0;
    int64_t base = be64(h + KX_BASE_OFFSET);
    int32_t delta = be32(h + KX_LAST_OFFSET_DELTA);
    /* record_batch.last_offset_overflows: the Python path raises the DecodeError */
    if (__builtin_add_overflow(base, (int64_t)delta, &r->last_offset))
        return 0;
    r->bytes = h;
    r->position = pos;
    r->size = (Py_ssize_t)length + LOG_OVERHEAD;
    r->base_offset = base;
    r->batch_length = length;
    r->last_offset_delta = delta;
    return 1;
}

/* DefaultRecordBatch's header accessors of a framed row (BatchHeader's other fields, and the flags
 * derived from its attributes). */
#define KX_ACCESSOR(type, name, expr)                                            \
    static inline __attribute__((always_inline)) type name(const kx_header *r) \
    {                                                                            \
        return (expr);                                                           \
    }
KX_ACCESSOR(int, kx_magic, r->bytes[KX_MAGIC])
KX_ACCESSOR(int32_t, kx_partition_leader_epoch, be32(r->bytes + KX_LEADER_EPOCH))
KX_ACCESSOR(uint32_t, kx_crc, be32u(r->bytes + KX_CRC))
KX_ACCESSOR(int16_t, kx_attributes, be16(r->bytes + KX_ATTRIBUTES))
KX_ACCESSOR(int64_t, kx_base_timestamp, be64(r->bytes + KX_BASE_TIMESTAMP))
KX_ACCESSOR(int64_t, kx_max_timestamp, be64(r->bytes + KX_MAX_TIMESTAMP))
KX_ACCESSOR(int64_t, kx_producer_id, be64(r->bytes + KX_PRODUCER_ID))
KX_ACCESSOR(int16_t, kx_producer_epoch, be16(r->bytes + KX_PRODUCER_EPOCH))
KX_ACCESSOR(int32_t, kx_base_sequence, be32(r->bytes + KX_BASE_SEQUENCE))
KX_ACCESSOR(int32_t, kx_records_count, be32(r->bytes + KX_RECORDS_COUNT))
KX_ACCESSOR(int, kx_codec, kx_attributes(r) & ATTR_CODEC_MASK)                  /* compressionType().id */
KX_ACCESSOR(int, kx_control, (kx_attributes(r) & ATTR_CONTROL) != 0)            /* isControlBatch() */
KX_ACCESSOR(int, kx_transactional, (kx_attributes(r) & ATTR_TRANSACTIONAL) != 0) /* isTransactional() */
#undef KX_ACCESSOR

/* DefaultRecordBatch.incrementSequence(int, int) in Java int arithmetic (record_batch.increment_sequence,
 * the reference; lastSequence() is it of the base sequence and lastOffsetDelta, DefaultRecord's sequence of
 * the base sequence and the record's offset delta). Past Integer.MAX_VALUE - inc a sequence goes on from 0,
 * i.e. 2^31 further; that bound and the sum wrap modulo 2^32 as Java's ints do, so a crafted negative
 * increment or base sequence gives Java's value, never one outside int32. Computed in unsigned ints (whose
 * wrap is defined in C); int64 arguments, as the reference takes any ints of a hand-made BatchHeader. */
static inline int32_t
kx_increment_sequence(int64_t seq, int64_t inc)
{
    const int32_t bound = (int32_t)(uint32_t)((uint64_t)INT32_MAX - (uint64_t)inc);
    uint32_t sum = (uint32_t)((uint64_t)seq + (uint64_t)inc);
    if (seq > bound)
        sum += UINT32_C(0x80000000);
    return (int32_t)sum;
}

/* (Every function taking a row is inlined: a row whose address reached a call could not be kept in
 * registers.)
 *
 * Whether the framed batch holds its CRC: the CRC-32C of its bytes from the attributes on equals the
 * stored one (DefaultRecordBatch.isValid; record_batch.crc_valid). */
static inline __attribute__((always_inline)) int
kx_crc_holds(const kx_header *r)
{
    return crc32c_impl(0, r->bytes + CRC_START, (size_t)(r->size - CRC_START)) == kx_crc(r);
}

/* A walk over buf[pos:end] (FileLogInputStream's position and end). */
typedef struct {
    const uint8_t *buf;
    Py_ssize_t pos, end;
} kx_walk;

enum {
    KX_NONE = 0,      /* no whole magic-2 batch at w->pos (or w->pos >= w->end); w->pos unchanged */
    KX_FRAMED = 1,    /* r filled (kx_frame_next: w->pos at the next batch) */
    KX_BAD_CRC = 2,   /* r filled, its CRC checked and failing; w->pos unchanged (at that batch) */
};

/* The batch at w->pos framed into r, the walk not moved: for a walker whose stop rules look at the
 * row before it takes the batch (kx_take), or stops at it (w->pos still there). */
static inline __attribute__((always_inline)) int
kx_frame_here(const kx_walk *w, kx_header *r)
{
    return w->pos < w->end && kx_frame(w->buf + w->pos, w->end - w->pos, w->pos, r) ? KX_FRAMED : KX_NONE;
}

/* The walk moved past the batch r (framed at w->pos). */
static inline __attribute__((always_inline)) void
kx_take(kx_walk *w, const kx_header *r)
{
    w->pos = r->position + r->size;
}

/* The one walker step: frames the batch at w->pos into r (its CRC checked when check_crc) and moves
 * past it. */
static inline __attribute__((always_inline)) int
kx_frame_next(kx_walk *w, kx_header *r, int check_crc)
{
    if (kx_frame_here(w, r) == KX_NONE)
        return KX_NONE;
    if (check_crc && !kx_crc_holds(r))
        return KX_BAD_CRC;
    kx_take(w, r);
    return KX_FRAMED;
}

/* The chunked form: rows as struct-of-arrays, one int64 column per field, in this order
 * (record_batch.FRAME_COLUMNS; _batch.frame_columns hands them to Python). */
#define KX_N_COLUMNS 19
static const char *const kx_column_names[KX_N_COLUMNS] WIRE_UNUSED = {
    "position", "size", "base_offset", "last_offset", "batch_length", "partition_leader_epoch", "magic", "crc",
    "attributes", "last_offset_delta", "base_timestamp", "max_timestamp", "producer_id", "producer_epoch",
    "base_sequence", "records_count", "codec", "control", "transactional"};

/* Row r stored as row i of the columns cols (column k at cols + k * cap). */
static inline __attribute__((always_inline)) void
kx_put_columns(int64_t *cols, Py_ssize_t cap, Py_ssize_t i, const kx_header *r)
{
    const int64_t v[KX_N_COLUMNS] = {
        (int64_t)r->position, (int64_t)r->size, r->base_offset, r->last_offset, r->batch_length,
        kx_partition_leader_epoch(r), kx_magic(r), (int64_t)kx_crc(r), kx_attributes(r), r->last_offset_delta,
        kx_base_timestamp(r), kx_max_timestamp(r), kx_producer_id(r), kx_producer_epoch(r), kx_base_sequence(r),
        kx_records_count(r), kx_codec(r), kx_control(r), kx_transactional(r)};
    for (int k = 0; k < KX_N_COLUMNS; k++)
        cols[(Py_ssize_t)k * cap + i] = v[k];
}

/* A BatchHeader (class c, slots in hdr_names' order) of the framed row r: 14 ints, each conversion
 * checked (new_slotted releases the others on a failure). */
static inline __attribute__((always_inline)) PyObject *
kx_new_header(const wire_cls *c, const kx_header *r)
{
    const int64_t raw[N_HDR] = {
        (int64_t)r->position, r->base_offset, r->batch_length, kx_partition_leader_epoch(r), kx_magic(r),
        (int64_t)kx_crc(r), kx_attributes(r), r->last_offset_delta, kx_base_timestamp(r), kx_max_timestamp(r),
        kx_producer_id(r), kx_producer_epoch(r), kx_base_sequence(r), kx_records_count(r)};
    PyObject *v[N_HDR];
    int failed = 0;
    for (int i = 0; i < N_HDR; i++)
        WIRE_SET(v, i, failed, PyLong_FromLongLong(raw[i]));
    return new_slotted(c->tp, c->off, v, N_HDR);
}

/* The control record of the uncompressed control batch r: 1 with *type and *epoch (-1: none, for
 * types other than ABORT/COMMIT) when its first record has the plain layout Kafka writes
 * (EndTransactionMarker: key version >= 0, 4+ byte key; ABORT/COMMIT: 6+ byte value with version >= 0;
 * no headers; the record inside the batch); 0 otherwise: then the caller asks
 * record_batch.read_control_record, which reports whatever is unusual exactly. */
static inline __attribute__((always_inline)) int
parse_control(const kx_header *r, int *type, int64_t *epoch)
{
    if (kx_codec(r) != 0 || kx_records_count(r) < 1)
        return 0;
    const uint8_t *d = r->bytes + HEADER_SIZE;
    Py_ssize_t n = r->size - HEADER_SIZE, p = 0, q;
    {
        /* Kafka's own markers (EndTransactionMarker): every varint of the record one byte. Read so
         * when every check below holds; anything else (a longer varint included) goes the general
         * way, which gives the same answer for these bytes. */
#define ZZ1(b) ((Py_ssize_t)((b) >> 1) ^ -(Py_ssize_t)((b) & 1))
        Py_ssize_t len1 = n >= 1 && d[0] < 0x80 ? ZZ1(d[0]) : -1;
        Py_ssize_t end1 = 1 + len1;
        /* length, attributes, timestamp delta, offset delta, key length: bytes 0..4 */
        if (len1 >= MIN_RECORD - 1 && end1 <= n && end1 > 5 && d[2] < 0x80 && d[3] < 0x80 && d[4] < 0x80) {
            Py_ssize_t kl = ZZ1(d[4]), at = 5 + kl;
            if (kl >= 4 && at < end1 && d[at] < 0x80) {
                Py_ssize_t vl = ZZ1(d[at]), vat = at + 1, hat = vat + (vl < 0 ? 0 : vl);
                if (vl >= -1 && hat < end1 && d[hat] == 0 && hat + 1 == end1 && be16(d + 5) >= 0) {
                    int t1 = be16(d + 7);
                    if (t1 != 0 && t1 != 1) {
                        *type = t1;
                        *epoch = -1;
                        return 1;
                    }
                    if (vl >= 6 && be16(d + vat) >= 0) {
                        *type = t1;
                        *epoch = be32(d + vat + 2);
                        return 1;
                    }
                }
            }
        }
#undef ZZ1
    }
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

#endif /* KAFKATX_FRAMER_H */
