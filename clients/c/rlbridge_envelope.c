/* The envelope of PROTOCOL.md in C: names of types and codes, and the checks of a request's first
 * frame, decoded whole or, for a message too large to decode, read from its first bytes. */
#define _POSIX_C_SOURCE 200809L
#include "rlbridge_agent.h"
#include "rlbridge_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void rlb_fail(char *error, const char *format, ...) {
    va_list args;
    va_start(args, format);
    vsnprintf(error, RLB_ERROR_TEXT_BYTES, format, args);
    va_end(args);
}

size_t rlb_utf8_prefix(const char *text, size_t size, size_t max_chars) {
    size_t at = 0;
    for (size_t chars = 0; at < size && chars < max_chars; chars++)
        /* one character: its first byte, then any continuation bytes (10xxxxxx) */
        for (at++; at < size && ((unsigned char)text[at] & 0xC0) == 0x80; at++)
            ;
    return at;
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
    case RLB_ENV_BATCH_INIT: return "ENV_BATCH_INIT";
    case RLB_ENV_BATCH_STEP: return "ENV_BATCH_STEP";
    case RLB_ENV_QUERY: return "ENV_QUERY";
    case RLB_AGENT_INIT: return "AGENT_INIT";
    case RLB_AGENT_START: return "AGENT_START";
    case RLB_AGENT_STEP: return "AGENT_STEP";
    case RLB_AGENT_END: return "AGENT_END";
    case RLB_AGENT_CLEANUP: return "AGENT_CLEANUP";
    case RLB_AGENT_MESSAGE: return "AGENT_MESSAGE";
    case RLB_AGENT_BATCH_INIT: return "AGENT_BATCH_INIT";
    case RLB_AGENT_BATCH_STEP: return "AGENT_BATCH_STEP";
    case RLB_AGENT_QUERY: return "AGENT_QUERY";
    case RLB_RUN_EPISODE: return "RUN_EPISODE";
    case RLB_DELEGATE: return "DELEGATE";
    case RLB_RUN_BATCH: return "RUN_BATCH";
    default: return NULL;
    }
}

const char *rlb_error_name(int code) {
    static const char *names[] = {"OK", "MALFORMED", "UNKNOWN_TYPE", "BAD_FIELD", "TOO_LARGE",
                                  "VERSION_MISMATCH", "INVALID_ACTION", "WRONG_STATE",
                                  "PEER_TIMEOUT", "PEER_ERROR", "APPLICATION", "SHUTDOWN"};
    return code >= 0 && code <= 11 ? names[code] : "UNKNOWN";
}

int rlb_read_i64(const msgpack_object *o, int64_t *out) {
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
        rlb_fail(error, "envelope fields version, type, seq and episode must be integers; got "
             "(%s, %s, %s, %s)", kinds[0], kinds[1], kinds[2], kinds[3]);
        return RLB_BAD_FIELD;
    }
    int64_t version = field[0], type = field[1];
    if (version != RLB_PROTOCOL_VERSION) {
        char got[24];
        snprintf(got, sizeof got, "%lld", (long long)version);
        rlb_fail(error, RLB_VERSION_MISMATCH_TEXT, RLB_PROTOCOL_VERSION, got, "",
                 RLB_PROTOCOL_VERSION);
        return RLB_VERSION_MISMATCH;
    }
    if (type < 0 || type > 255 || rlb_type_name((int)type) == NULL) {
        rlb_fail(error, "unknown message type %lld; expected one of HELLO=1, ERROR=2, HEARTBEAT=3, "
             "SHUTDOWN=4, ENV_INIT=10..ENV_QUERY=17, AGENT_INIT=20..AGENT_QUERY=28, "
             "RUN_EPISODE=30, DELEGATE=31, RUN_BATCH=32", (long long)type);
        return RLB_UNKNOWN_TYPE;
    }
    out->version = (int)version;
    out->type = (int)type;
    return RLB_OK;
}

static int not_an_envelope(const msgpack_object *root, char *error) {
    if (root->type == MSGPACK_OBJECT_ARRAY)
        rlb_fail(error, "expected a msgpack envelope [version, type, seq, episode, body]; got an "
             "array of %u items", root->via.array.size);
    else
        rlb_fail(error, "expected a msgpack envelope [version, type, seq, episode, body]; got %s",
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
        is_int[i] = rlb_read_i64(&f[i], &field[i]);
        kinds[i] = rlb_kind_name(&f[i]);
    }
    out->body = f[4];
    return check_header(is_int, field, kinds, out, error);
}

/* msgpack-c's MSGPACK_EMBED_STACK_SIZE: it reads this many nested arrays and maps, and says NOMEM
 * past them. */
#define MSGPACK_C_MAX_DEPTH 32

/* Nested deeper than msgpack-c reads: the header is read from the bytes instead, so that the
 * reply echoes seq and episode as other receivers' replies do (PROTOCOL.md section 5): its own
 * error when a header field is wrong, else MALFORMED for the body. */
static int too_deep(const char *payload, size_t length, rlb_envelope *out, char *error) {
    int code = rlb_peek_envelope(payload, length, out, error);
    if (code != RLB_OK)
        return code;
    rlb_fail(error, "expected a msgpack envelope [version, type, seq, episode, body]; could not "
         "decode %zu bytes: the body nests arrays or maps more than %d deep", length,
         MSGPACK_C_MAX_DEPTH);
    return RLB_MALFORMED;
}

int rlb_decode_message(const char *payload, size_t length, msgpack_unpacked *root,
                       rlb_envelope *out, char *error) {
    size_t offset = 0;
    memset(out, 0, sizeof *out);
    int status = msgpack_unpack_next(root, payload, length, &offset);
    if (status == MSGPACK_UNPACK_NOMEM_ERROR)
        return too_deep(payload, length, out, error);
    if (status != MSGPACK_UNPACK_SUCCESS || offset != length) {
        rlb_fail(error, "expected a msgpack envelope [version, type, seq, episode, body]; could not "
             "decode %zu bytes", length);
        return RLB_MALFORMED;
    }
    return rlb_decode_envelope(&root->data, out, error);
}

/* ---- reading an envelope's first items from its bytes -------------------------------------- */

/* Deeper than any msgpack reader of the project goes (Python's reads 1024 levels). */
#define PEEK_MAX_DEPTH 1100

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
        rlb_fail(error, "expected a msgpack envelope [version, type, seq, episode, body]; the first "
             "of %zu bytes do not start one", length);
        return RLB_MALFORMED;
    }
    out->body.type = MSGPACK_OBJECT_NIL;
    return check_header(is_int, field, kinds, out, error);
}
