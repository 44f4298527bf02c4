/* Conformance of the C batch codec with the "batch" vectors of vectors.json (PROTOCOL.md
 * section 16): every message's fields encode into its bytes and its bytes decode into its
 * fields (batches stacked or listed, columns), every invalid_agent body is refused with its
 * error and the request's seq and episode, and every instance seed is numpy's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "vectors.h"

#define MAX_OWNED 256
#define MAX_FRAMES 8

/* The buffers one vector's checks allocate, freed together. */
static void *owned[MAX_OWNED];
static size_t n_owned;

static void *keep(void *pointer) {
    if (n_owned < MAX_OWNED)
        owned[n_owned++] = pointer;
    return pointer;
}

static void release(void) {
    while (n_owned > 0)
        free(owned[--n_owned]);
}

static const char *BARE_FIELDS[] = {"task_spec", "text", "reason", "reward", "observation",
                                    "action", "actions", NULL};

static int is_batch(const msgpack_object *o) {
    return o->type == MSGPACK_OBJECT_MAP && json_get(o, "form") != NULL;
}

static int is_column(const msgpack_object *o) {
    return o->type == MSGPACK_OBJECT_MAP && json_get(o, "dtype") != NULL;
}

static int is_columns(const msgpack_object *o) {
    return o->type == MSGPACK_OBJECT_ARRAY && o->via.array.size > 0
        && is_column(&o->via.array.ptr[0]);
}

static int text_is(const msgpack_object *o, const char *text) {
    return o->type == MSGPACK_OBJECT_STR && o->via.str.size == strlen(text)
        && memcmp(o->via.str.ptr, text, o->via.str.size) == 0;
}

/* The values of a batch's description: rows of the stacked arrays, or the listed values. */
static rlb_value *batch_values(const msgpack_object *fields, size_t *count) {
    *count = json_get(fields, "count")->via.u64;
    rlb_value *values = keep(calloc(*count + 1, sizeof *values));
    if (text_is(json_get(fields, "form"), "listed")) {
        const msgpack_object *listed = json_get(fields, "values");
        for (size_t i = 0; i < *count; i++) {
            uint8_t **buffers = keep(calloc(8, sizeof *buffers));
            value_from_fields(&listed->via.array.ptr[i], &values[i], buffers);
            keep(values[i].ints);
            keep(values[i].doubles);
            keep(values[i].arrays);
            for (size_t p = 0; p < values[i].n_arrays; p++)
                keep(buffers[p]);
        }
        return values;
    }
    rlb_array ints, doubles;
    uint8_t *bytes;
    array_from_fields(json_get(fields, "ints"), &ints, &bytes);
    keep(bytes);
    array_from_fields(json_get(fields, "doubles"), &doubles, &bytes);
    keep(bytes);
    const msgpack_object *chars = json_get(fields, "chars"), *arrays = json_get(fields, "arrays");
    size_t n_arrays = arrays->via.array.size;
    rlb_array *stacked = keep(calloc(n_arrays + 1, sizeof *stacked));
    for (size_t p = 0; p < n_arrays; p++) {
        array_from_fields(&arrays->via.array.ptr[p], &stacked[p], &bytes);
        keep(bytes);
    }
    for (size_t i = 0; i < *count; i++) {
        rlb_value *value = &values[i];
        value->n_ints = ints.shape[1];
        value->ints = keep(calloc(value->n_ints + 1, sizeof *value->ints));
        for (size_t j = 0; j < value->n_ints; j++)
            value->ints[j] = rlb_column_i64(&ints, i * value->n_ints + j);
        value->n_doubles = doubles.shape[1];
        value->doubles = keep(calloc(value->n_doubles + 1, sizeof *value->doubles));
        for (size_t j = 0; j < value->n_doubles; j++)
            value->doubles[j] = rlb_column_f64(&doubles, i * value->n_doubles + j);
        value->chars = chars->via.array.ptr[i].via.str.ptr;
        value->n_chars = chars->via.array.ptr[i].via.str.size;
        value->n_arrays = n_arrays;
        value->arrays = keep(calloc(n_arrays + 1, sizeof *value->arrays));
        for (size_t p = 0; p < n_arrays; p++) {
            rlb_array *row = &value->arrays[p];
            size_t row_bytes = stacked[p].nbytes / *count;
            memcpy(row->dtype, stacked[p].dtype, 4);
            row->ndim = stacked[p].ndim - 1;
            memcpy(row->shape, stacked[p].shape + 1, row->ndim * sizeof row->shape[0]);
            row->data = stacked[p].data + i * row_bytes;
            row->nbytes = row_bytes;
        }
    }
    return values;
}

static void pack_column(msgpack_packer *pk, const msgpack_object *fields) {
    rlb_array column;
    uint8_t *bytes;
    array_from_fields(fields, &column, &bytes);
    keep(bytes);
    rlb_pack_array(pk, &column, NULL, NULL, 0);
}

