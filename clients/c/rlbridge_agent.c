/* The agent side of the rlbridge protocol: the value codec, task-spec reading, the seeded
 * generator and the seeds of instances (the envelope is in rlbridge_envelope.c, batches in
 * rlbridge_batch.c, the command line in rlbridge_args.c). */
#define _POSIX_C_SOURCE 200809L
#include "rlbridge_agent.h"
#include "rlbridge_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


size_t rlb_dtype_size(const char *dtype, size_t length) {
    static const char *codes[] = {"|b1", "|i1", "|u1", "<i2", "<u2", "<i4", "<u4",
                                  "<i8", "<u8", "<f4", "<f8"};
    static const size_t sizes[] = {1, 1, 1, 2, 2, 4, 4, 8, 8, 4, 8};
    if (length != 3)
        return 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (memcmp(dtype, codes[i], 3) == 0)
            return sizes[i];
    return 0;
}

void rlb_value_free(rlb_value *value) {
    free(value->ints);
    free(value->doubles);
    free(value->arrays);
    memset(value, 0, sizeof *value);
}

int rlb_decode_array(const msgpack_object *entry, const void *const *frames,
                     const size_t *frame_sizes, size_t n_frames, rlb_array *out, char *error) {
    if (entry->type != MSGPACK_OBJECT_ARRAY || entry->via.array.size != 3) {
        rlb_fail(error, "an array must be [dtype, shape, data]");
        return RLB_BAD_FIELD;
    }
    const msgpack_object *f = entry->via.array.ptr;
    size_t itemsize = f[0].type == MSGPACK_OBJECT_STR
        ? rlb_dtype_size(f[0].via.str.ptr, f[0].via.str.size) : 0;
    if (itemsize == 0) {
        rlb_fail(error, "array dtype is not one of |b1 |i1 |u1 <i2 <u2 <i4 <u4 <i8 <u8 <f4 <f8");
        return RLB_BAD_FIELD;
    }
    memcpy(out->dtype, f[0].via.str.ptr, 3);
    out->dtype[3] = '\0';
    if (f[1].type != MSGPACK_OBJECT_ARRAY) {
        rlb_fail(error, "array shape must be a list of non-negative ints; got %s", rlb_kind_name(&f[1]));
        return RLB_BAD_FIELD;
    }
    if (f[1].via.array.size > RLB_MAX_DIMS) {
        rlb_fail(error, "an array has at most %d dimensions; got %u", RLB_MAX_DIMS,
             f[1].via.array.size);
        return RLB_BAD_FIELD;
    }
    out->ndim = f[1].via.array.size;
    /* The extent skips zero dimensions: what a reader must be able to address. */
    uint64_t extent = itemsize;
    int empty = 0;
    for (size_t i = 0; i < out->ndim; i++) {
        const msgpack_object *n = &f[1].via.array.ptr[i];
        if (n->type != MSGPACK_OBJECT_POSITIVE_INTEGER) {
            rlb_fail(error, "array shape must be a list of non-negative ints; got %s", rlb_kind_name(n));
            return RLB_BAD_FIELD;
        }
        out->shape[i] = n->via.u64;
        empty |= n->via.u64 == 0;
        if (n->via.u64 > 1 && extent > RLB_MAX_ARRAY_EXTENT_BYTES / n->via.u64) {
            rlb_fail(error, "array shape spans more than %llu bytes without its zero dimensions "
                 "(dimension %zu is %llu)", (unsigned long long)RLB_MAX_ARRAY_EXTENT_BYTES, i,
                 (unsigned long long)n->via.u64);
            return RLB_BAD_FIELD;
        }
        extent *= n->via.u64 ? n->via.u64 : 1;
    }
    uint64_t expected = empty ? 0 : extent;
    if (f[2].type == MSGPACK_OBJECT_BIN) {
        out->data = (const uint8_t *)f[2].via.bin.ptr;
        out->nbytes = f[2].via.bin.size;
    } else if (f[2].type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
        if (f[2].via.u64 >= n_frames) {
            rlb_fail(error, "array refers to frame %llu; the message has %zu extra frames",
                 (unsigned long long)f[2].via.u64, n_frames);
            return RLB_BAD_FIELD;
        }
        out->data = frames[f[2].via.u64];
        out->nbytes = frame_sizes[f[2].via.u64];
    } else {
        rlb_fail(error, "array data must be bin bytes or a frame index; got %s", rlb_kind_name(&f[2]));
        return RLB_BAD_FIELD;
    }
    if (out->nbytes != expected) {
        rlb_fail(error, "array %s needs %llu bytes; got %zu", out->dtype,
             (unsigned long long)expected, out->nbytes);
        return RLB_BAD_FIELD;
    }
    return RLB_OK;
}

