/* The agent side of the rlbridge protocol: envelope and value codec, the ROUTER request loop,
 * task-spec reading, CURVE keys and the ZAP handler that refuses unknown clients. */
#define _POSIX_C_SOURCE 200809L
#include "rlbridge_agent.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


static void fail(char *error, const char *format, ...) {
    va_list args;
    va_start(args, format);
    vsnprintf(error, RLB_ERROR_TEXT_BYTES, format, args);
    va_end(args);
}

const char *rlb_type_name(int type) {
    switch (type) {
    case RLB_HELLO: return "HELLO";
    case RLB_ERROR: return "ERROR";
    case RLB_HEARTBEAT: return "HEARTBEAT";
    case RLB_SHUTDOWN: return "SHUTDOWN";
    case RLB_ENV_INIT: return "ENV_INIT";
    case RLB_ENV_START: return "ENV_START";
    case RLB_ENV_STEP: return "ENV_STEP";
    case RLB_ENV_CLEANUP: return "ENV_CLEANUP";
    case RLB_ENV_MESSAGE: return "ENV_MESSAGE";
    case RLB_AGENT_INIT: return "AGENT_INIT";
    case RLB_AGENT_START: return "AGENT_START";
    case RLB_AGENT_STEP: return "AGENT_STEP";
    case RLB_AGENT_END: return "AGENT_END";
    case RLB_AGENT_CLEANUP: return "AGENT_CLEANUP";
    case RLB_AGENT_MESSAGE: return "AGENT_MESSAGE";
    case RLB_RUN_EPISODE: return "RUN_EPISODE";
    case RLB_DELEGATE: return "DELEGATE";
    default: return NULL;
    }
}

const char *rlb_error_name(int code) {
    static const char *names[] = {"OK", "MALFORMED", "UNKNOWN_TYPE", "BAD_FIELD", "TOO_LARGE",
                                  "VERSION_MISMATCH", "INVALID_ACTION", "WRONG_STATE",
                                  "PEER_TIMEOUT", "PEER_ERROR", "APPLICATION", "SHUTDOWN"};
    return code >= 0 && code <= 11 ? names[code] : "UNKNOWN";
}

/* ---- codec ------------------------------------------------------------------------------- */

static int read_i64(const msgpack_object *o, int64_t *out) {
    if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER && o->via.u64 <= INT64_MAX) {
        *out = (int64_t)o->via.u64;
        return 1;
    }
    if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
        *out = o->via.i64;
        return 1;
    }
    return 0;
}

const char *rlb_kind_name(const msgpack_object *o) {
    switch (o->type) {
    case MSGPACK_OBJECT_NIL: return "nil";
    case MSGPACK_OBJECT_BOOLEAN: return "bool";
    case MSGPACK_OBJECT_POSITIVE_INTEGER: return o->via.u64 <= INT64_MAX ? "int" : "uint64";
    case MSGPACK_OBJECT_NEGATIVE_INTEGER: return "int";
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64: return "float";
    case MSGPACK_OBJECT_STR: return "str";
    case MSGPACK_OBJECT_ARRAY: return "array";
    case MSGPACK_OBJECT_MAP: return "map";
    case MSGPACK_OBJECT_BIN: return "bin";
    default: return "ext";
    }
}