static void pack_field(msgpack_packer *pk, const msgpack_object *value, const rlb_array **frames,
                       size_t *n_frames) {
    if (is_batch(value)) {
        size_t count;
        rlb_value *values = batch_values(value, &count);
        keep(rlb_pack_batch(pk, values, count, frames, n_frames, MAX_FRAMES));
    } else if (is_column(value)) {
        pack_column(pk, value);
    } else if (is_columns(value)) {
        msgpack_pack_array(pk, value->via.array.size);
        for (uint32_t i = 0; i < value->via.array.size; i++)
            pack_column(pk, &value->via.array.ptr[i]);
    } else {
        msgpack_pack_object(pk, *value);
    }
}

static void check_column(const msgpack_object *raw, const msgpack_object *fields,
                         const void *const *frames, const size_t *sizes, size_t n_frames) {
    char error[RLB_ERROR_TEXT_BYTES];
    rlb_array got, want;
    uint8_t *bytes;
    array_from_fields(fields, &want, &bytes);
    keep(bytes);
    int code = rlb_decode_column(raw, frames, sizes, n_frames, want.dtype, "column",
                                 (int64_t)want.shape[0], &got, error);
    check(code == RLB_OK, error);
    if (code == RLB_OK)
        check(got.nbytes == want.nbytes && memcmp(got.data, want.data, got.nbytes) == 0,
              "column decodes into its bytes");
}

static void check_field(const msgpack_object *raw, const msgpack_object *value,
                        const void *const *frames, const size_t *sizes, size_t n_frames) {
    char error[RLB_ERROR_TEXT_BYTES];
    if (is_batch(value)) {
        size_t count;
        rlb_value *want = batch_values(value, &count);
        rlb_batch got;
        int code = rlb_decode_batch(raw, frames, sizes, n_frames, "batch", &got, error);
        check(code == RLB_OK, error);
        if (code != RLB_OK)
            return;
        check(got.count == count, "batch count");
        check(got.stacked == text_is(json_get(value, "form"), "stacked"), "batch form");
        for (size_t i = 0; i < count && i < got.count; i++)
            check(same_value(rlb_batch_value(&got, i), &want[i]),
                  "batch member decodes into its fields");
        rlb_batch_free(&got);
    } else if (is_column(value)) {
        check_column(raw, value, frames, sizes, n_frames);
    } else if (is_columns(value)) {
        if (raw->type != MSGPACK_OBJECT_ARRAY || raw->via.array.size != value->via.array.size) {
            check(0, "an array of columns");
            return;
        }
        for (uint32_t i = 0; i < value->via.array.size; i++)
            check_column(&raw->via.array.ptr[i], &value->via.array.ptr[i], frames, sizes,
                         n_frames);
    } else {
        check(msgpack_object_equal(*raw, *value), "field decodes");
    }
}

static void run_message(const msgpack_object *v) {
    const msgpack_object *name = json_get(v, "name"), *fields = json_get(v, "fields");
    snprintf(current, sizeof current, "batch/%.*s", (int)name->via.str.size, name->via.str.ptr);
    int before = failures;
    size_t length;
    uint8_t *bytes = keep(from_hex(json_get(v, "hex"), &length));
    int64_t seq = (int64_t)json_get(v, "seq")->via.u64;
    int64_t episode = (int64_t)json_get(v, "episode")->via.u64;
    int type = (int)json_get(v, "type")->via.u64;
    uint32_t n_fields = fields->via.map.size;
    int bare = n_fields == 1 && named(&fields->via.map.ptr[0].key, BARE_FIELDS);

    msgpack_sbuffer buffer;
    msgpack_packer pk;
    msgpack_sbuffer_init(&buffer);
    msgpack_packer_init(&pk, &buffer, msgpack_sbuffer_write);
    rlb_pack_header(&pk, type, seq, episode);
    const rlb_array *frames[MAX_FRAMES];
    size_t n_frames = 0;
    if (n_fields == 0)
        msgpack_pack_nil(&pk);
    else if (!bare)
        msgpack_pack_array(&pk, n_fields);
    for (uint32_t i = 0; i < n_fields; i++)
        pack_field(&pk, &fields->via.map.ptr[i].val, frames, &n_frames);
    check(buffer.size == length && memcmp(buffer.data, bytes, length) == 0,
          "fields encode into the vector's bytes");
    /* Every array of 64 KiB or more in the vectors follows "byte i is i mod 256". */
    const msgpack_object *want_frames = json_get(v, "frames");
    check(n_frames == want_frames->via.array.size, "number of extra frames");
    const void *frame_data[MAX_FRAMES];
    size_t frame_sizes[MAX_FRAMES];
    for (size_t i = 0; i < n_frames; i++) {
        frame_data[i] = frames[i]->data;
        frame_sizes[i] = frames[i]->nbytes;
        int rule = i < want_frames->via.array.size
            && frames[i]->nbytes == json_get(&want_frames->via.array.ptr[i], "length")->via.u64;
        for (size_t b = 0; rule && b < frames[i]->nbytes; b++)
            rule = frames[i]->data[b] == (uint8_t)(b % 256);
        check(rule, "extra frame: its length, and byte i is i mod 256");
    }

    msgpack_unpacked root;
    msgpack_unpacked_init(&root);
    rlb_envelope message;
    char error[RLB_ERROR_TEXT_BYTES];
    int code = rlb_decode_message((const char *)bytes, length, &root, &message, error);
    check(code == RLB_OK, error);
    if (code == RLB_OK) {
        check(message.type == type && message.seq == seq && message.episode == episode,
              "header decodes");
        const msgpack_object *body = &message.body;
        if (n_fields == 0)
            check(body->type == MSGPACK_OBJECT_NIL, "empty body decodes as nil");
        else if (bare)
            check_field(body, &fields->via.map.ptr[0].val, frame_data, frame_sizes, n_frames);
        else if (body->type != MSGPACK_OBJECT_ARRAY || body->via.array.size != n_fields)
            check(0, "body is an array with one item per field");
        else
            for (uint32_t i = 0; i < n_fields; i++)
                check_field(&body->via.array.ptr[i], &fields->via.map.ptr[i].val, frame_data,
                            frame_sizes, n_frames);
    }
    msgpack_unpacked_destroy(&root);
    msgpack_sbuffer_destroy(&buffer);
    release();
    if (failures == before)
        passes++;
}