int rlb_decode_value(const msgpack_object *raw, const void *const *frames,
                     const size_t *frame_sizes, size_t n_frames, rlb_value *out, char *error) {
    memset(out, 0, sizeof *out);
    if (raw->type != MSGPACK_OBJECT_ARRAY || raw->via.array.size != 4) {
        rlb_fail(error, "a value must be the array [ints, doubles, chars, arrays]; got %s", rlb_kind_name(raw));
        return RLB_BAD_FIELD;
    }
    const msgpack_object *f = raw->via.array.ptr;
    if (f[0].type != MSGPACK_OBJECT_ARRAY || f[1].type != MSGPACK_OBJECT_ARRAY
        || f[2].type != MSGPACK_OBJECT_STR) {
        rlb_fail(error, "a value's fields must be (array of ints, array of doubles, str); got "
             "(%s, %s, %s)", rlb_kind_name(&f[0]), rlb_kind_name(&f[1]), rlb_kind_name(&f[2]));
        return RLB_BAD_FIELD;
    }
    out->n_ints = f[0].via.array.size;
    out->n_doubles = f[1].via.array.size;
    out->ints = calloc(out->n_ints + 1, sizeof *out->ints);
    out->doubles = calloc(out->n_doubles + 1, sizeof *out->doubles);
    for (size_t i = 0; i < out->n_ints; i++) {
        if (!rlb_read_i64(&f[0].via.array.ptr[i], &out->ints[i])) {
            rlb_fail(error, "value ints must all be integers; got %s", rlb_kind_name(&f[0].via.array.ptr[i]));
            rlb_value_free(out);
            return RLB_BAD_FIELD;
        }
    }
    for (size_t i = 0; i < out->n_doubles; i++) {
        const msgpack_object *d = &f[1].via.array.ptr[i];
        int64_t whole;
        if (d->type == MSGPACK_OBJECT_FLOAT64 || d->type == MSGPACK_OBJECT_FLOAT32)
            out->doubles[i] = d->via.f64;
        else if (rlb_read_i64(d, &whole))
            out->doubles[i] = (double)whole;
        else {
            rlb_fail(error, "value doubles must all be numbers; got %s", rlb_kind_name(d));
            rlb_value_free(out);
            return RLB_BAD_FIELD;
        }
    }
    out->chars = f[2].via.str.ptr;
    out->n_chars = f[2].via.str.size;
    if (f[3].type == MSGPACK_OBJECT_NIL)
        return RLB_OK;
    if (f[3].type != MSGPACK_OBJECT_ARRAY) {
        rlb_fail(error, "value arrays must be an array; got %s", rlb_kind_name(&f[3]));
        rlb_value_free(out);
        return RLB_BAD_FIELD;
    }
    out->n_arrays = f[3].via.array.size;
    out->arrays = calloc(out->n_arrays + 1, sizeof *out->arrays);
    for (size_t i = 0; i < out->n_arrays; i++) {
        int code = rlb_decode_array(&f[3].via.array.ptr[i], frames, frame_sizes, n_frames,
                                &out->arrays[i], error);
        if (code != RLB_OK) {
            rlb_value_free(out);
            return code;
        }
    }
    return RLB_OK;
}

int rlb_read_reward(const msgpack_object *raw, double *out, char *error) {
    int64_t whole;
    if (raw->type == MSGPACK_OBJECT_FLOAT64 || raw->type == MSGPACK_OBJECT_FLOAT32) {
        *out = raw->via.f64;
        return RLB_OK;
    }
    if (rlb_read_i64(raw, &whole)) {
        *out = (double)whole;
        return RLB_OK;
    }
    rlb_fail(error, "reward must be a float; got %s", rlb_kind_name(raw));
    return RLB_BAD_FIELD;
}