/* Steps 3 to 5 of the envelope checks, on the first four items whatever they were read from. */
static int check_header(const int is_int[4], const int64_t field[4], const char *kinds[4],
                        rlb_envelope *out, char *error) {
    out->ids_read = is_int[2] && is_int[3];
    if (out->ids_read) {
        out->seq = field[2];
        out->episode = field[3];
    }
    if (!is_int[0] || !is_int[1] || !is_int[2] || !is_int[3]) {
        fail(error, "envelope fields version, type, seq and episode must be integers; got "
             "(%s, %s, %s, %s)", kinds[0], kinds[1], kinds[2], kinds[3]);
        return RLB_BAD_FIELD;
    }
    int64_t version = field[0], type = field[1];
    if (version != RLB_PROTOCOL_VERSION) {
        fail(error, "protocol version mismatch: expected %d, got %lld", RLB_PROTOCOL_VERSION,
             (long long)version);
        return RLB_VERSION_MISMATCH;
    }
    if (type < 0 || type > 255 || rlb_type_name((int)type) == NULL) {
        fail(error, "unknown message type %lld; expected one of HELLO=1, ERROR=2, HEARTBEAT=3, "
             "SHUTDOWN=4, ENV_INIT=10..ENV_MESSAGE=14, AGENT_INIT=20..AGENT_MESSAGE=25, "
             "RUN_EPISODE=30, DELEGATE=31", (long long)type);
        return RLB_UNKNOWN_TYPE;
    }
    out->version = (int)version;
    out->type = (int)type;
    return RLB_OK;
}

static int not_an_envelope(const msgpack_object *root, char *error) {
    if (root->type == MSGPACK_OBJECT_ARRAY)
        fail(error, "expected a msgpack envelope [version, type, seq, episode, body]; got an "
             "array of %u items", root->via.array.size);
    else
        fail(error, "expected a msgpack envelope [version, type, seq, episode, body]; got %s",
             rlb_kind_name(root));
    return RLB_MALFORMED;
}

int rlb_decode_envelope(const msgpack_object *root, rlb_envelope *out, char *error) {
    out->ids_read = 0;
    if (root->type != MSGPACK_OBJECT_ARRAY || root->via.array.size != 5)
        return not_an_envelope(root, error);
    const msgpack_object *f = root->via.array.ptr;
    int is_int[4];
    int64_t field[4] = {0};
    const char *kinds[4];
    for (int i = 0; i < 4; i++) {
        is_int[i] = read_i64(&f[i], &field[i]);
        kinds[i] = rlb_kind_name(&f[i]);
    }
    out->body = f[4];
    return check_header(is_int, field, kinds, out, error);
}

int rlb_decode_message(const char *payload, size_t length, msgpack_unpacked *root,
                       rlb_envelope *out, char *error) {
    size_t offset = 0;
    memset(out, 0, sizeof *out);
    int status = msgpack_unpack_next(root, payload, length, &offset);
    if (status != MSGPACK_UNPACK_SUCCESS || offset != length) {
        fail(error, "expected a msgpack envelope [version, type, seq, episode, body]; could not "
             "decode %zu bytes", length);
        return RLB_MALFORMED;
    }
    return rlb_decode_envelope(&root->data, out, error);
}

/* ---- reading an envelope's first items from its bytes -------------------------------------- */

#define PEEK_MAX_DEPTH 16

typedef struct {
    const uint8_t *at, *end;
} cursor;

static int take(cursor *c, size_t n, uint64_t *out) {
    if ((size_t)(c->end - c->at) < n)
        return 0;
    uint64_t value = 0;
    for (size_t i = 0; i < n; i++)
        value = value << 8 | c->at[i];
    c->at += n;
    *out = value;
    return 1;
}

static int skip_bytes(cursor *c, uint64_t n) {
    if ((uint64_t)(c->end - c->at) < n)
        return 0;
    c->at += n;
    return 1;
}

/* Read one msgpack item: an int64 into *value (and *is_int = 1), anything else skipped with
 * its name in *what. Returns 0 when the bytes end first or nest deeper than PEEK_MAX_DEPTH. */