/* A malformed AGENT_BATCH_STEP body: the envelope is fine, its body reader refuses it. */
static void run_invalid_agent(const msgpack_object *v) {
    const msgpack_object *name = json_get(v, "name");
    snprintf(current, sizeof current, "batch/invalid_agent/%.*s", (int)name->via.str.size,
             name->via.str.ptr);
    int before = failures;
    size_t length;
    uint8_t *bytes = from_hex(json_get(v, "hex"), &length);
    msgpack_unpacked root;
    msgpack_unpacked_init(&root);
    rlb_envelope message;
    char error[RLB_ERROR_TEXT_BYTES] = "";
    int code = rlb_decode_message((const char *)bytes, length, &root, &message, error);
    check(code == RLB_OK && message.type == RLB_AGENT_BATCH_STEP, "the envelope decodes");
    check(message.ids_read && message.seq == (int64_t)json_get(v, "reply_seq")->via.u64
          && message.episode == (int64_t)json_get(v, "reply_episode")->via.u64,
          "the reply's seq and episode");
    if (code == RLB_OK) {
        rlb_agent_batch_step body;
        code = rlb_read_agent_batch_step(&message.body, NULL, NULL, 0, &body, error);
        if (code == RLB_OK)
            rlb_batch_free(&body.observations);
        int want = (int)json_get(v, "error_code")->via.u64;
        char text[RLB_ERROR_TEXT_BYTES + 64];
        snprintf(text, sizeof text, "expected error %s, got %s (%s)", rlb_error_name(want),
                 rlb_error_name(code), error);
        check(code == want, text);
    }
    msgpack_unpacked_destroy(&root);
    free(bytes);
    if (failures == before)
        passes++;
}

static void run_instance_seed(const msgpack_object *v) {
    uint64_t seed = json_get(v, "seed")->via.u64, instance = json_get(v, "instance")->via.u64;
    uint64_t want = json_get(v, "instance_seed")->via.u64;
    snprintf(current, sizeof current, "batch/instance_seed(%llu, %llu)",
             (unsigned long long)seed, (unsigned long long)instance);
    uint64_t got = rlb_instance_seed(seed, instance);
    char text[128];
    snprintf(text, sizeof text, "expected %llu, got %llu", (unsigned long long)want,
             (unsigned long long)got);
    int before = failures;
    check(got == want, text);
    if (failures == before)
        passes++;
}

void run_batch_vectors(const msgpack_object *batch) {
    snprintf(current, sizeof current, "batch");
    if (batch == NULL) {
        check(0, "vectors.json has a batch key");
        return;
    }
    const msgpack_object *messages = json_get(batch, "messages");
    const msgpack_object *invalid = json_get(batch, "invalid_agent");
    const msgpack_object *seeds = json_get(batch, "instance_seeds");
    for (uint32_t i = 0; i < messages->via.array.size; i++)
        run_message(&messages->via.array.ptr[i]);
    for (uint32_t i = 0; i < invalid->via.array.size; i++)
        run_invalid_agent(&invalid->via.array.ptr[i]);
    for (uint32_t i = 0; i < seeds->via.array.size; i++)
        run_instance_seed(&seeds->via.array.ptr[i]);
}