void rlb_pack_str(msgpack_packer *pk, const char *text) {
    size_t length = strlen(text);
    msgpack_pack_str(pk, length);
    msgpack_pack_str_body(pk, text, length);
}

void rlb_pack_header(msgpack_packer *pk, int type, int64_t seq, int64_t episode) {
    msgpack_pack_array(pk, 5);
    msgpack_pack_int(pk, RLB_PROTOCOL_VERSION);
    msgpack_pack_int(pk, type);
    msgpack_pack_int64(pk, seq);
    msgpack_pack_int64(pk, episode);
}

void rlb_pack_array(msgpack_packer *pk, const rlb_array *array, const rlb_array **frames,
                    size_t *n_frames, size_t max_frames) {
    msgpack_pack_array(pk, 3);
    msgpack_pack_str(pk, 3);
    msgpack_pack_str_body(pk, array->dtype, 3);
    msgpack_pack_array(pk, array->ndim);
    for (size_t d = 0; d < array->ndim; d++)
        msgpack_pack_uint64(pk, array->shape[d]);
    if (frames != NULL && array->nbytes >= RLB_ZERO_COPY_THRESHOLD_BYTES && *n_frames < max_frames) {
        frames[*n_frames] = array;
        msgpack_pack_uint64(pk, *n_frames);
        (*n_frames)++;
    } else {
        msgpack_pack_bin(pk, array->nbytes);
        msgpack_pack_bin_body(pk, array->data, array->nbytes);
    }
}

void rlb_pack_value(msgpack_packer *pk, const rlb_value *value, const rlb_array **frames,
                    size_t *n_frames, size_t max_frames) {
    msgpack_pack_array(pk, 4);
    msgpack_pack_array(pk, value->n_ints);
    for (size_t i = 0; i < value->n_ints; i++)
        msgpack_pack_int64(pk, value->ints[i]);
    msgpack_pack_array(pk, value->n_doubles);
    for (size_t i = 0; i < value->n_doubles; i++)
        msgpack_pack_double(pk, value->doubles[i]);
    size_t n_chars = value->chars ? value->n_chars : 0;
    msgpack_pack_str(pk, n_chars);
    msgpack_pack_str_body(pk, value->chars ? value->chars : "", n_chars);
    msgpack_pack_array(pk, value->n_arrays);
    for (size_t i = 0; i < value->n_arrays; i++)
        rlb_pack_array(pk, &value->arrays[i], frames, n_frames, max_frames);
}

/* ---- task specs -------------------------------------------------------------------------- */

static int parse_bound(const char **cursor, int64_t *out) {
    while (**cursor == ' ')
        (*cursor)++;
    if (strncmp(*cursor, "NEGINF", 6) == 0 || strncmp(*cursor, "POSINF", 6) == 0
        || strncmp(*cursor, "UNSPEC", 6) == 0) {
        *out = (**cursor == 'N') ? INT64_MIN : INT64_MAX;
        *cursor += 6;
        return 1;
    }
    char *end;
    double number = strtod(*cursor, &end);
    if (end == *cursor)
        return 0;
    *out = (int64_t)number;
    *cursor = end;
    return 1;
}

int rlb_parse_task_spec(const char *text, rlb_task_spec *out, char *error) {
    memset(out, 0, sizeof *out);
    out->legal_mask = -1;
    const char *actions = strstr(text, "ACTIONS");
    if (actions == NULL) {
        rlb_fail(error, "task spec has no ACTIONS section: %.200s", text);
        return RLB_BAD_FIELD;
    }
    const char *ints = strstr(actions, "INTS");
    const char *stop = strstr(actions, "REWARDS");
    const char *doubles = strstr(actions, "DOUBLES");
    if (doubles != NULL && (stop == NULL || doubles < stop))
        stop = doubles;
    if (ints != NULL && (stop == NULL || ints < stop)) {
        const char *cursor = ints + 4;
        for (;;) {
            while (*cursor == ' ')
                cursor++;
            if (*cursor != '(')
                break;
            cursor++;
            int64_t numbers[3];
            int n = 0;
            while (n < 3 && parse_bound(&cursor, &numbers[n]))
                n++;
            while (*cursor == ' ')
                cursor++;
            if (*cursor != ')' || n < 2) {
                rlb_fail(error, "task spec has a malformed ACTIONS INTS range near: %.40s", cursor);
                return RLB_BAD_FIELD;
            }
            cursor++;
            int64_t count = n == 3 ? numbers[0] : 1;
            for (int64_t k = 0; k < count && out->n_action_ints < RLB_MAX_RANGES; k++) {
                out->action_low[out->n_action_ints] = numbers[n - 2];
                out->action_high[out->n_action_ints] = numbers[n - 1];
                out->n_action_ints++;
            }
        }
    }
    const char *mask = strstr(text, "\"legal_mask\":");
    if (mask != NULL)
        out->legal_mask = atoi(mask + strlen("\"legal_mask\":"));
    return RLB_OK;
}