static int peek_item(cursor *c, int depth, int *is_int, int64_t *value, const char **what) {
    uint64_t n = 0, items = 0;
    int signed_bytes = 0, unsigned_bytes = 0;
    if (c->at >= c->end || depth > PEEK_MAX_DEPTH)
        return 0;
    uint8_t b = *c->at++;
    *is_int = 0;
    *what = "int";
    if (b <= 0x7f || b >= 0xe0) {
        *is_int = 1;
        *value = (int8_t)b;
        if (b <= 0x7f)
            *value = b;
        return 1;
    }
    switch (b) {
    case 0xcc: unsigned_bytes = 1; break;
    case 0xcd: unsigned_bytes = 2; break;
    case 0xce: unsigned_bytes = 4; break;
    case 0xcf: unsigned_bytes = 8; break;
    case 0xd0: signed_bytes = 1; break;
    case 0xd1: signed_bytes = 2; break;
    case 0xd2: signed_bytes = 4; break;
    case 0xd3: signed_bytes = 8; break;
    default: break;
    }
    if (unsigned_bytes || signed_bytes) {
        if (!take(c, (size_t)(unsigned_bytes + signed_bytes), &n))
            return 0;
        if (signed_bytes) {
            int shift = 64 - 8 * signed_bytes;
            *value = (int64_t)(n << shift) >> shift;
            *is_int = 1;
        } else if (n <= INT64_MAX) {
            *value = (int64_t)n;
            *is_int = 1;
        } else {
            *what = "uint64";
        }
        return 1;
    }
    if (b == 0xc0) { *what = "nil"; return 1; }
    if (b == 0xc2 || b == 0xc3) { *what = "bool"; return 1; }
    if (b == 0xca || b == 0xcb) { *what = "float"; return skip_bytes(c, b == 0xca ? 4 : 8); }
    if ((b >= 0xa0 && b <= 0xbf) || (b >= 0xd9 && b <= 0xdb)) {
        *what = "str";
        if (b <= 0xbf)
            n = b & 0x1f;
        else if (!take(c, (size_t)1 << (b - 0xd9), &n))
            return 0;
        return skip_bytes(c, n);
    }
    if (b >= 0xc4 && b <= 0xc6) {
        *what = "bin";
        return take(c, (size_t)1 << (b - 0xc4), &n) && skip_bytes(c, n);
    }
    if (b >= 0xd4 && b <= 0xd8) {
        *what = "ext";
        return skip_bytes(c, 1 + ((uint64_t)1 << (b - 0xd4)));
    }
    if (b >= 0xc7 && b <= 0xc9) {
        *what = "ext";
        return take(c, (size_t)1 << (b - 0xc7), &n) && skip_bytes(c, n + 1);
    }
    int map = (b >= 0x80 && b <= 0x8f) || b == 0xde || b == 0xdf;
    if (b >= 0x80 && b <= 0x9f)
        items = b & 0x0f;
    else if (b == 0xdc || b == 0xde) {
        if (!take(c, 2, &items))
            return 0;
    } else if (b == 0xdd || b == 0xdf) {
        if (!take(c, 4, &items))
            return 0;
    } else {
        return 0; /* 0xc1: never used */
    }
    *what = map ? "map" : "array";
    int inner_int;
    int64_t inner;
    const char *inner_what;
    for (uint64_t i = 0; i < (map ? 2 * items : items); i++)
        if (!peek_item(c, depth + 1, &inner_int, &inner, &inner_what))
            return 0;
    return 1;
}

int rlb_peek_envelope(const char *payload, size_t length, rlb_envelope *out, char *error) {
    memset(out, 0, sizeof *out);
    cursor c = {(const uint8_t *)payload, (const uint8_t *)payload + length};
    uint64_t items = 0;
    uint8_t b = length ? c.at[0] : 0;
    int header = b == 0x95 ? (c.at++, 1)
        : b == 0xdc ? (c.at++, take(&c, 2, &items) && items == 5)
        : b == 0xdd ? (c.at++, take(&c, 4, &items) && items == 5) : 0;
    int is_int[4];
    int64_t field[4] = {0};
    const char *kinds[4];
    for (int i = 0; header && i < 4; i++)
        header = peek_item(&c, 1, &is_int[i], &field[i], &kinds[i]);
    if (!header) {
        fail(error, "expected a msgpack envelope [version, type, seq, episode, body]; the first "
             "of %zu bytes do not start one", length);
        return RLB_MALFORMED;
    }
    out->body.type = MSGPACK_OBJECT_NIL;
    return check_header(is_int, field, kinds, out, error);
}

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

