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
#include "embed.h"  /* first: Python.h sets the POSIX feature macros */

#include <stdio.h>
#include <string.h>

typedef struct {
    PyObject *agent, *value_type, *parse_task_spec;
    embed_numbers numbers;
    PyObject *last_action;  /* keeps the chars of the action being sent alive */
} python_agent;

/* The agent's result as the action the library sends; the reference is kept until the next. */
static int action_from(python_agent *agent, PyObject *result, rlb_value *action, char *error) {
    if (result == NULL)
        return embed_failed(error);
    Py_XSETREF(agent->last_action, result);
    return embed_from_python(result, &agent->numbers, action, error);
}

static int init(void *state, const char *task_spec, char *error) {
    python_agent *agent = state;
    PyObject *spec = PyObject_CallFunction(agent->parse_task_spec, "s", task_spec);
    PyObject *done = spec ? embed_call_method(agent->agent, "agent_init", spec) : NULL;
    Py_XDECREF(spec);
    if (done == NULL)
        return embed_failed(error);
    Py_DECREF(done);
    return 0;
}

static int start(void *state, const rlb_value *observation, rlb_value *action, char *error) {
    python_agent *agent = state;
    PyObject *value = embed_to_python(agent->value_type, observation);
    if (value == NULL)
        return embed_failed(error);
    PyObject *result = embed_call_method(agent->agent, "agent_start", value);
    Py_DECREF(value);
    return action_from(agent, result, action, error);
}

static int step(void *state, double reward, const rlb_value *observation, rlb_value *action,
                char *error) {
    python_agent *agent = state;
    PyObject *value = embed_to_python(agent->value_type, observation);
    if (value == NULL)
        return embed_failed(error);
    PyObject *result = PyObject_CallMethod(agent->agent, "agent_step", "dO", reward, value);
    Py_DECREF(value);
    return action_from(agent, result, action, error);
}

static int end(void *state, double reward, char *error) {
    PyObject *done = PyObject_CallMethod(((python_agent *)state)->agent, "agent_end", "d", reward);
    if (done == NULL)
        return embed_failed(error);
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

int main(int argc, char **argv) {
    if (argc < 2 || strchr(argv[1], ':') == NULL) {
        fprintf(stderr, "usage: %s MODULE:CLASS [--bind ADDR] [the C agents' options]\n", argv[0]);
        return 2;
    }
    Py_Initialize();
    static python_agent state;
    state.agent = embed_construct(argv[1], NULL, 0);
    state.value_type = embed_attribute("rlbridge.protocol.values", "Value");
    state.parse_task_spec = embed_attribute("rlbridge.protocol.taskspec", "parse");
    if (state.agent == NULL || state.value_type == NULL || state.parse_task_spec == NULL) {
        PyErr_Print();
        return 1;
    }
    rlb_agent agent = {.name = "python agent in the C library's loop", .state = &state,
                       .init = init, .start = start, .step = step, .end = end, .seed = seed};
    argv[1] = argv[0];  /* the library parses the options after the class */
    return rlb_main(argc - 1, argv + 1, &agent, NULL);
}
