/* What the vector tests share: test_vectors.c (PROTOCOL.md section 15's messages) and
 * batch_vectors.c (the batched vectors of section 16). */
#ifndef RLB_TEST_VECTORS_H
#define RLB_TEST_VECTORS_H
#include <stdint.h>

#include "rlbridge_agent.h"

extern int failures, passes;
extern char current[128];

/* Count a failure, printed with the current vector's name, unless `ok`. */
void check(int ok, const char *what);
double number(const msgpack_object *o);
uint8_t *from_hex(const msgpack_object *hex, size_t *length);
/* An array {dtype, shape, data_hex | data_rule}; its bytes are malloc'ed into *owned. */
void array_from_fields(const msgpack_object *fields, rlb_array *array, uint8_t **owned);
/* A value {ints, doubles, chars, arrays}; owned takes one buffer per array (at most 8). */
void value_from_fields(const msgpack_object *fields, rlb_value *value, uint8_t **owned);
int same_value(const rlb_value *a, const rlb_value *b);
int named(const msgpack_object *key, const char **names);

/* The "batch" key of vectors.json: messages, invalid_agent and instance_seeds. */
void run_batch_vectors(const msgpack_object *batch);
#endif
