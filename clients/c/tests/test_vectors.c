/* Conformance of the C codec with PROTOCOL.md's test vectors (rlbridge/protocol/vectors.json):
 * every vector's bytes decode into its fields, and its fields encode into the same bytes.
 * Usage: test_vectors PATH/vectors.json. Prints "N passed, N failed". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "rlbridge_agent.h"
#include "vectors.h"

int failures = 0, passes = 0;
char current[128];

void check(int ok, const char *what) {
    if (!ok) {
        printf("FAIL %s: %s\n", current, what);
        failures++;
    }
}

double number(const msgpack_object *o) {
    if (o->type == MSGPACK_OBJECT_FLOAT64 || o->type == MSGPACK_OBJECT_FLOAT32)
        return o->via.f64;
    if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
        return (double)o->via.i64;
    return (double)o->via.u64;
}

uint8_t *from_hex(const msgpack_object *hex, size_t *length) {
    *length = hex->via.str.size / 2;
    uint8_t *out = malloc(*length + 1);
    for (size_t i = 0; i < *length; i++) {
        char pair[3] = {hex->via.str.ptr[2 * i], hex->via.str.ptr[2 * i + 1], 0};
        out[i] = (uint8_t)strtoul(pair, NULL, 16);
    }
    return out;
}

void array_from_fields(const msgpack_object *fields, rlb_array *array, uint8_t **owned) {
    const msgpack_object *dtype = json_get(fields, "dtype"), *shape = json_get(fields, "shape");
    memset(array, 0, sizeof *array);
    memcpy(array->dtype, dtype->via.str.ptr, 3);
    array->ndim = shape->via.array.size;
    size_t count = 1;
    for (size_t d = 0; d < array->ndim; d++) {
        array->shape[d] = shape->via.array.ptr[d].via.u64;
        count *= array->shape[d];
    }
    const msgpack_object *hex = json_get(fields, "data_hex");
    if (hex != NULL) {
        *owned = from_hex(hex, &array->nbytes);
    } else { /* "data_rule": "byte i is i mod 256" */
        array->nbytes = count * rlb_dtype_size(array->dtype, 3);
        *owned = malloc(array->nbytes + 1);
        for (size_t b = 0; b < array->nbytes; b++)
            (*owned)[b] = (uint8_t)(b % 256);
    }
    array->data = *owned;
}

/* Build an rlb_value from a vector's value fields; array bytes are malloc'ed into *owned. */
void value_from_fields(const msgpack_object *fields, rlb_value *value, uint8_t **owned) {
    const msgpack_object *ints = json_get(fields, "ints"), *doubles = json_get(fields, "doubles");
    const msgpack_object *chars = json_get(fields, "chars"), *arrays = json_get(fields, "arrays");
    memset(value, 0, sizeof *value);
    value->n_ints = ints->via.array.size;
    value->ints = calloc(value->n_ints + 1, sizeof *value->ints);
    for (size_t i = 0; i < value->n_ints; i++)
        value->ints[i] = (int64_t)number(&ints->via.array.ptr[i]);
    value->n_doubles = doubles->via.array.size;
    value->doubles = calloc(value->n_doubles + 1, sizeof *value->doubles);
    for (size_t i = 0; i < value->n_doubles; i++)
        value->doubles[i] = number(&doubles->via.array.ptr[i]);
    value->chars = chars->via.str.ptr;
    value->n_chars = chars->via.str.size;
    value->n_arrays = arrays->via.array.size;
    value->arrays = calloc(value->n_arrays + 1, sizeof *value->arrays);
    for (size_t i = 0; i < value->n_arrays; i++)
        array_from_fields(&arrays->via.array.ptr[i], &value->arrays[i], &owned[i]);
}

int same_value(const rlb_value *a, const rlb_value *b) {
    if (a->n_ints != b->n_ints || a->n_doubles != b->n_doubles || a->n_chars != b->n_chars
        || a->n_arrays != b->n_arrays)
        return 0;
    if ((a->n_ints && memcmp(a->ints, b->ints, a->n_ints * sizeof *a->ints) != 0)
        || (a->n_doubles && memcmp(a->doubles, b->doubles, a->n_doubles * sizeof *a->doubles))
        || (a->n_chars && memcmp(a->chars, b->chars, a->n_chars) != 0))
        return 0;
    for (size_t i = 0; i < a->n_arrays; i++) {
        const rlb_array *x = &a->arrays[i], *y = &b->arrays[i];
        if (strcmp(x->dtype, y->dtype) != 0 || x->ndim != y->ndim || x->nbytes != y->nbytes
            || memcmp(x->shape, y->shape, x->ndim * sizeof x->shape[0]) != 0
            || memcmp(x->data, y->data, x->nbytes) != 0)
            return 0;
    }
    return 1;
}

