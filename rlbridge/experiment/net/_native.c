/* The per-step path of a delegated episode in C: AGENT_STEP requests and their replies.
 *
 * Built by `make` (native.py says how it is found and when it is used). The module knows
 * one shape of message, the one every step of a delegated episode has, and nothing else:
 *
 *   [1, 22, seq, episode, [reward, [ints, doubles, chars, []]]]   (AGENT_STEP request)
 *   [1, 22, seq, episode, [ints, doubles, chars, []]]             (its action reply)
 *
 * A frame of this shape decodes to the Python values protocol/typed.py's decoder gives it,
 * and a reply encodes to the bytes msgpack.Packer(use_bin_type=True) writes for the
 * same body. Any other frame (another type, an array, a uint64, a trailing byte, invalid
 * UTF-8...) goes back to Python untouched, whose decoders make every decision and write
 * every error message. tests/experiment/test_native_agent.py and test_native_env.py hold
 * the two paths to that.
 *
 * libzmq is the one pyzmq loaded: a socket is passed as pyzmq's `Socket.underlying`, and
 * the functions are looked up in that library (bind_libzmq), never linked, so that one
 * process never holds two copies of libzmq.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

typedef struct { _Alignas(8) unsigned char bytes[64]; } zmq_msg;
#define SNDMORE 2
#define VERSION 1
#define AGENT_STEP 22

static int (*msg_init)(zmq_msg *);
static int (*msg_recv)(zmq_msg *, void *, int);
static int (*msg_close)(zmq_msg *);
static void *(*msg_data)(zmq_msg *);
static size_t (*msg_size)(const zmq_msg *);
static int (*msg_more)(const zmq_msg *);
static int (*zsend)(void *, const void *, size_t, int);
static int (*zerrno)(void);
static const char *(*zstrerror)(int);

#include "_native_codec.h"

/* Attribute names and item indexes, made once (PyInit__native). */
static PyObject *NUM_STEPS, *RUNNING, *SEQ, *STEP, *STOPPING, *INDEX[3];

/* ---- the libzmq calls ------------------------------------------------------------------ */
static PyObject *zmq_error(const char *doing) {
    int code = zerrno();
    return PyErr_Format(PyExc_OSError, "%s: %s (errno %d)", doing, zstrerror(code), code);
}

/* Receive one frame into ``msg``, the GIL released: 1 received, 0 the receive timeout
 * passed, -1 an exception. A signal runs the pending Python handlers, then returns 0 or,
 * with ``resume``, receives on as pyzmq does. */
static int receive(void *socket, zmq_msg *msg, int resume) {
    for (;;) {
        int rc;
        msg_init(msg);
        Py_BEGIN_ALLOW_THREADS
        rc = msg_recv(msg, socket, 0);
        Py_END_ALLOW_THREADS
        if (rc >= 0) return 1;
        int code = zerrno();
        msg_close(msg);
        if (code == EAGAIN) return 0;
        if (code != EINTR) {
            zmq_error("receiving");
            return -1;
        }
        if (PyErr_CheckSignals() < 0) return -1;
        if (!resume) return 0;
    }
}

static double monotonic_s(void) {  /* time.monotonic()'s clock */
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + now.tv_nsec * 1e-9;
}

static PyObject *bytes_of(zmq_msg *msg) {
    return PyBytes_FromStringAndSize(msg_data(msg), (Py_ssize_t)msg_size(msg));
}

/* ---- the module's functions ------------------------------------------------------------ */
static PyObject *bind_libzmq(PyObject *self, PyObject *args) {
    const char *path;
    (void)self;
    if (!PyArg_ParseTuple(args, "s", &path)) return NULL;
    void *library = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (library == NULL)
        return PyErr_Format(PyExc_ImportError, "libzmq at %s is not loaded: %s", path, dlerror());
#define FIND(name, symbol) \
    if (!(*(void **)&name = dlsym(library, symbol))) \
        return PyErr_Format(PyExc_ImportError, "%s has no %s", path, symbol);
    FIND(msg_init, "zmq_msg_init") FIND(msg_recv, "zmq_msg_recv") FIND(msg_close, "zmq_msg_close")
    FIND(msg_data, "zmq_msg_data") FIND(msg_size, "zmq_msg_size") FIND(msg_more, "zmq_msg_more")
    FIND(zsend, "zmq_send") FIND(zerrno, "zmq_errno") FIND(zstrerror, "zmq_strerror")
#undef FIND
    Py_RETURN_NONE;
}

enum Outcome { IDLE = 0, REQUEST = 1, FAILED = 2, ENCODE = 3 };

/* serve_steps(server, socket, agent_step, Value, owner, max_bytes) -> (outcome, steps,
 * owner_seen, identity, payload, extra); it also ends (IDLE) once ``server.stopping`` is
 * true, as a signal handler makes it. See AgentServer.next_request, its only caller. */
