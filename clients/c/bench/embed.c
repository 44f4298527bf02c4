/* Conversions between an embedded interpreter's values and the library's (embed.h). */
#include "embed.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int embed_failed(char *error) {
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    PyObject *text = value ? PyObject_Str(value) : NULL;
    const char *utf8 = text ? PyUnicode_AsUTF8(text) : NULL;
    snprintf(error, RLB_ERROR_TEXT_BYTES, "python raised %s: %s",
             type ? ((PyTypeObject *)type)->tp_name : "an error", utf8 ? utf8 : "?");
    Py_XDECREF(text);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(traceback);
    PyErr_Clear();
    return 1;
}

PyObject *embed_attribute(const char *module_name, const char *name) {
    PyObject *module = PyImport_ImportModule(module_name);
    PyObject *found = module ? PyObject_GetAttrString(module, name) : NULL;
    Py_XDECREF(module);
    return found;
}

PyObject *embed_call_method(PyObject *object, const char *name, PyObject *argument) {
    PyObject *method = PyObject_GetAttrString(object, name);
    PyObject *result = method ? PyObject_CallOneArg(method, argument) : NULL;
    Py_XDECREF(method);
    return result;
}

PyObject *embed_to_python(PyObject *value_type, const rlb_value *value) {
    if (value->n_arrays)
        return PyErr_Format(PyExc_ValueError, "the bench instruments carry no arrays");
    PyObject *ints = PyTuple_New((Py_ssize_t)value->n_ints);
    PyObject *doubles = PyTuple_New((Py_ssize_t)value->n_doubles);
    PyObject *chars = PyUnicode_FromStringAndSize(value->chars ? value->chars : "",
                                                  (Py_ssize_t)value->n_chars);
    PyObject *arrays = PyTuple_New(0);
    PyObject *fields = NULL, *result = NULL;
    if (ints && doubles && chars && arrays) {
        for (size_t i = 0; i < value->n_ints; i++)
            PyTuple_SET_ITEM(ints, i, PyLong_FromLongLong(value->ints[i]));
        for (size_t i = 0; i < value->n_doubles; i++)
            PyTuple_SET_ITEM(doubles, i, PyFloat_FromDouble(value->doubles[i]));
        fields = PyTuple_Pack(4, ints, doubles, chars, arrays);
    }
    if (fields) {  /* tuple.__new__(Value, fields) */
        PyObject *args = PyTuple_Pack(1, fields);
        result = args ? PyTuple_Type.tp_new((PyTypeObject *)value_type, args, NULL) : NULL;
        Py_XDECREF(args);
    }
    Py_XDECREF(ints);
    Py_XDECREF(doubles);
    Py_XDECREF(chars);
    Py_XDECREF(arrays);
    Py_XDECREF(fields);
    return result;
}

int embed_from_python(PyObject *value, embed_numbers *numbers, rlb_value *out, char *error) {
    memset(out, 0, sizeof *out);
    PyObject *ints = NULL, *doubles = NULL, *chars = NULL;
    if (PyTuple_Check(value) && PyTuple_GET_SIZE(value) == 4) {
        ints = PyTuple_GET_ITEM(value, 0);
        doubles = PyTuple_GET_ITEM(value, 1);
        chars = PyTuple_GET_ITEM(value, 2);
    }
    if (!ints || !PyTuple_Check(ints) || PyTuple_GET_SIZE(ints) > EMBED_MAX_NUMBERS ||
        !PyTuple_Check(doubles) || PyTuple_GET_SIZE(doubles) > EMBED_MAX_NUMBERS ||
        !PyUnicode_Check(chars) || PyTuple_GET_SIZE(PyTuple_GET_ITEM(value, 3)) != 0) {
        snprintf(error, RLB_ERROR_TEXT_BYTES, "python must give a Value of at most %d ints "
                 "and %d doubles and no arrays", EMBED_MAX_NUMBERS, EMBED_MAX_NUMBERS);
        return 1;
    }
    out->ints = numbers->ints;
    out->n_ints = (size_t)PyTuple_GET_SIZE(ints);
    for (size_t i = 0; i < out->n_ints; i++)
        numbers->ints[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(ints, i));
    out->doubles = numbers->doubles;
    out->n_doubles = (size_t)PyTuple_GET_SIZE(doubles);
    for (size_t i = 0; i < out->n_doubles; i++)
        numbers->doubles[i] = PyFloat_AsDouble(PyTuple_GET_ITEM(doubles, i));
    Py_ssize_t n_chars = 0;
    out->chars = PyUnicode_AsUTF8AndSize(chars, &n_chars);
    out->n_chars = (size_t)n_chars;
    return PyErr_Occurred() ? embed_failed(error) : 0;
}

PyObject *embed_construct(const char *spec, char **keywords, int n_keywords) {
    const char *colon = strchr(spec, ':');
    if (colon == NULL)
        return PyErr_Format(PyExc_ValueError, "expected MODULE:CLASS, got %s", spec);
    char module_name[256];
    snprintf(module_name, sizeof module_name, "%.*s", (int)(colon - spec), spec);
    PyObject *class_object = embed_attribute(module_name, colon + 1);
    PyObject *arguments = PyDict_New();
    for (int i = 0; class_object && arguments && i < n_keywords; i++) {
        char key[64];
        const char *equals = strchr(keywords[i], '=');
        if (equals == NULL || equals - keywords[i] >= (long)sizeof key) {
            Py_CLEAR(arguments);
            PyErr_Format(PyExc_ValueError, "expected KEY=INT, got %s", keywords[i]);
            break;
        }
        snprintf(key, sizeof key, "%.*s", (int)(equals - keywords[i]), keywords[i]);
        PyObject *number = PyLong_FromLongLong(strtoll(equals + 1, NULL, 10));
        PyDict_SetItemString(arguments, key, number);
        Py_XDECREF(number);
    }
    PyObject *empty = PyTuple_New(0);
    PyObject *made = class_object && arguments ? PyObject_Call(class_object, empty, arguments)
                                               : NULL;
    Py_XDECREF(empty);
    Py_XDECREF(arguments);
    Py_XDECREF(class_object);
    return made;
}