static int decode_array(const msgpack_object *entry, const void *const *frames,
                        const size_t *frame_sizes, size_t n_frames, rlb_array *out, char *error) {
    if (entry->type != MSGPACK_OBJECT_ARRAY || entry->via.array.size != 3) {
        fail(error, "an array must be [dtype, shape, data]");
        return RLB_BAD_FIELD;
    }
    const msgpack_object *f = entry->via.array.ptr;
    size_t itemsize = f[0].type == MSGPACK_OBJECT_STR
        ? rlb_dtype_size(f[0].via.str.ptr, f[0].via.str.size) : 0;
    if (itemsize == 0) {
        fail(error, "array dtype is not one of |b1 |i1 |u1 <i2 <u2 <i4 <u4 <i8 <u8 <f4 <f8");
        return RLB_BAD_FIELD;
    }
    memcpy(out->dtype, f[0].via.str.ptr, 3);
    out->dtype[3] = '\0';
    if (f[1].type != MSGPACK_OBJECT_ARRAY) {
        fail(error, "array shape must be a list of non-negative ints; got %s", rlb_kind_name(&f[1]));
        return RLB_BAD_FIELD;
    }
    if (f[1].via.array.size > RLB_MAX_DIMS) {
        fail(error, "an array has at most %d dimensions; got %u", RLB_MAX_DIMS,
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
            fail(error, "array shape must be a list of non-negative ints; got %s", rlb_kind_name(n));
            return RLB_BAD_FIELD;
        }
        out->shape[i] = n->via.u64;
        empty |= n->via.u64 == 0;
        if (n->via.u64 > 1 && extent > RLB_MAX_ARRAY_EXTENT_BYTES / n->via.u64) {
            fail(error, "array shape spans more than %llu bytes without its zero dimensions "
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
            fail(error, "array refers to frame %llu; the message has %zu extra frames",
                 (unsigned long long)f[2].via.u64, n_frames);
            return RLB_BAD_FIELD;
        }
        out->data = frames[f[2].via.u64];
        out->nbytes = frame_sizes[f[2].via.u64];
    } else {
        fail(error, "array data must be bin bytes or a frame index; got %s", rlb_kind_name(&f[2]));
        return RLB_BAD_FIELD;
    }
    if (out->nbytes != expected) {
        fail(error, "array %s needs %llu bytes; got %zu", out->dtype,
             (unsigned long long)expected, out->nbytes);
        return RLB_BAD_FIELD;
    }
    return RLB_OK;
}

int rlb_decode_value(const msgpack_object *raw, const void *const *frames,
                     const size_t *frame_sizes, size_t n_frames, rlb_value *out, char *error) {
    memset(out, 0, sizeof *out);
    if (raw->type != MSGPACK_OBJECT_ARRAY || raw->via.array.size != 4) {
        fail(error, "a value must be the array [ints, doubles, chars, arrays]; got %s", rlb_kind_name(raw));
        return RLB_BAD_FIELD;
    }
    const msgpack_object *f = raw->via.array.ptr;
    if (f[0].type != MSGPACK_OBJECT_ARRAY || f[1].type != MSGPACK_OBJECT_ARRAY
        || f[2].type != MSGPACK_OBJECT_STR) {
        fail(error, "a value's fields must be (array of ints, array of doubles, str); got "
             "(%s, %s, %s)", rlb_kind_name(&f[0]), rlb_kind_name(&f[1]), rlb_kind_name(&f[2]));
        return RLB_BAD_FIELD;
    }
    out->n_ints = f[0].via.array.size;
    out->n_doubles = f[1].via.array.size;
    out->ints = calloc(out->n_ints + 1, sizeof *out->ints);
    out->doubles = calloc(out->n_doubles + 1, sizeof *out->doubles);
    for (size_t i = 0; i < out->n_ints; i++) {
        if (!read_i64(&f[0].via.array.ptr[i], &out->ints[i])) {
            fail(error, "value ints must all be integers; got %s", rlb_kind_name(&f[0].via.array.ptr[i]));
            rlb_value_free(out);
            return RLB_BAD_FIELD;
        }
    }
    for (size_t i = 0; i < out->n_doubles; i++) {
        const msgpack_object *d = &f[1].via.array.ptr[i];
        int64_t whole;
        if (d->type == MSGPACK_OBJECT_FLOAT64 || d->type == MSGPACK_OBJECT_FLOAT32)
            out->doubles[i] = d->via.f64;
        else if (read_i64(d, &whole))
            out->doubles[i] = (double)whole;
        else {
            fail(error, "value doubles must all be numbers; got %s", rlb_kind_name(d));
            rlb_value_free(out);
            return RLB_BAD_FIELD;
        }
    }
    out->chars = f[2].via.str.ptr;
    out->n_chars = f[2].via.str.size;
    if (f[3].type == MSGPACK_OBJECT_NIL)
        return RLB_OK;
    if (f[3].type != MSGPACK_OBJECT_ARRAY) {
        fail(error, "value arrays must be an array; got %s", rlb_kind_name(&f[3]));
        rlb_value_free(out);
        return RLB_BAD_FIELD;
    }
    out->n_arrays = f[3].via.array.size;
    out->arrays = calloc(out->n_arrays + 1, sizeof *out->arrays);
    for (size_t i = 0; i < out->n_arrays; i++) {
        int code = decode_array(&f[3].via.array.ptr[i], frames, frame_sizes, n_frames,
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
    if (read_i64(raw, &whole)) {
        *out = (double)whole;
        return RLB_OK;
    }
    fail(error, "reward must be a float; got %s", rlb_kind_name(raw));
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
    for (size_t i = 0; i < value->n_arrays; i++) {
        const rlb_array *array = &value->arrays[i];
        msgpack_pack_array(pk, 3);
        msgpack_pack_str(pk, 3);
        msgpack_pack_str_body(pk, array->dtype, 3);
        msgpack_pack_array(pk, array->ndim);
        for (size_t d = 0; d < array->ndim; d++)
            msgpack_pack_uint64(pk, array->shape[d]);
        if (frames != NULL && array->nbytes >= RLB_ZERO_COPY_THRESHOLD_BYTES
            && *n_frames < max_frames) {
            frames[*n_frames] = array;
            msgpack_pack_uint64(pk, *n_frames);
            (*n_frames)++;
        } else {
            msgpack_pack_bin(pk, array->nbytes);
            msgpack_pack_bin_body(pk, array->data, array->nbytes);
        }
    }
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
        fail(error, "task spec has no ACTIONS section: %.200s", text);
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
                fail(error, "task spec has a malformed ACTIONS INTS range near: %.40s", cursor);
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

/* ---- command line ------------------------------------------------------------------------ */

/* The default ipc directory sits in a shared temporary directory: had another user created it
 * first, they could swap our socket for theirs. Ours, a directory, and closed to others. */
static int check_private_directory(const char *directory) {
    struct stat info;
    if (lstat(directory, &info) != 0 || !S_ISDIR(info.st_mode)) {
        fprintf(stderr, "rlbridge agent: %s must be a directory owned by uid %u; it is a link, a "
                "file or missing\n", directory, (unsigned)getuid());
        return -1;
    }
    if (info.st_uid != getuid()) {
        fprintf(stderr, "rlbridge agent: %s must be owned by uid %u, but uid %u owns it: refusing "
                "to bind sockets inside it\n", directory, (unsigned)getuid(),
                (unsigned)info.st_uid);
        return -1;
    }
    if (info.st_mode & 022) {
        fprintf(stderr, "rlbridge agent: %s must have mode 0700 (no group or other access), but "
                "has %04o, writable by others: check its contents, then chmod 700 it\n",
                directory, (unsigned)(info.st_mode & 07777));
        return -1;
    }
    if (info.st_mode & 077)
        chmod(directory, 0700); /* readable only: nobody else can have put a socket in it */
    return 0;
}

static int is_loopback_tcp(const char *address) {
    if (strncmp(address, "tcp://", 6) != 0)
        return 1; /* ipc:// and inproc:// never leave the machine */
    const char *host = address + 6;
    return strncmp(host, "127.", 4) == 0 || strncmp(host, "localhost:", 10) == 0
        || strncmp(host, "[::1]:", 6) == 0;
}

int rlb_parse_args(int argc, char **argv, rlb_options *options, char *address_buffer,
                   size_t address_size,
                   int (*opt_callback)(void *state, const char *key, const char *value),
                   void *state) {
    memset(options, 0, sizeof *options);
    const char *address = NULL;
    int no_curve = 0;
    options->curve_dir = getenv("RLBRIDGE_CURVE_DIR");
    if (options->curve_dir != NULL && options->curve_dir[0] == '\0')
        options->curve_dir = NULL;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        const char *next = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(arg, "--no-curve") == 0) {
            no_curve = 1;
            continue;
        }
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0)
            goto usage;
        if (next == NULL)
            goto usage;
        if (strcmp(arg, "--bind") == 0) {
            address = next;
        } else if (strcmp(arg, "--connect") == 0) {
            address = next;
            options->connect = 1;
        } else if (strcmp(arg, "--curve-dir") == 0) {
            options->curve_dir = next;
        } else if (strcmp(arg, "--idle-timeout-ms") == 0) {
            options->idle_timeout_ms = atol(next);
        } else if (strcmp(arg, "--max-message-bytes") == 0) {
            options->max_message_bytes = (size_t)atoll(next);
        } else if (strcmp(arg, "--opt") == 0) {
            char pair[512];
            snprintf(pair, sizeof pair, "%s", next);
            char *equals = strchr(pair, '=');
            if (equals == NULL || equals == pair) {
                fprintf(stderr, "--opt takes key=value; got '%s'\n", next);
                return 2;
            }
            *equals = '\0';
            if (opt_callback == NULL || opt_callback(state, pair, equals + 1) != 0) {
                fprintf(stderr, "unknown option --opt %s\n", next);
                return 2;
            }
        } else {
            goto usage;
        }
        i++;
    }
    if (address == NULL)
        address = getenv("RLBRIDGE_AGENT_ADDR");
    if (address == NULL || address[0] == '\0') {
        const char *tmp = getenv("TMPDIR");
        char directory[900];
        snprintf(directory, sizeof directory, "%s/rlbridge-%u", tmp && tmp[0] ? tmp : "/tmp",
                 (unsigned)getuid());
        mkdir(directory, 0700);
        if (check_private_directory(directory) != 0)
            return 2;
        snprintf(address_buffer, address_size, "ipc://%s/agent.sock", directory);
    } else {
        snprintf(address_buffer, address_size, "%s", address);
    }
    options->address = address_buffer;
    if (no_curve)
        options->curve_dir = NULL;
    else if (!options->connect && !is_loopback_tcp(address_buffer) && options->curve_dir == NULL) {
        fprintf(stderr, "rlbridge agent: binding %s (not loopback) needs CURVE keys: run "
                "`rlbridge keys DIR` and pass --curve-dir DIR (or set RLBRIDGE_CURVE_DIR), or "
                "pass --no-curve to accept anyone\n", address_buffer);
        return 2;
    }
    return 0;
usage:
    fprintf(stderr, "usage: %s [--bind ADDR | --connect ADDR] [--curve-dir DIR | --no-curve] "
            "[--idle-timeout-ms N] [--max-message-bytes N] [--opt KEY=VALUE]...\n", argv[0]);
    return 2;
}
