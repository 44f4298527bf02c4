/* A small JSON reader for the tests: parses text into a msgpack_object tree held in a zone. */
#ifndef RLB_TEST_JSON_H
#define RLB_TEST_JSON_H
#include <msgpack.h>

/* Numbers with a '.' or an exponent become FLOAT64, others integers. Returns 0 on success. */
int json_parse(const char *text, msgpack_zone *zone, msgpack_object *out);
/* The member `key` of a map, or NULL. */
const msgpack_object *json_get(const msgpack_object *map, const char *key);
#endif
