/* What the bench instruments share: an embedded interpreter's values to and from the
 * library's, and a pending Python exception as the library's error text. */
#ifndef RLBRIDGE_BENCH_EMBED_H
#define RLBRIDGE_BENCH_EMBED_H

#include <Python.h>

#include "rlbridge_agent.h"

#define EMBED_MAX_NUMBERS 64

/* The storage a value read from Python points into; its chars point into the Python string,
 * which must outlive the value's use. */
typedef struct {
    int64_t ints[EMBED_MAX_NUMBERS];
    double doubles[EMBED_MAX_NUMBERS];
} embed_numbers;

/* Write the pending Python exception into `error` (RLB_ERROR_TEXT_BYTES) and clear it; 1. */
int embed_failed(char *error);
/* module_name.name, or NULL with an exception set. */
PyObject *embed_attribute(const char *module_name, const char *name);
/* object.name(argument): a tuple argument (a Value is one) stays one argument. */
PyObject *embed_call_method(PyObject *object, const char *name, PyObject *argument);
/* rlbridge's Value(ints, doubles, chars, ()) of a value without arrays, built as rlbridge's
 * decoders build one; NULL with an exception set. */
PyObject *embed_to_python(PyObject *value_type, const rlb_value *value);
/* The ints, doubles and chars of a Python Value (a 4-tuple), into `out`; 0, or 1 after
 * writing why into `error`. */
int embed_from_python(PyObject *value, embed_numbers *numbers, rlb_value *out, char *error);
/* `module:Class` built with keyword arguments from KEY=INT words; NULL with an exception. */
PyObject *embed_construct(const char *spec, char **keywords, int n_keywords);

#endif
