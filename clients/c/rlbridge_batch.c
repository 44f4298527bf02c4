/* Batches and columns of PROTOCOL.md section 16 in C: both forms of a batch decoded, values
 * packed stacked or listed, columns, and AGENT_BATCH_STEP's body. The BAD_FIELD texts follow the Python server's
 * (rlbridge/protocol/batch.py, rlbridge/protocol/instances.py,
 * rlbridge/experiment/net/bodies.py). */
#define _POSIX_C_SOURCE 200809L
#include "rlbridge_agent.h"
#include "rlbridge_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A shape as Python prints a list, "[2, 3]", so that the texts read as the Python server's. */
static const char *shape_text(const rlb_array *array, char *text, size_t size) {
    size_t used = (size_t)snprintf(text, size, "[");
    for (size_t d = 0; d < array->ndim && used < size; d++)
        used += (size_t)snprintf(text + used, size - used, "%s%llu", d ? ", " : "",
                                 (unsigned long long)array->shape[d]);
    if (used < size)
        snprintf(text + used, size - used, "]");
    return text;
}

/* What arrived where something else was due: "an array of 3 items", "-1", "str". */
static const char *item_text(const msgpack_object *o, char *text, size_t size) {
    int64_t number;
    if (o->type == MSGPACK_OBJECT_ARRAY)
        snprintf(text, size, "an array of %u items", o->via.array.size);
    else if (rlb_read_i64(o, &number))
        snprintf(text, size, "%lld", (long long)number);
    else
        snprintf(text, size, "%s", rlb_kind_name(o));
    return text;
}

static uint64_t read_le64(const uint8_t *bytes) {
    uint64_t value = 0;
    for (int i = 7; i >= 0; i--)
        value = value << 8 | bytes[i];
    return value;
}

static void write_le64(uint8_t *bytes, uint64_t value) {
    for (int i = 0; i < 8; i++, value >>= 8)
        bytes[i] = (uint8_t)value;
}

int64_t rlb_column_i64(const rlb_array *column, size_t i) {
    return (int64_t)read_le64(column->data + 8 * i);
}

