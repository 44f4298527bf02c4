/* A bench instrument: the environment side of a delegated episode as a loop in C around a
 * Python environment's env_start and env_step, in an embedded interpreter.
 *
 * `rlbridge bench core` (row (e)) runs it on the countdown, against python_agent.c, to
 * measure what compiled glue would leave of the environment process's CPU per step when the
 * game stays in Python. It does the least such a loop must: call the game, count the steps,
 * encode AGENT_START/AGENT_STEP/AGENT_END with the library's codec, send, receive and
 * decode the action. It checks no action against the task spec, totals no return and keeps
 * no log.
 *
 * Usage: python_env MODULE:CLASS AGENT_ADDRESS AGENT_PID STEPS [KEY=INT ...]
 * The class is built with the KEY=INT keyword arguments. After one untimed episode it plays
 * STEPS steps and prints its own CPU microseconds per step and the agent process's (read
 * from /proc/AGENT_PID/stat), then sends the agent SHUTDOWN.
 */
#include "embed.h"  /* first: Python.h sets the POSIX feature macros */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#define REPLY_TIMEOUT_MS 10000

typedef struct {
    void *socket;
    int64_t seq, episode;
    msgpack_sbuffer out;
    zmq_msg_t frame;            /* the last reply: its decoded strings point into it */
    msgpack_unpacked reply;
    rlb_envelope envelope;
    char error[RLB_ERROR_TEXT_BYTES];
} link_t;

static void die(const char *what, const char *why) {
    fprintf(stderr, "python_env: %s: %s\n", what, why);
    exit(1);
}

/* Start a request of `type`; the caller packs its body with the returned packer. */
static msgpack_packer start_request(link_t *link, int type) {
    msgpack_sbuffer_clear(&link->out);
    msgpack_packer packer;
    msgpack_packer_init(&packer, &link->out, msgpack_sbuffer_write);
    rlb_pack_header(&packer, type, ++link->seq, link->episode);
    return packer;
}

/* Send the request and wait for its reply, which must be of the same type. */
static void exchange(link_t *link, int type) {
    if (zmq_send(link->socket, link->out.data, link->out.size, 0) < 0)
        die("send", zmq_strerror(zmq_errno()));
    zmq_msg_close(&link->frame);
    zmq_msg_init(&link->frame);
    if (zmq_msg_recv(&link->frame, link->socket, 0) < 0)
        die("the agent's reply", zmq_strerror(zmq_errno()));
    if (zmq_msg_more(&link->frame))
        die("the agent's reply", "more than one frame");
    int code = rlb_decode_message(zmq_msg_data(&link->frame), zmq_msg_size(&link->frame),
                                  &link->reply, &link->envelope, link->error);
    if (code != RLB_OK)
        die("the agent's reply", link->error);
    const msgpack_object *body = &link->envelope.body;
    if (link->envelope.type == RLB_ERROR && body->type == MSGPACK_OBJECT_ARRAY &&
        body->via.array.size == 2 && body->via.array.ptr[1].type == MSGPACK_OBJECT_STR) {
        snprintf(link->error, sizeof link->error, "the agent answered ERROR: %.*s",
                 (int)body->via.array.ptr[1].via.str.size, body->via.array.ptr[1].via.str.ptr);
        die("the agent's reply", link->error);
    }
    if (link->envelope.type != type || link->envelope.seq != link->seq) {
        snprintf(link->error, sizeof link->error, "expected the reply of type %d to seq %lld, "
                 "got type %d for seq %lld", type, (long long)link->seq, link->envelope.type,
                 (long long)link->envelope.seq);
        die("the agent's reply", link->error);
    }
}

/* Send `observation` in an AGENT_START (reward < 0 ignored) or AGENT_STEP; return the action. */
static PyObject *request_action(link_t *link, PyObject *value_type, int type, double reward,
                                PyObject *observation) {
    embed_numbers numbers;
    rlb_value packed;
    if (embed_from_python(observation, &numbers, &packed, link->error))
        die("the observation", link->error);
    msgpack_packer packer = start_request(link, type);
    if (type == RLB_AGENT_STEP) {
        msgpack_pack_array(&packer, 2);
        msgpack_pack_double(&packer, reward);
    }
    rlb_pack_value(&packer, &packed, NULL, NULL, 0);
    exchange(link, type);
    rlb_value action;
    if (rlb_decode_value(&link->envelope.body, NULL, NULL, 0, &action, link->error) != RLB_OK)
        die("the action", link->error);
    PyObject *result = embed_to_python(value_type, &action);
    rlb_value_free(&action);
    if (result == NULL && embed_failed(link->error))
        die("the action", link->error);
    return result;
}

