/* A bench instrument, not an agent to use: this library's agent loop, in C, serving a Python
 * agent's agent_start, agent_step and agent_end through an embedded interpreter.
 *
 * `rlbridge bench core` (row (e)) runs it on the countdown to measure what compiled glue
 * would leave of the agent process's CPU per step when the agent itself stays in Python:
 * every receive, check, decode, encode and send is the C library's, and the only Python
 * left is the agent's own call and the conversion of its argument and result.
 *
 * Usage: python_agent MODULE:CLASS [the C agents' options]. The class is built with no
 * arguments; PYTHONPATH must reach rlbridge. It serves ints, doubles and chars, not
 * arrays, which the countdown's 1-int workload does not need.
 */
#include <Python.h>

#include <stdio.h>
#include <string.h>

#include "rlbridge_agent.h"

#define MAX_ACTION_INTS 64

typedef struct {
    PyObject *agent, *value_type, *parse_task_spec;
    int64_t ints[MAX_ACTION_INTS];
} python_agent;

/* Writes the pending Python exception into `error`, a buffer of RLB_ERROR_TEXT_BYTES. */
static int python_failed(char *error) {
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    PyObject *text = value ? PyObject_Str(value) : NULL;
    const char *utf8 = text ? PyUnicode_AsUTF8(text) : NULL;
    snprintf(error, RLB_ERROR_TEXT_BYTES, "python agent raised %s: %s",
             type ? ((PyTypeObject *)type)->tp_name : "an error", utf8 ? utf8 : "?");
    Py_XDECREF(text);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(traceback);
    PyErr_Clear();
    return 1;
}

/* rlbridge.protocol.values.Value(ints, doubles, chars, ()) for an observation. */
static PyObject *to_value(python_agent *agent, const rlb_value *observation) {
    if (observation->n_arrays)
        return PyErr_Format(PyExc_ValueError, "this instrument serves no arrays");
    PyObject *ints = PyTuple_New((Py_ssize_t)observation->n_ints);
    PyObject *doubles = PyTuple_New((Py_ssize_t)observation->n_doubles);
    PyObject *chars = PyUnicode_FromStringAndSize(observation->chars ? observation->chars : "",
                                                  (Py_ssize_t)observation->n_chars);
    PyObject *fields = NULL, *value = NULL;
    if (ints && doubles && chars) {
        for (size_t i = 0; i < observation->n_ints; i++)
            PyTuple_SET_ITEM(ints, i, PyLong_FromLongLong(observation->ints[i]));
        for (size_t i = 0; i < observation->n_doubles; i++)
            PyTuple_SET_ITEM(doubles, i, PyFloat_FromDouble(observation->doubles[i]));
        PyObject *arrays = PyTuple_New(0);
        fields = PyTuple_Pack(4, ints, doubles, chars, arrays);
        Py_XDECREF(arrays);
    }
    if (fields) {  /* tuple.__new__(Value, fields), as rlbridge's decoders build a Value */
        PyObject *args = PyTuple_Pack(1, fields);
        value = PyTuple_Type.tp_new((PyTypeObject *)agent->value_type, args, NULL);
        Py_DECREF(args);
    }
    Py_XDECREF(ints);
    Py_XDECREF(doubles);
    Py_XDECREF(chars);
    Py_XDECREF(fields);
    return value;
}

/* The action the agent returned, as the library sends it: its ints (and no more). */
static int from_value(python_agent *agent, PyObject *result, rlb_value *action, char *error) {
    if (result == NULL)
        return python_failed(error);
    memset(action, 0, sizeof *action);
    action->ints = agent->ints;
    PyObject *ints = PyTuple_Check(result) && PyTuple_GET_SIZE(result) == 4
                         ? PyTuple_GET_ITEM(result, 0) : NULL;
    if (ints == NULL || !PyTuple_Check(ints) || PyTuple_GET_SIZE(ints) > MAX_ACTION_INTS) {
        Py_DECREF(result);
        snprintf(error, RLB_ERROR_TEXT_BYTES, "the python agent must return a Value of at most %d ints",
                 MAX_ACTION_INTS);
        return 1;
    }
    action->n_ints = (size_t)PyTuple_GET_SIZE(ints);
    for (size_t i = 0; i < action->n_ints; i++)
        agent->ints[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(ints, i));
    Py_DECREF(result);
    return PyErr_Occurred() ? python_failed(error) : 0;
}

