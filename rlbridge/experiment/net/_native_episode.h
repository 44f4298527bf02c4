/* The environment's side of _native.c: one AGENT_STEP exchange (exchange_step), and a
 * delegated episode's steps in a loop around the Python the Python loop calls
 * (play_steps). Included once, by _native.c, after the libzmq calls and the codec. */

enum Exchanged { ACTION = 0, NOT_SENT = 1, REPLY = 2, SEND_TIMEOUT = 3, RECEIVE_TIMEOUT = 4 };

/* One AGENT_STEP request from a DEALER and its reply: ACTION with the reply's Value in
 * ``*what``; NOT_SENT (nothing sent) when the observation is not of the known shape; REPLY
 * with the reply's first frame as bytes in ``*what`` and ``*more`` set when frames follow,
 * when the reply is anything else; a timeout; or -1 with an exception. */
static int exchange_step(void *socket, int64_t seq, int64_t episode, double reward,
                         PyObject *observation, PyTypeObject *value_type, Py_ssize_t max_bytes,
                         PyObject **what, int *more, PyObject *recorder, PyObject *peer,
                         long long step) {
    Writer w = {NULL, 0, 0};
    uint64_t bits;
    memcpy(&bits, &reward, 8);
    *what = NULL;
    *more = 0;
    int written = write_array(&w, 5) && write_int(&w, VERSION) && write_int(&w, AGENT_STEP)
                  && write_int(&w, seq) && write_int(&w, episode) && write_array(&w, 2)
                  && put(&w, 0xcb, bits, 8) ? write_value(&w, observation, value_type) : -1;
    if (written <= 0) {
        PyMem_Free(w.data);
        return written < 0 ? -1 : NOT_SENT;
    }
    if (recorder != Py_None) {  /* before sending, as RequestClient.send_request records */
        PyObject *recorded = PyObject_CallFunction(
            recorder, "sOiLLLy#()", "sent", peer, AGENT_STEP, (long long)seq,
            (long long)episode, step, (const char *)w.data, (Py_ssize_t)w.size);
        if (recorded == NULL) {
            PyMem_Free(w.data);
            return -1;
        }
        Py_DECREF(recorded);
    }
    int rc = zsend(socket, w.data, w.size, 0);  /* queued at once unless the peer is gone */
    PyMem_Free(w.data);
    if (rc < 0) {
        if (zerrno() == EAGAIN) return SEND_TIMEOUT;
        zmq_error("sending AGENT_STEP");
        return -1;
    }
    zmq_msg reply;
    int got = receive(socket, &reply, 1);
    if (got <= 0) return got < 0 ? -1 : RECEIVE_TIMEOUT;
    const unsigned char *data = msg_data(&reply);
    size_t size = msg_size(&reply);
    Reader r = {data, data + size};
    int64_t reply_seq, reply_episode;
    if (!msg_more(&reply) && (Py_ssize_t)size <= max_bytes
        && read_envelope(&r, &reply_seq, &reply_episode) && reply_seq == seq) {
        *what = read_value(&r, value_type);
        if (*what == NULL && PyErr_Occurred()) {
            msg_close(&reply);
            return -1;
        }
        if (*what != NULL && r.at != r.end) Py_CLEAR(*what);
    }
    if (*what != NULL && recorder != Py_None) {  /* as RequestClient.request records */
        PyObject *recorded = PyObject_CallFunction(
            recorder, "sOiLLLy#()", "received", peer, AGENT_STEP, (long long)seq,
            (long long)episode, step, (const char *)data, (Py_ssize_t)size);
        if (recorded == NULL) {
            Py_CLEAR(*what);
            msg_close(&reply);
            return -1;
        }
        Py_DECREF(recorded);
    }
    int outcome = ACTION;
    if (*what == NULL) {
        outcome = REPLY;
        *more = msg_more(&reply);
        if (!(*what = bytes_of(&reply))) outcome = -1;
    }
    msg_close(&reply);
    return outcome;
}

static int get_int(PyObject *object, PyObject *name, long long *out) {
    PyObject *value = PyObject_GetAttr(object, name);
    if (value == NULL) return 0;
    *out = PyLong_AsLongLong(value);
    Py_DECREF(value);
    return !(*out == -1 && PyErr_Occurred());
}

static int set_int(PyObject *object, PyObject *name, long long value) {
    PyObject *number = PyLong_FromLongLong(value);
    if (number == NULL) return 0;
    int rc = PyObject_SetAttr(object, name, number);
    Py_DECREF(number);
    return rc == 0;
}


/* play_steps(action, loop, client, socket, episode, Value, max_bytes, heartbeat_s, next_beat,
 * recorder, peer) -> (ended, last): a delegated episode's steps from the agent's action
 * ``action``, as EpisodeRunner._play's Python loop plays them (see there), until the
 * counter stops:
 * (True, reward) when a terminal step ended the episode (AGENT_END is the caller's to
 * send), (False, action) when it was cut off. ``loop`` holds the Python calls, in order:
 * check_action, the InvalidAction type, invalid(error, action) (raises the episode's
 * InvalidAction), env_step, count_step, the counter, python_step(reward, observation) for
 * a step this path does not send, settle(outcome, seq, what, more) for a reply it does not
 * read, beat(num_steps), and the viewer's offer and the game's snapshot (None, None without
 * a viewer). ``recorder`` (or None) records each message as RequestClient does, as the
 * ``peer`` role. */