static PyObject *serve_steps(PyObject *self, PyObject *args) {
    unsigned long long address;
    PyObject *server, *agent_step, *owner;
    PyTypeObject *value_type;
    Py_ssize_t max_bytes;
    (void)self;
    if (!PyArg_ParseTuple(args, "OKOO!On", &server, &address, &agent_step, &PyType_Type,
                          &value_type, &owner, &max_bytes))
        return NULL;
    void *socket = (void *)(uintptr_t)address;
    long steps = 0;
    double owner_seen = 0.0;
    Writer w = {NULL, 0, 0};
    PyObject *result = NULL;
    for (;;) {
        zmq_msg identity, payload;
        /* A handler that ran in agent_step or in receive() may have set it. */
        PyObject *stopping = PyObject_GetAttr(server, STOPPING);
        if (stopping == NULL) break;
        int stop = PyObject_IsTrue(stopping);
        Py_DECREF(stopping);
        if (stop) {
            if (stop > 0) result = Py_BuildValue("ildOOO", IDLE, steps, owner_seen, Py_None,
                                                 Py_None, Py_None);
            break;
        }
        int got = receive(socket, &identity, 0);
        if (got <= 0) {
            if (got == 0) result = Py_BuildValue("ildOOO", IDLE, steps, owner_seen, Py_None,
                                                 Py_None, Py_None);
            break;
        }
        got = msg_more(&identity) ? receive(socket, &payload, 1) : 0;
        if (got <= 0) {  /* a ROUTER always sends the identity and then the message */
            msg_close(&identity);
            if (got == 0 && !PyErr_Occurred())
                PyErr_SetString(PyExc_OSError, "a ROUTER message ended after its identity");
            break;
        }
        const unsigned char *data = msg_data(&payload);
        size_t size = msg_size(&payload);
        Reader r = {data, data + size};
        int64_t seq, episode;
        double reward;
        int is_int;
        int64_t whole;
        Py_ssize_t count;
        PyObject *value = NULL;
        int fits = !msg_more(&payload) && (Py_ssize_t)size <= max_bytes
                   && read_envelope(&r, &seq, &episode) && read_array(&r, &count) && count == 2
                   && read_number(&r, &reward, &is_int, &whole);
        if (fits) {
            value = read_value(&r, value_type);
            if (value == NULL && PyErr_Occurred()) {
                msg_close(&identity);
                msg_close(&payload);
                break;
            }
            fits = value != NULL && r.at == r.end;
        }
        if (!fits) {
            Py_XDECREF(value);
            result = Py_BuildValue("ildNNO", REQUEST, steps, owner_seen, bytes_of(&identity),
                                   bytes_of(&payload), msg_more(&payload) ? Py_True : Py_False);
            msg_close(&identity);
            msg_close(&payload);
            break;
        }
        size_t id_size = msg_size(&identity);
        int from_owner = owner != Py_None && (size_t)PyBytes_GET_SIZE(owner) == id_size
                         && memcmp(PyBytes_AS_STRING(owner), msg_data(&identity), id_size) == 0;
        if (from_owner) owner_seen = monotonic_s();
        PyObject *action = PyObject_CallFunction(agent_step, "dN",
                                                 is_int ? (double)whole : reward, value);
        steps++;
        if (action == NULL && !PyErr_ExceptionMatches(PyExc_Exception)) {
            /* SystemExit, KeyboardInterrupt: they end the server, as on the Python path */
            msg_close(&identity);
            msg_close(&payload);
            break;
        }
        if (action == NULL) {
            PyObject *type, *error, *trace;
            PyErr_Fetch(&type, &error, &trace);
            PyErr_NormalizeException(&type, &error, &trace);
            if (trace) PyException_SetTraceback(error, trace);
            Py_XDECREF(type);
            Py_XDECREF(trace);
            result = Py_BuildValue("ildNN(LLN)", FAILED, steps, owner_seen, bytes_of(&identity),
                                   bytes_of(&payload), seq, episode, error);
            msg_close(&identity);
            msg_close(&payload);
            break;
        }
        w.size = 0;
        int written = write_array(&w, 5) && write_int(&w, VERSION) && write_int(&w, AGENT_STEP)
                      && write_int(&w, seq) && write_int(&w, episode)
                      ? write_value(&w, action, value_type) : -1;
        if (written <= 0) {
            if (written == 0)
                result = Py_BuildValue("ildNN(LLN)", ENCODE, steps, owner_seen,
                                       bytes_of(&identity), bytes_of(&payload), seq, episode,
                                       action);
            else
                Py_DECREF(action);
            msg_close(&identity);
            msg_close(&payload);
            break;
        }
        Py_DECREF(action);
        msg_close(&payload);
        int sent = zsend(socket, msg_data(&identity), id_size, SNDMORE) >= 0
                   && zsend(socket, w.data, w.size, 0) >= 0;
        msg_close(&identity);
        if (!sent) {
            zmq_error("sending an AGENT_STEP reply");
            break;
        }
    }
    PyMem_Free(w.data);
    return result;
}

#include "_native_episode.h"

static PyMethodDef methods[] = {
    {"play_steps", play_steps, METH_VARARGS, "A delegated episode's steps, as in Python."},
    {"bind_libzmq", bind_libzmq, METH_VARARGS, "Find libzmq's functions in the loaded library."},
    {"serve_steps", serve_steps, METH_VARARGS, "Answer AGENT_STEP requests of the known shape."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native", NULL, -1, methods};

PyMODINIT_FUNC PyInit__native(void) {
    if (!(NUM_STEPS = PyUnicode_InternFromString("num_steps"))
        || !(RUNNING = PyUnicode_InternFromString("running"))
        || !(SEQ = PyUnicode_InternFromString("seq"))
        || !(STEP = PyUnicode_InternFromString("step"))
        || !(STOPPING = PyUnicode_InternFromString("stopping")))
        return NULL;
    for (int i = 0; i < 3; i++)
        if (!(INDEX[i] = PyLong_FromLong(i))) return NULL;
    return PyModule_Create(&module);
}