/* PROTOCOL.md's bodies: one field travels bare, several as an array in the fields' order. */
/* "answer": a query's reply whole (PROTOCOL.md section 15). */
static const char *BARE_FIELDS[] = {"task_spec", "text", "reason", "reward", "observation",
                                    "action", "answer", NULL};
static const char *VALUE_FIELDS[] = {"observation", "action", "last_action", NULL};
static const char *FLOAT_FIELDS[] = {"reward", "total_reward", NULL};

int named(const msgpack_object *key, const char **names) {
    for (int i = 0; names[i] != NULL; i++)
        if (key->via.str.size == strlen(names[i])
            && memcmp(key->via.str.ptr, names[i], key->via.str.size) == 0)
            return 1;
    return 0;
}

static int bare_body(const msgpack_object *fields) {
    return fields->via.map.size == 1 && named(&fields->via.map.ptr[0].key, BARE_FIELDS);
}

/* Encode one field: values as [ints, doubles, chars, arrays], floats as float64. */
static void pack_field(msgpack_packer *pk, const msgpack_object_kv *field, rlb_value *value,
                       const rlb_array **frames, size_t *n_frames) {
    if (named(&field->key, VALUE_FIELDS) && field->val.type != MSGPACK_OBJECT_NIL)
        rlb_pack_value(pk, value, frames, n_frames, 8);
    else if (named(&field->key, FLOAT_FIELDS))
        msgpack_pack_double(pk, number(&field->val));
    else
        msgpack_pack_object(pk, field->val);
}

static void pack_body(msgpack_packer *pk, const msgpack_object *fields, rlb_value *value,
                      const rlb_array **frames, size_t *n_frames) {
    if (fields->via.map.size == 0) {
        msgpack_pack_nil(pk);
        return;
    }
    if (!bare_body(fields))
        msgpack_pack_array(pk, fields->via.map.size);
    for (uint32_t i = 0; i < fields->via.map.size; i++)
        pack_field(pk, &fields->via.map.ptr[i], value, frames, n_frames);
}

/* Decode one field and compare it with the vector. */
static void check_field(const msgpack_object *raw, const msgpack_object_kv *field,
                        const rlb_value *expected, const void *const *frames,
                        const size_t *frame_sizes, size_t n_frames) {
    char error[RLB_ERROR_TEXT_BYTES];
    if (named(&field->key, VALUE_FIELDS) && field->val.type != MSGPACK_OBJECT_NIL) {
        rlb_value got;
        int code = rlb_decode_value(raw, frames, frame_sizes, n_frames, &got, error);
        check(code == RLB_OK, error);
        if (code == RLB_OK) {
            check(same_value(&got, expected), "value decodes into the fields");
            rlb_value_free(&got);
        }
    } else if (named(&field->key, FLOAT_FIELDS)) {
        double got;
        check(rlb_read_reward(raw, &got, error) == RLB_OK && got == number(&field->val),
              "float field decodes");
    } else {
        check(msgpack_object_equal(*raw, field->val), "field decodes");
    }
}

static void check_decoded(const rlb_envelope *message, const msgpack_object *fields,
                          const rlb_value *expected, const void *const *frames,
                          const size_t *frame_sizes, size_t n_frames) {
    const msgpack_object *body = &message->body;
    if (fields->via.map.size == 0) {
        check(body->type == MSGPACK_OBJECT_NIL, "empty body decodes as nil");
    } else if (bare_body(fields)) {
        check_field(body, &fields->via.map.ptr[0], expected, frames, frame_sizes, n_frames);
    } else if (body->type != MSGPACK_OBJECT_ARRAY
               || body->via.array.size != fields->via.map.size) {
        check(0, "body is an array with one item per field");
    } else {
        for (uint32_t i = 0; i < fields->via.map.size; i++)
            check_field(&body->via.array.ptr[i], &fields->via.map.ptr[i], expected, frames,
                        frame_sizes, n_frames);
    }
}