double rlb_column_f64(const rlb_array *column, size_t i) {
    uint64_t bits = read_le64(column->data + 8 * i);
    double value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

int rlb_call_takes_observation(int call) {
    return call == RLB_CALL_STEP || call == RLB_CALL_START || call == RLB_CALL_END_START;
}

/* ---- columns ------------------------------------------------------------------------------ */

int rlb_decode_column(const msgpack_object *raw, const void *const *frames,
                      const size_t *frame_sizes, size_t n_frames, const char *dtype,
                      const char *name, int64_t count, rlb_array *out, char *error) {
    char shape[160];
    int code = rlb_decode_array(raw, frames, frame_sizes, n_frames, out, error);
    if (code != RLB_OK)
        return code;
    if (strcmp(out->dtype, dtype) != 0 || out->ndim != 1) {
        rlb_fail(error, "%s must be a one-dimensional %s array; got %s of shape %s", name, dtype,
             out->dtype, shape_text(out, shape, sizeof shape));
        return RLB_BAD_FIELD;
    }
    if (count >= 0 && out->shape[0] != (uint64_t)count) {
        rlb_fail(error, "%s must have %lld entries, one per instance; got %llu", name,
             (long long)count, (unsigned long long)out->shape[0]);
        return RLB_BAD_FIELD;
    }
    return RLB_OK;
}

/* ---- batches ------------------------------------------------------------------------------ */

/* One stacked part: an array of `count` rows (and of `dtype` unless NULL). */
static int stacked_part(const msgpack_object *raw, const void *const *frames,
                        const size_t *frame_sizes, size_t n_frames, const char *dtype,
                        int64_t count, const char *name, rlb_array *out, char *error) {
    char shape[160];
    int code = rlb_decode_array(raw, frames, frame_sizes, n_frames, out, error);
    if (code != RLB_OK)
        return code;
    if (dtype != NULL && strcmp(out->dtype, dtype) != 0) {
        rlb_fail(error, "%s must have dtype %s; got %s", name, dtype, out->dtype);
        return RLB_BAD_FIELD;
    }
    if (out->ndim == 0 || out->shape[0] != (uint64_t)count) {
        rlb_fail(error, "%s must have %lld rows (one per value); got shape %s", name,
             (long long)count, shape_text(out, shape, sizeof shape));
        return RLB_BAD_FIELD;
    }
    return RLB_OK;
}

static int decode_listed(const msgpack_object *values, const void *const *frames,
                         const size_t *frame_sizes, size_t n_frames, const char *name,
                         int64_t count, rlb_batch *out, char *error) {
    char got[64];
    if (values->type != MSGPACK_OBJECT_ARRAY || values->via.array.size != (uint64_t)count) {
        rlb_fail(error, "%s (listed) must hold %lld values; got %s", name, (long long)count,
             item_text(values, got, sizeof got));
        return RLB_BAD_FIELD;
    }
    out->listed = calloc((size_t)count + 1, sizeof *out->listed);
    for (size_t i = 0; i < (size_t)count; i++) {
        int code = rlb_decode_value(&values->via.array.ptr[i], frames, frame_sizes, n_frames,
                                    &out->listed[i], error);
        if (code != RLB_OK) {
            out->count = i;
            rlb_batch_free(out);
            return code;
        }
    }
    out->count = (size_t)count;
    return RLB_OK;
}

/* A checked stacked batch, kept as it arrived: its values are read one at a time by
 * rlb_batch_value, into one value whose buffers hold a row (so that no request makes the agent
 * hold every value's arrays at once). */
static void keep_stacked(size_t count, const rlb_array *ints, const rlb_array *doubles,
                         const msgpack_object *chars, rlb_array *arrays, size_t n_arrays,
                         rlb_batch *out) {
    out->count = count;
    out->stacked = 1;
    out->ints = *ints;
    out->doubles = *doubles;
    out->chars = chars;
    out->arrays = arrays;
    out->n_arrays = n_arrays;
    /* With no values a row may claim any width: allocate rows only for values that exist. */
    size_t k_ints = count ? ints->shape[1] : 0, k_doubles = count ? doubles->shape[1] : 0;
    out->row.ints = calloc(k_ints + 1, sizeof *out->row.ints);
    out->row.n_ints = k_ints;
    out->row.doubles = calloc(k_doubles + 1, sizeof *out->row.doubles);
    out->row.n_doubles = k_doubles;
    out->row.arrays = calloc(n_arrays + 1, sizeof *out->row.arrays);
    out->row.n_arrays = n_arrays;
}

const rlb_value *rlb_batch_value(rlb_batch *batch, size_t i) {
    if (!batch->stacked)
        return &batch->listed[i];
    rlb_value *row = &batch->row;
    for (size_t j = 0; j < row->n_ints; j++)
        row->ints[j] = rlb_column_i64(&batch->ints, i * row->n_ints + j);
    for (size_t j = 0; j < row->n_doubles; j++)
        row->doubles[j] = rlb_column_f64(&batch->doubles, i * row->n_doubles + j);
    row->chars = batch->chars->via.array.ptr[i].via.str.ptr;
    row->n_chars = batch->chars->via.array.ptr[i].via.str.size;
    for (size_t p = 0; p < row->n_arrays; p++) {
        const rlb_array *stacked = &batch->arrays[p];
        rlb_array *array = &row->arrays[p];
        size_t row_bytes = stacked->nbytes / batch->count;
        memcpy(array->dtype, stacked->dtype, sizeof array->dtype);
        array->ndim = stacked->ndim - 1;
        memcpy(array->shape, stacked->shape + 1, array->ndim * sizeof array->shape[0]);
        array->data = stacked->data + i * row_bytes;
        array->nbytes = row_bytes;
    }
    return row;
}

int rlb_decode_batch(const msgpack_object *raw, const void *const *frames,
                     const size_t *frame_sizes, size_t n_frames, const char *name,
                     rlb_batch *out, char *error) {
    char got[64], part[128], shape[160], other[160];
    int64_t count;
    memset(out, 0, sizeof *out);
    if (raw->type != MSGPACK_OBJECT_ARRAY || (raw->via.array.size != 2 && raw->via.array.size != 5)) {
        rlb_fail(error, "%s must be [count, ints, doubles, chars, arrays] (stacked) or [count, values] "
             "(listed); got %s", name, item_text(raw, got, sizeof got));
        return RLB_BAD_FIELD;
    }
    const msgpack_object *f = raw->via.array.ptr;
    if (!rlb_read_i64(&f[0], &count) || count < 0) {
        rlb_fail(error, "%s count must be an int >= 0; got %s", name, item_text(&f[0], got, sizeof got));
        return RLB_BAD_FIELD;
    }
    if (raw->via.array.size == 2)
        return decode_listed(&f[1], frames, frame_sizes, n_frames, name, count, out, error);
    rlb_array ints, doubles;
    int code;
    snprintf(part, sizeof part, "%s ints", name);
    if ((code = stacked_part(&f[1], frames, frame_sizes, n_frames, "<i8", count, part, &ints,
                             error)) != RLB_OK)
        return code;
    snprintf(part, sizeof part, "%s doubles", name);
    if ((code = stacked_part(&f[2], frames, frame_sizes, n_frames, "<f8", count, part, &doubles,
                             error)) != RLB_OK)
        return code;
    if (ints.ndim != 2 || doubles.ndim != 2) {
        rlb_fail(error, "%s ints and doubles must be 2-dimensional, (count, k); got shapes %s and %s",
             name, shape_text(&ints, shape, sizeof shape), shape_text(&doubles, other, sizeof other));
        return RLB_BAD_FIELD;
    }
    const msgpack_object *chars = &f[3];
    int chars_ok = chars->type == MSGPACK_OBJECT_ARRAY && chars->via.array.size == (uint64_t)count;
    for (uint32_t i = 0; chars_ok && i < chars->via.array.size; i++)
        chars_ok = chars->via.array.ptr[i].type == MSGPACK_OBJECT_STR;
    if (!chars_ok) {
        rlb_fail(error, "%s chars must be an array of %lld str; got %s", name, (long long)count,
             item_text(chars, got, sizeof got));
        return RLB_BAD_FIELD;
    }
    if (f[4].type != MSGPACK_OBJECT_ARRAY) {
        rlb_fail(error, "%s arrays must be an array; got %s", name, rlb_kind_name(&f[4]));
        return RLB_BAD_FIELD;
    }
    size_t n_arrays = f[4].via.array.size;
    rlb_array *arrays = calloc(n_arrays + 1, sizeof *arrays);
    for (size_t p = 0; p < n_arrays; p++) {
        snprintf(part, sizeof part, "%s array %zu", name, p);
        code = stacked_part(&f[4].via.array.ptr[p], frames, frame_sizes, n_frames, NULL, count,
                            part, &arrays[p], error);
        if (code != RLB_OK) {
            free(arrays);
            return code;
        }
    }
    keep_stacked((size_t)count, &ints, &doubles, chars, arrays, n_arrays, out);
    return RLB_OK;
}

void rlb_batch_free(rlb_batch *batch) {
    if (batch->listed != NULL)
        for (size_t i = 0; i < batch->count; i++)
            rlb_value_free(&batch->listed[i]);
    free(batch->listed);
    free(batch->arrays);
    rlb_value_free(&batch->row);
    memset(batch, 0, sizeof *batch);
}

/* The same numbers of ints, doubles and arrays, and the same dtypes and shapes. */
static int same_layout(const rlb_value *a, const rlb_value *b) {
    if (a->n_ints != b->n_ints || a->n_doubles != b->n_doubles || a->n_arrays != b->n_arrays)
        return 0;
    for (size_t p = 0; p < a->n_arrays; p++) {
        const rlb_array *x = &a->arrays[p], *y = &b->arrays[p];
        if (strcmp(x->dtype, y->dtype) != 0 || x->ndim != y->ndim || x->nbytes != y->nbytes
            || memcmp(x->shape, y->shape, x->ndim * sizeof x->shape[0]) != 0)
            return 0;
    }
    return 1;
}

void *rlb_pack_batch(msgpack_packer *pk, const rlb_value *values, size_t count,
                     const rlb_array **frames, size_t *n_frames, size_t max_frames) {
    int stackable = 1;
    for (size_t i = 1; i < count && stackable; i++)
        stackable = same_layout(&values[0], &values[i]);
    /* A stacked array has one more dimension than its rows. */
    for (size_t p = 0; count && stackable && p < values[0].n_arrays; p++)
        stackable = values[0].arrays[p].ndim < RLB_MAX_DIMS;
    if (!stackable) {
        msgpack_pack_array(pk, 2);
        msgpack_pack_uint64(pk, count);
        msgpack_pack_array(pk, count);
        for (size_t i = 0; i < count; i++)
            rlb_pack_value(pk, &values[i], frames, n_frames, max_frames);
        return NULL;
    }
    const rlb_value *first = count ? &values[0] : NULL;
    size_t k_ints = first ? first->n_ints : 0, k_doubles = first ? first->n_doubles : 0;
    size_t n_arrays = first ? first->n_arrays : 0;
    size_t data_bytes = count * (k_ints + k_doubles) * 8;
    for (size_t p = 0; p < n_arrays; p++)
        data_bytes += count * first->arrays[p].nbytes;
    /* The stacked arrays (ints, doubles, then one per position) and their bytes, in one block
     * that outlives this call: frames may point into it until the message is sent. */
    rlb_array *stacked = calloc(1, (2 + n_arrays) * sizeof *stacked + data_bytes + 1);
    uint8_t *data = (uint8_t *)(stacked + 2 + n_arrays);
    rlb_array *ints = &stacked[0], *doubles = &stacked[1];
    memcpy(ints->dtype, "<i8", 4);
    memcpy(doubles->dtype, "<f8", 4);
    ints->ndim = doubles->ndim = 2;
    ints->shape[0] = doubles->shape[0] = count;
    ints->shape[1] = k_ints;
    doubles->shape[1] = k_doubles;
    ints->data = data;
    ints->nbytes = count * k_ints * 8;
    doubles->data = data + ints->nbytes;
    doubles->nbytes = count * k_doubles * 8;
    uint8_t *at = data + ints->nbytes + doubles->nbytes;
    for (size_t i = 0; i < count; i++) {
        for (size_t j = 0; j < k_ints; j++)
            write_le64(data + (i * k_ints + j) * 8, (uint64_t)values[i].ints[j]);
        for (size_t j = 0; j < k_doubles; j++) {
            uint64_t bits;
            memcpy(&bits, &values[i].doubles[j], sizeof bits);
            write_le64(data + ints->nbytes + (i * k_doubles + j) * 8, bits);
        }
    }
    for (size_t p = 0; p < n_arrays; p++) {
        const rlb_array *row = &first->arrays[p];
        rlb_array *column = &stacked[2 + p];
        memcpy(column->dtype, row->dtype, sizeof column->dtype);
        column->ndim = row->ndim + 1;
        column->shape[0] = count;
        memcpy(column->shape + 1, row->shape, row->ndim * sizeof row->shape[0]);
        column->data = at;
        column->nbytes = count * row->nbytes;
        for (size_t i = 0; i < count; i++, at += row->nbytes)
            memcpy(at, values[i].arrays[p].data, row->nbytes);
    }
    msgpack_pack_array(pk, 5);
    msgpack_pack_uint64(pk, count);
    rlb_pack_array(pk, ints, frames, n_frames, max_frames);
    rlb_pack_array(pk, doubles, frames, n_frames, max_frames);
    msgpack_pack_array(pk, count);
    for (size_t i = 0; i < count; i++) {
        size_t n_chars = values[i].chars ? values[i].n_chars : 0;
        msgpack_pack_str(pk, n_chars);
        msgpack_pack_str_body(pk, values[i].chars ? values[i].chars : "", n_chars);
    }
    msgpack_pack_array(pk, n_arrays);
    for (size_t p = 0; p < n_arrays; p++)
        rlb_pack_array(pk, &stacked[2 + p], frames, n_frames, max_frames);
    return stacked;
}

/* ---- AGENT_BATCH_STEP's body -------------------------------------------------------------- */

int rlb_read_agent_batch_step(const msgpack_object *body, const void *const *frames,
                              const size_t *frame_sizes, size_t n_frames,
                              rlb_agent_batch_step *out, char *error) {
    char got[64];
    int code;
    memset(out, 0, sizeof *out);
    if (body->type != MSGPACK_OBJECT_ARRAY || body->via.array.size != 4) {
        rlb_fail(error, "AGENT_BATCH_STEP body must be [first_instance, calls, rewards, observations]; "
             "got %s", item_text(body, got, sizeof got));
        return RLB_BAD_FIELD;
    }
    const msgpack_object *f = body->via.array.ptr;
    if ((code = rlb_decode_column(&f[1], frames, frame_sizes, n_frames, "|u1",
                                  "AGENT_BATCH_STEP calls", -1, &out->calls, error)) != RLB_OK)
        return code;
    size_t n_calls = out->calls.shape[0], taking = 0;
    for (size_t i = 0; i < n_calls; i++) {
        if (out->calls.data[i] >= RLB_AGENT_CALLS) {
            rlb_fail(error, "AGENT_BATCH_STEP calls[%zu] is %u; expected one of STEP=0, START=1, "
                 "END=2, END_START=3, NONE=4", i, out->calls.data[i]);
            return RLB_BAD_FIELD;
        }
        taking += (size_t)rlb_call_takes_observation(out->calls.data[i]);
    }
    if ((code = rlb_decode_column(&f[2], frames, frame_sizes, n_frames, "<f8",
                                  "AGENT_BATCH_STEP rewards", (int64_t)n_calls, &out->rewards,
                                  error)) != RLB_OK)
        return code;
    if ((code = rlb_decode_batch(&f[3], frames, frame_sizes, n_frames,
                                 "AGENT_BATCH_STEP observations", &out->observations,
                                 error)) != RLB_OK)
        return code;
    if (out->observations.count != taking) {
        rlb_fail(error, "AGENT_BATCH_STEP has %zu calls that take an observation (STEP, START, "
             "END_START) but %zu observations", taking, out->observations.count);
        rlb_batch_free(&out->observations);
        return RLB_BAD_FIELD;
    }
    if (!rlb_read_i64(&f[0], &out->first_instance) || out->first_instance < 0) {
        rlb_fail(error, "first_instance must be an int >= 0; got %s", item_text(&f[0], got, sizeof got));
        rlb_batch_free(&out->observations);
        return RLB_BAD_FIELD;
    }
    return RLB_OK;
}