/* agent.name(argument): a tuple argument (a Value is one) stays one argument. */
static PyObject *call_method(PyObject *agent, const char *name, PyObject *argument) {
    PyObject *method = PyObject_GetAttrString(agent, name);
    PyObject *result = method ? PyObject_CallOneArg(method, argument) : NULL;
    Py_XDECREF(method);
    return result;
}

static int init(void *state, const char *task_spec, char *error) {
    python_agent *agent = state;
    PyObject *spec = PyObject_CallFunction(agent->parse_task_spec, "s", task_spec);
    PyObject *done = spec ? call_method(agent->agent, "agent_init", spec) : NULL;
    Py_XDECREF(spec);
    if (done == NULL)
        return python_failed(error);
    Py_DECREF(done);
    return 0;
}

static int start(void *state, const rlb_value *observation, rlb_value *action, char *error) {
    python_agent *agent = state;
    PyObject *value = to_value(agent, observation);
    if (value == NULL)
        return python_failed(error);
    PyObject *result = call_method(agent->agent, "agent_start", value);
    Py_DECREF(value);
    return from_value(agent, result, action, error);
}

static int step(void *state, double reward, const rlb_value *observation, rlb_value *action,
                char *error) {
    python_agent *agent = state;
    PyObject *value = to_value(agent, observation);
    if (value == NULL)
        return python_failed(error);
    PyObject *result = PyObject_CallMethod(agent->agent, "agent_step", "dO", reward, value);
    Py_DECREF(value);
    return from_value(agent, result, action, error);
}

static int end(void *state, double reward, char *error) {
    PyObject *done = PyObject_CallMethod(((python_agent *)state)->agent, "agent_end", "d", reward);
    if (done == NULL)
        return python_failed(error);
    Py_DECREF(done);
    return 0;
}

/* "seed N": the Python agent's own seed(N). */
static void seed(void *state, uint64_t value) {
    PyObject *done = PyObject_CallMethod(((python_agent *)state)->agent, "seed", "K",
                                         (unsigned long long)value);
    if (done == NULL)
        PyErr_Clear();
    Py_XDECREF(done);
}

static PyObject *attribute(const char *module_name, const char *name) {
    PyObject *module = PyImport_ImportModule(module_name);
    PyObject *found = module ? PyObject_GetAttrString(module, name) : NULL;
    Py_XDECREF(module);
    return found;
}

int main(int argc, char **argv) {
    if (argc < 2 || strchr(argv[1], ':') == NULL) {
        fprintf(stderr, "usage: %s MODULE:CLASS [--bind ADDR] [the C agents' options]\n", argv[0]);
        return 2;
    }
    Py_Initialize();
    static python_agent state;
    char module_name[256];
    const char *colon = strchr(argv[1], ':');
    snprintf(module_name, sizeof module_name, "%.*s", (int)(colon - argv[1]), argv[1]);
    PyObject *agent_class = attribute(module_name, colon + 1);
    state.agent = agent_class ? PyObject_CallNoArgs(agent_class) : NULL;
    state.value_type = attribute("rlbridge.protocol.values", "Value");
    state.parse_task_spec = attribute("rlbridge.protocol.taskspec", "parse");
    Py_XDECREF(agent_class);
    if (state.agent == NULL || state.value_type == NULL || state.parse_task_spec == NULL) {
        PyErr_Print();
        return 1;
    }
    rlb_agent agent = {.name = "python agent in the C library's loop", .state = &state,
                       .init = init, .start = start, .step = step, .end = end, .seed = seed};
    argv[1] = argv[0];  /* the library parses the options after the class */
    return rlb_main(argc - 1, argv + 1, &agent, NULL);
}