static void run_message(const msgpack_object *v) {
    const msgpack_object *name = json_get(v, "name"), *fields = json_get(v, "fields");
    snprintf(current, sizeof current, "%.*s", (int)name->via.str.size, name->via.str.ptr);
    int before = failures;
    size_t length;
    uint8_t *bytes = from_hex(json_get(v, "hex"), &length);
    int type = (int)json_get(v, "type")->via.u64;

    /* the fields, as a value where the body has one */
    const msgpack_object *value_fields = NULL;
    for (int i = 0; VALUE_FIELDS[i] != NULL && value_fields == NULL; i++) {
        value_fields = json_get(fields, VALUE_FIELDS[i]);
        if (value_fields != NULL && value_fields->type != MSGPACK_OBJECT_MAP)
            value_fields = NULL;
    }
    rlb_value value = {0};
    uint8_t *owned[8] = {0};
    if (value_fields != NULL)
        value_from_fields(value_fields, &value, owned);

    /* encode */
    msgpack_sbuffer buffer;
    msgpack_packer pk;
    msgpack_sbuffer_init(&buffer);
    msgpack_packer_init(&pk, &buffer, msgpack_sbuffer_write);
    rlb_pack_header(&pk, type, (int64_t)json_get(v, "seq")->via.u64,
                    (int64_t)json_get(v, "episode")->via.u64);
    const rlb_array *frames[8];
    size_t n_frames = 0;
    pack_body(&pk, fields, &value, frames, &n_frames);
    check(buffer.size == length && memcmp(buffer.data, bytes, length) == 0,
          "fields encode into the vector's bytes");
    const msgpack_object *want_frames = json_get(v, "frames");
    check(n_frames == want_frames->via.array.size, "number of extra frames");
    for (size_t i = 0; i < n_frames && i < want_frames->via.array.size; i++)
        check(frames[i]->nbytes == json_get(&want_frames->via.array.ptr[i], "length")->via.u64,
              "extra frame length");

    /* decode */
    msgpack_unpacked root;
    msgpack_unpacked_init(&root);
    rlb_envelope message;
    char error[RLB_ERROR_TEXT_BYTES];
    int code = rlb_decode_message((const char *)bytes, length, &root, &message, error);
    check(code == RLB_OK, error);
    if (code == RLB_OK) {
        check(message.version == RLB_PROTOCOL_VERSION && message.type == type
              && message.seq == (int64_t)json_get(v, "seq")->via.u64
              && message.episode == (int64_t)json_get(v, "episode")->via.u64, "header decodes");
        const void *frame_data[8];
        size_t frame_sizes[8];
        for (size_t i = 0; i < n_frames; i++) {
            frame_data[i] = frames[i]->data;
            frame_sizes[i] = frames[i]->nbytes;
        }
        check_decoded(&message, fields, &value, frame_data, frame_sizes, n_frames);
    }
    msgpack_unpacked_destroy(&root);
    msgpack_sbuffer_destroy(&buffer);
    for (int i = 0; i < 8; i++)
        free(owned[i]);
    if (value_fields != NULL)
        rlb_value_free(&value);
    free(bytes);
    if (failures == before)
        passes++;
}

static void run_invalid(const msgpack_object *v) {
    const msgpack_object *name = json_get(v, "name");
    snprintf(current, sizeof current, "invalid/%.*s", (int)name->via.str.size, name->via.str.ptr);
    size_t length;
    uint8_t *bytes = from_hex(json_get(v, "hex"), &length);
    msgpack_unpacked root;
    msgpack_unpacked_init(&root);
    rlb_envelope message;
    char error[RLB_ERROR_TEXT_BYTES] = "";
    int code = rlb_decode_message((const char *)bytes, length, &root, &message, error);
    int want = (int)json_get(v, "error_code")->via.u64;
    char text[RLB_ERROR_TEXT_BYTES + 64];
    snprintf(text, sizeof text, "expected error %s, got %s (%s)", rlb_error_name(want),
             rlb_error_name(code), error);
    int before = failures;
    check(code == want, text);
    if (failures == before)
        passes++;
    msgpack_unpacked_destroy(&root);
    free(bytes);
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "../../rlbridge/protocol/vectors.json";
    FILE *file = fopen(path, "rb");
    if (file == NULL) {
        perror(path);
        return 2;
    }
    fseek(file, 0, SEEK_END);
    long size = ftell(file);
    fseek(file, 0, SEEK_SET);
    char *text = calloc(1, (size_t)size + 1);
    if (fread(text, 1, (size_t)size, file) != (size_t)size)
        return 2;
    fclose(file);
    msgpack_zone zone;
    msgpack_zone_init(&zone, 4096);
    msgpack_object root;
    if (json_parse(text, &zone, &root) != 0) {
        fprintf(stderr, "%s: not JSON\n", path);
        return 2;
    }
    const msgpack_object *messages = json_get(&root, "messages");
    const msgpack_object *invalid = json_get(&root, "invalid");
    for (uint32_t i = 0; i < messages->via.array.size; i++)
        run_message(&messages->via.array.ptr[i]);
    for (uint32_t i = 0; i < invalid->via.array.size; i++)
        run_invalid(&invalid->via.array.ptr[i]);
    run_batch_vectors(json_get(&root, "batch"));
    printf("%d passed, %d failed\n", passes, failures);
    msgpack_zone_destroy(&zone);
    free(text);
    return failures ? 1 : 0;
}