static PyObject *play_steps(PyObject *self, PyObject *args) {
    PyObject *action, *check, *invalid_type, *invalid, *env_step, *count_step, *counter;
    PyObject *python_step, *settle, *beat, *client, *offer, *snapshot, *recorder, *peer;
    unsigned long long address;
    long long episode;
    PyTypeObject *value_type;
    Py_ssize_t max_bytes;
    double heartbeat_s, next_beat;
    (void)self;
    if (!PyArg_ParseTuple(args, "O(OOOOOOOOOOO)OKLO!nddOO", &action, &check, &invalid_type,
                          &invalid, &env_step, &count_step, &counter, &python_step, &settle,
                          &beat, &offer, &snapshot, &client, &address, &episode, &PyType_Type,
                          &value_type, &max_bytes, &heartbeat_s, &next_beat, &recorder, &peer))
        return NULL;
    void *socket = (void *)(uintptr_t)address;
    Py_INCREF(action);
    for (;;) {
        PyObject *checked = PyObject_CallOneArg(check, action);
        if (checked == NULL) {
            if (PyErr_ExceptionMatches(invalid_type)) {  /* invalid() raises it, with context */
                PyObject *type, *error, *trace;
                PyErr_Fetch(&type, &error, &trace);
                PyErr_NormalizeException(&type, &error, &trace);
                checked = PyObject_CallFunctionObjArgs(invalid, error, action, NULL);
                Py_XDECREF(type);
                Py_XDECREF(error);
                Py_XDECREF(trace);
                Py_XDECREF(checked);
            }
            goto fail;
        }
        Py_DECREF(checked);
        PyObject *result = PyObject_CallOneArg(env_step, action);
        if (result == NULL) goto fail;
        /* result[i], as the Python loop reads it (its errors' texts included) */
        PyObject *reward = PyObject_GetItem(result, INDEX[0]);
        PyObject *observation = reward ? PyObject_GetItem(result, INDEX[1]) : NULL;
        PyObject *terminal = observation ? PyObject_GetItem(result, INDEX[2]) : NULL;
        Py_DECREF(result);
        if (terminal != NULL && offer != Py_None) {  /* a viewer's frame, before counting */
            long long shown;
            int over = PyObject_IsTrue(terminal);
            PyObject *offered = over >= 0 && get_int(counter, NUM_STEPS, &shown)
                ? PyObject_CallFunction(offer, "OLLO", snapshot, episode, shown,
                                        over ? Py_True : Py_False) : NULL;
            if (offered == NULL) Py_CLEAR(terminal);
            Py_XDECREF(offered);
        }
        PyObject *ended = terminal ? PyObject_CallFunctionObjArgs(count_step, reward, terminal,
                                                                  NULL) : NULL;
        Py_XDECREF(terminal);
        int is_end = ended ? PyObject_IsTrue(ended) : -1;
        Py_XDECREF(ended);
        if (is_end != 0) {
            Py_XDECREF(observation);
            Py_DECREF(action);
            if (is_end < 0) {
                Py_XDECREF(reward);
                return NULL;
            }
            return Py_BuildValue("ON", Py_True, reward);
        }
        long long num_steps, seq;
        double real = -1.0;  /* float(reward), as the Python loop sends it */
        int ok = get_int(counter, NUM_STEPS, &num_steps) && set_int(client, STEP, num_steps)
                 && !((real = PyFloat_AsDouble(reward)) == -1.0 && PyErr_Occurred())
                 && get_int(client, SEQ, &seq);
        PyObject *what = NULL;
        int more = 0, outcome = ok ? exchange_step(socket, seq + 1, episode, real, observation,
                                                   value_type, max_bytes, &what, &more,
                                                   recorder, peer, num_steps) : -1;
        PyObject *next;
        if (outcome == ACTION) next = set_int(client, SEQ, seq + 1) ? what : NULL;
        else if (outcome == NOT_SENT)
            next = PyObject_CallFunction(python_step, "dO", real, observation);
        else if (outcome > 0)
            next = PyObject_CallFunction(settle, "iLNO", outcome, seq + 1,
                                         what ? what : Py_NewRef(Py_None),
                                         more ? Py_True : Py_False);
        else next = NULL;
        if (outcome == ACTION && next == NULL) Py_DECREF(what);
        Py_DECREF(reward);
        Py_DECREF(observation);
        if (next == NULL) goto fail;
        Py_SETREF(action, next);
        double now = monotonic_s();
        if (now >= next_beat) {
            next_beat = now + heartbeat_s;
            PyObject *sent = PyObject_CallFunction(beat, "L", num_steps);
            if (sent == NULL) goto fail;
            Py_DECREF(sent);
        }
        PyObject *running = PyObject_GetAttr(counter, RUNNING);
        int still = running ? PyObject_IsTrue(running) : -1;
        Py_XDECREF(running);
        if (still < 0) goto fail;
        if (!still) return Py_BuildValue("ON", Py_False, action);
    }
fail:
    Py_DECREF(action);
    return NULL;
}