static double cpu_seconds(void) {
    struct timespec now;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
    return (double)now.tv_sec + (double)now.tv_nsec / 1e9;
}

/* User plus system CPU seconds of process `pid`, every thread included. */
static double process_cpu_seconds(long pid) {
    char path[64], text[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *file = fopen(path, "r");
    size_t length = file ? fread(text, 1, sizeof text - 1, file) : 0;
    if (file)
        fclose(file);
    text[length] = '\0';
    char *fields = strrchr(text, ')');  /* the command name before it may hold spaces */
    unsigned long long user = 0, system = 0;
    if (fields == NULL ||
        sscanf(fields + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
               &user, &system) != 2)
        die(path, "cannot read the process's CPU time");
    return (double)(user + system) / (double)sysconf(_SC_CLK_TCK);
}

/* Play `steps` steps of episodes, as a delegated episode plays them; returns the steps. */
static long play(link_t *link, PyObject *env, PyObject *value_type, long steps) {
    long played = 0;
    while (played < steps) {
        link->episode++;
        PyObject *observation = PyObject_CallMethod(env, "env_start", NULL);
        if (observation == NULL && embed_failed(link->error))
            die("env_start", link->error);
        PyObject *action = request_action(link, value_type, RLB_AGENT_START, 0.0, observation);
        Py_DECREF(observation);
        for (;;) {
            PyObject *result = embed_call_method(env, "env_step", action);
            Py_DECREF(action);
            if (result == NULL && embed_failed(link->error))
                die("env_step", link->error);
            double reward = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(result, 0));
            int terminal = PyObject_IsTrue(PySequence_Fast_GET_ITEM(result, 2));
            played++;
            if (terminal) {
                Py_DECREF(result);
                msgpack_packer packer = start_request(link, RLB_AGENT_END);
                msgpack_pack_double(&packer, reward);
                exchange(link, RLB_AGENT_END);
                break;
            }
            action = request_action(link, value_type, RLB_AGENT_STEP, reward,
                                    PySequence_Fast_GET_ITEM(result, 1));
            Py_DECREF(result);
        }
    }
    return played;
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s MODULE:CLASS AGENT_ADDRESS AGENT_PID STEPS [KEY=INT ...]\n",
                argv[0]);
        return 2;
    }
    long agent_pid = strtol(argv[3], NULL, 10), steps = strtol(argv[4], NULL, 10);
    Py_Initialize();
    PyObject *env = embed_construct(argv[1], argv + 5, argc - 5);
    PyObject *value_type = embed_attribute("rlbridge.protocol.values", "Value");
    PyObject *build = embed_attribute("rlbridge.protocol.taskspec", "build");
    PyObject *spec = env ? PyObject_CallMethod(env, "env_init", NULL) : NULL;
    PyObject *spec_text = spec && build ? PyObject_CallOneArg(build, spec) : NULL;
    if (spec_text == NULL || value_type == NULL) {
        PyErr_Print();
        return 1;
    }
    link_t link = {0};
    msgpack_sbuffer_init(&link.out);
    zmq_msg_init(&link.frame);
    msgpack_unpacked_init(&link.reply);
    void *context = zmq_ctx_new();
    link.socket = zmq_socket(context, ZMQ_DEALER);
    int timeout_ms = REPLY_TIMEOUT_MS, linger_ms = 0;
    zmq_setsockopt(link.socket, ZMQ_RCVTIMEO, &timeout_ms, sizeof timeout_ms);
    zmq_setsockopt(link.socket, ZMQ_LINGER, &linger_ms, sizeof linger_ms);
    if (zmq_connect(link.socket, argv[2]) != 0)
        die(argv[2], zmq_strerror(zmq_errno()));

    msgpack_packer packer = start_request(&link, RLB_AGENT_INIT);
    rlb_pack_str(&packer, PyUnicode_AsUTF8(spec_text));
    exchange(&link, RLB_AGENT_INIT);
    play(&link, env, value_type, 1);  /* one whole episode: both sides' paths have run */
    double own_start = cpu_seconds(), agent_start = process_cpu_seconds(agent_pid);
    long played = play(&link, env, value_type, steps);
    double own = cpu_seconds() - own_start;
    double agent = process_cpu_seconds(agent_pid) - agent_start;
    printf("%.3f %.3f\n", own / (double)played * 1e6, agent / (double)played * 1e6);
    fflush(stdout);

    packer = start_request(&link, RLB_SHUTDOWN);
    msgpack_pack_nil(&packer);
    exchange(&link, RLB_SHUTDOWN);
    zmq_msg_close(&link.frame);
    zmq_close(link.socket);
    zmq_ctx_term(context);
    msgpack_unpacked_destroy(&link.reply);
    msgpack_sbuffer_destroy(&link.out);
    return 0;
}
