/* A small JSON reader for the tests (enough for vectors.json: no \u escapes beyond ASCII). */
#include "json.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *p;
    msgpack_zone *zone;
} reader;

static void skip(reader *r) {
    while (*r->p == ' ' || *r->p == '\n' || *r->p == '\t' || *r->p == '\r')
        r->p++;
}

static int value(reader *r, msgpack_object *out);

static int string(reader *r, msgpack_object *out) {
    r->p++; /* opening quote */
    size_t capacity = strlen(r->p) + 1;
    char *buffer = msgpack_zone_malloc(r->zone, capacity);
    size_t n = 0;
    while (*r->p && *r->p != '"') {
        char c = *r->p++;
        if (c == '\\') {
            char e = *r->p++;
            switch (e) {
            case 'n': c = '\n'; break;
            case 't': c = '\t'; break;
            case 'r': c = '\r'; break;
            case 'b': c = '\b'; break;
            case 'f': c = '\f'; break;
            case 'u': c = (char)strtol((char[]){r->p[0], r->p[1], r->p[2], r->p[3], 0}, NULL, 16);
                      r->p += 4; break;
            default: c = e;
            }
        }
        buffer[n++] = c;
    }
    if (*r->p != '"')
        return -1;
    r->p++;
    out->type = MSGPACK_OBJECT_STR;
    out->via.str.ptr = buffer;
    out->via.str.size = (uint32_t)n;
    return 0;
}

static int sequence(reader *r, msgpack_object *out, int is_map) {
    char close = is_map ? '}' : ']';
    r->p++;
    size_t capacity = 8, n = 0;
    msgpack_object *items = malloc(capacity * sizeof *items * 2);
    skip(r);
    while (*r->p != close) {
        if (n * 2 + 2 > capacity * 2) {
            capacity *= 2;
            items = realloc(items, capacity * sizeof *items * 2);
        }
        if (is_map) {
            skip(r);
            if (string(r, &items[2 * n]) != 0)
                return -1;
            skip(r);
            if (*r->p++ != ':')
                return -1;
            if (value(r, &items[2 * n + 1]) != 0)
                return -1;
        } else if (value(r, &items[n]) != 0) {
            return -1;
        }
        n++;
        skip(r);
        if (*r->p == ',')
            r->p++;
        skip(r);
    }
    r->p++;
    size_t count = is_map ? 2 * n : n;
    void *kept = msgpack_zone_malloc(r->zone, count * sizeof *items + 1);
    memcpy(kept, items, count * sizeof *items);
    free(items);
    if (is_map) {
        out->type = MSGPACK_OBJECT_MAP;
        out->via.map.size = (uint32_t)n;
        out->via.map.ptr = kept;
        /* msgpack_object_kv is {key, val}: the same layout as two objects in a row. */
    } else {
        out->type = MSGPACK_OBJECT_ARRAY;
        out->via.array.size = (uint32_t)n;
        out->via.array.ptr = kept;
    }
    return 0;
}

static int value(reader *r, msgpack_object *out) {
    skip(r);
    char c = *r->p;
    if (c == '{')
        return sequence(r, out, 1);
    if (c == '[')
        return sequence(r, out, 0);
    if (c == '"')
        return string(r, out);
    if (strncmp(r->p, "null", 4) == 0) {
        out->type = MSGPACK_OBJECT_NIL;
        r->p += 4;
        return 0;
    }
    if (strncmp(r->p, "true", 4) == 0 || strncmp(r->p, "false", 5) == 0) {
        out->type = MSGPACK_OBJECT_BOOLEAN;
        out->via.boolean = c == 't';
        r->p += c == 't' ? 4 : 5;
        return 0;
    }
    const char *start = r->p;
    int is_float = 0;
    while (*r->p && strchr("+-0123456789.eE", *r->p)) {
        if (strchr(".eE", *r->p))
            is_float = 1;
        r->p++;
    }
    if (r->p == start)
        return -1;
    if (is_float) {
        out->type = MSGPACK_OBJECT_FLOAT64;
        out->via.f64 = strtod(start, NULL);
    } else if (*start == '-') {
        out->type = MSGPACK_OBJECT_NEGATIVE_INTEGER;
        out->via.i64 = strtoll(start, NULL, 10);
        if (out->via.i64 >= 0) {
            out->type = MSGPACK_OBJECT_POSITIVE_INTEGER;
            out->via.u64 = (uint64_t)out->via.i64;
        }
    } else {
        out->type = MSGPACK_OBJECT_POSITIVE_INTEGER;
        out->via.u64 = strtoull(start, NULL, 10);
    }
    return 0;
}

int json_parse(const char *text, msgpack_zone *zone, msgpack_object *out) {
    reader r = {text, zone};
    return value(&r, out);
}

const msgpack_object *json_get(const msgpack_object *map, const char *key) {
    if (map == NULL || map->type != MSGPACK_OBJECT_MAP)
        return NULL;
    size_t length = strlen(key);
    for (uint32_t i = 0; i < map->via.map.size; i++) {
        const msgpack_object *k = &map->via.map.ptr[i].key;
        if (k->via.str.size == length && memcmp(k->via.str.ptr, key, length) == 0)
            return &map->via.map.ptr[i].val;
    }
    return NULL;
}