int rlb_legal_actions(const rlb_task_spec *spec, const rlb_value *observation, int64_t *out,
                      size_t capacity) {
    if (spec->legal_mask < 0 || (size_t)spec->legal_mask >= observation->n_arrays)
        return -1;
    const rlb_array *mask = &observation->arrays[spec->legal_mask];
    int64_t low = spec->n_action_ints > 0 ? spec->action_low[0] : 0;
    size_t n = 0;
    for (size_t i = 0; i < mask->nbytes && n < capacity; i++)
        if (mask->data[i])
            out[n++] = low + (int64_t)i;
    return (int)n;
}

/* ---- randomness -------------------------------------------------------------------------- */

void rlb_rng_seed(rlb_rng *rng, uint64_t seed) { rng->state = seed; }

uint64_t rlb_rng_next(rlb_rng *rng) {
    uint64_t z = (rng->state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

uint64_t rlb_rng_below(rlb_rng *rng, uint64_t n) {
    return n == 0 ? 0 : (uint64_t)((rlb_rng_next(rng) >> 11) * 0x1.0p-53 * (double)n);
}

/* ---- seeds of instances: numpy's SeedSequence, pool of 4 words ------------------------------ */

enum {
    SS_POOL = 4, SS_XSHIFT = 16
};
static const uint32_t SS_INIT_A = 0x43b0d7e5u, SS_MULT_A = 0x931e8875u, SS_INIT_B = 0x8b51f9ddu,
                      SS_MULT_B = 0x58f38dedu, SS_MIX_MULT_L = 0xca01f9ddu,
                      SS_MIX_MULT_R = 0x4973f715u;

static uint32_t hashmix(uint32_t value, uint32_t *hash_const) {
    value ^= *hash_const;
    *hash_const *= SS_MULT_A;
    value *= *hash_const;
    return value ^ (value >> SS_XSHIFT);
}

static uint32_t mix(uint32_t x, uint32_t y) {
    uint32_t result = SS_MIX_MULT_L * x - SS_MIX_MULT_R * y;
    return result ^ (result >> SS_XSHIFT);
}

/* An int as numpy's SeedSequence reads it: 32-bit words, least significant first; 0 is [0]. */
static size_t append_words(uint64_t value, uint32_t *words, size_t n) {
    do {
        words[n++] = (uint32_t)value;
        value >>= 32;
    } while (value != 0);
    return n;
}

uint64_t rlb_instance_seed(uint64_t seed, uint64_t instance) {
    if (instance == 0)
        return seed;
    uint32_t entropy[4], pool[SS_POOL], hash_const = SS_INIT_A;
    size_t n = append_words(instance, entropy, append_words(seed, entropy, 0));
    for (size_t i = 0; i < SS_POOL; i++)
        pool[i] = hashmix(i < n ? entropy[i] : 0, &hash_const);
    for (size_t source = 0; source < SS_POOL; source++)
        for (size_t target = 0; target < SS_POOL; target++)
            if (source != target)
                pool[target] = mix(pool[target], hashmix(pool[source], &hash_const));
    for (size_t source = SS_POOL; source < n; source++)
        for (size_t target = 0; target < SS_POOL; target++)
            pool[target] = mix(pool[target], hashmix(entropy[source], &hash_const));
    /* generate_state(1): the first word. */
    uint32_t word = pool[0] ^ SS_INIT_B;
    word *= SS_INIT_B * SS_MULT_B;
    return word ^ (word >> SS_XSHIFT);
}
