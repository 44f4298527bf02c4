/* The agent server's requests: PROTOCOL.md's order of checks, ERROR replies that echo seq and
 * episode, the agent state machine, and the agent's calls (the batched ones in
 * rlbridge_batched.c, sessions in rlbridge_serve.c). */
#define _POSIX_C_SOURCE 200809L
#include "rlbridge_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define IMPLEMENTATION "rlbridge-c"
#define LANGUAGE "c"
#define MAX_OUT_FRAMES (RLB_MAX_MESSAGE_FRAMES - 1) /* what a receiver takes, the envelope aside */
#define MESSAGE_REPLY_BYTES 65536

static void fail_text(char *error, const char *text) {
    snprintf(error, RLB_ERROR_TEXT_BYTES, "%s", text);
}

/* ---- replies ----------------------------------------------------------------------------- */

static void send_reply(server *s, const msgpack_sbuffer *head, const rlb_array **frames,
                       size_t n_frames) {
    zmq_msg_t copy;
    zmq_msg_init(&copy);
    zmq_msg_copy(&copy, &s->request.identity);
    zmq_msg_send(&copy, s->socket, ZMQ_SNDMORE);
    if (s->request.delimited)
        zmq_send(s->socket, "", 0, ZMQ_SNDMORE);
    zmq_send(s->socket, head->data, head->size, n_frames ? ZMQ_SNDMORE : 0);
    for (size_t i = 0; i < n_frames; i++)
        zmq_send(s->socket, frames[i]->data, frames[i]->nbytes, i + 1 < n_frames ? ZMQ_SNDMORE : 0);
}

static void reply_error(server *s, int64_t seq, int64_t episode, int code, const char *text) {
    rlb_warn("error %s: %s", rlb_error_name(code), text);
    msgpack_sbuffer buffer;
    msgpack_packer pk;
    msgpack_sbuffer_init(&buffer);
    msgpack_packer_init(&pk, &buffer, msgpack_sbuffer_write);
    rlb_pack_header(&pk, RLB_ERROR, seq, episode);
    msgpack_pack_array(&pk, 2);
    msgpack_pack_int(&pk, code);
    rlb_pack_str(&pk, text);
    send_reply(s, &buffer, NULL, 0);
    msgpack_sbuffer_destroy(&buffer);
}

/* ---- requests ---------------------------------------------------------------------------- */

typedef struct {
    const void *data[RLB_MAX_MESSAGE_FRAMES];
    size_t size[RLB_MAX_MESSAGE_FRAMES];
    size_t count;
} extra_frames;

static int string_is(const msgpack_object *o, const char *text) {
    return o->type == MSGPACK_OBJECT_STR && o->via.str.size == strlen(text)
        && memcmp(o->via.str.ptr, text, o->via.str.size) == 0;
}

static int handle_hello(const msgpack_object *body, char *error) {
    if (body->type != MSGPACK_OBJECT_ARRAY || body->via.array.size != 5) {
        fail_text(error, "hello body must be [role, version, implementation, language, name]");
        return RLB_BAD_FIELD;
    }
    const msgpack_object *f = body->via.array.ptr;
    if (f[0].type != MSGPACK_OBJECT_STR
        || (f[1].type != MSGPACK_OBJECT_POSITIVE_INTEGER
            && f[1].type != MSGPACK_OBJECT_NEGATIVE_INTEGER)
        || f[2].type != MSGPACK_OBJECT_STR || f[3].type != MSGPACK_OBJECT_STR
        || f[4].type != MSGPACK_OBJECT_STR) {
        fail_text(error, "hello body must be [role str, version int, implementation str, "
                         "language str, name str]");
        return RLB_BAD_FIELD;
    }
    if (!string_is(&f[0], "experiment") && !string_is(&f[0], "environment")
        && !string_is(&f[0], "agent")) {
        snprintf(error, RLB_ERROR_TEXT_BYTES,
                 "hello role must be experiment, environment or agent; got '%.*s'",
                 (int)(f[0].via.str.size < 64 ? f[0].via.str.size : 64), f[0].via.str.ptr);
        return RLB_BAD_FIELD;
    }
    if (f[1].type != MSGPACK_OBJECT_POSITIVE_INTEGER || f[1].via.u64 != RLB_PROTOCOL_VERSION) {
        char got[24], where[280];
        if (f[1].type == MSGPACK_OBJECT_POSITIVE_INTEGER)
            snprintf(got, sizeof got, "%llu", (unsigned long long)f[1].via.u64);
        else
            snprintf(got, sizeof got, "%lld", (long long)f[1].via.i64);
        snprintf(where, sizeof where, " in the HELLO of %.*s",
                 (int)rlb_utf8_prefix(f[2].via.str.ptr, f[2].via.str.size, 64), f[2].via.str.ptr);
        snprintf(error, RLB_ERROR_TEXT_BYTES, RLB_VERSION_MISMATCH_TEXT, RLB_PROTOCOL_VERSION,
                 got, where, RLB_PROTOCOL_VERSION);
        return RLB_VERSION_MISMATCH;
    }
    if (string_is(&f[0], "agent")) {
        fail_text(error, "an agent takes HELLO from an experiment or an environment; got role "
                         "agent");
        return RLB_WRONG_STATE;
    }
    return RLB_OK;
}

static int read_text(const msgpack_object *body, const char *what, char **out, char *error) {
    if (body->type != MSGPACK_OBJECT_STR) {
        snprintf(error, RLB_ERROR_TEXT_BYTES, "%s must be a str; got %s", what,
                 rlb_kind_name(body));
        return RLB_BAD_FIELD;
    }
    *out = malloc(body->via.str.size + 1);
    memcpy(*out, body->via.str.ptr, body->via.str.size);
    (*out)[body->via.str.size] = '\0';
    return RLB_OK;
}

/* AGENT_QUERY (PROTOCOL.md section 8): [query, instance, argument]; an agent answers SEED (1)
 * alone, for every instance (nil) or one, with a seed from 0 to 2^64 - 1. Replies nil. */
static int handle_query(server *s, const msgpack_object *body, char *error) {
    if (body->type != MSGPACK_OBJECT_ARRAY || body->via.array.size != 3) {
        fail_text(error, "a query body must be [query, instance, argument]");
        return RLB_BAD_FIELD;
    }
    const msgpack_object *f = body->via.array.ptr;
    if (f[0].type != MSGPACK_OBJECT_POSITIVE_INTEGER || f[0].via.u64 != 1) {
        fail_text(error, "an agent answers only the SEED query (1)");
        return RLB_BAD_FIELD;
    }
    if (f[1].type != MSGPACK_OBJECT_NIL && f[1].type != MSGPACK_OBJECT_POSITIVE_INTEGER) {
        snprintf(error, RLB_ERROR_TEXT_BYTES,
                 "query instance must be nil or an int >= 0; got %s", rlb_kind_name(&f[1]));
        return RLB_BAD_FIELD;
    }
    if (f[2].type != MSGPACK_OBJECT_POSITIVE_INTEGER) {
        snprintf(error, RLB_ERROR_TEXT_BYTES,
                 "SEED takes an int from 0 to 18446744073709551615; got %s",
                 rlb_kind_name(&f[2]));
        return RLB_BAD_FIELD;
    }
    if (f[1].type == MSGPACK_OBJECT_NIL) {
        rlb_seed_agent(s, f[2].via.u64);
        return RLB_OK;
    }
    return rlb_seed_instance(s, f[1].via.u64, f[2].via.u64, error);
}

static int serves(int type) {
    return type == RLB_HELLO || type == RLB_HEARTBEAT || type == RLB_SHUTDOWN
        || (type >= RLB_AGENT_INIT && type <= RLB_AGENT_QUERY);
}

/* PROTOCOL.md section 12's agent table: AGENT_CLEANUP needs an AGENT_INIT or AGENT_BATCH_INIT
 * since the last cleanup, AGENT_START an AGENT_INIT; AGENT_STEP and AGENT_END need an episode
 * started (in ENDED too: RL-Glue 3.0.4's RL_step after a terminal step calls agent_step or
 * agent_end again); AGENT_BATCH_STEP needs BATCHED. */
static int need_state(const server *s, int type, char *error) {
    static const char *const meanings[] = {
        "not initialised: send AGENT_INIT first", "no episode started: send AGENT_START first",
        "inside an episode", "the episode ended",
        "answering for a batch since AGENT_BATCH_INIT: send AGENT_BATCH_STEP, or AGENT_INIT for "
        "one instance"};
    static const char *const names[] = {"FRESH", "READY", "RUNNING", "ENDED", "BATCHED"};
    int allowed = type == RLB_AGENT_CLEANUP ? s->state != FRESH
                : type == RLB_AGENT_START ? s->state == READY || s->state == RUNNING
                                            || s->state == ENDED
                : type == RLB_AGENT_BATCH_STEP ? s->state == BATCHED
                : s->state == RUNNING || s->state == ENDED;
    if (!allowed)
        snprintf(error, RLB_ERROR_TEXT_BYTES, "the agent cannot serve %s in state %s (%s)",
                 rlb_type_name(type), names[s->state], meanings[s->state]);
    return allowed ? RLB_OK : RLB_WRONG_STATE;
}

/* Handle one request: body fields, then state, then the agent. Packs the reply body into pk;
 * returns RLB_OK or an error code with its text in `error`. A request that fails leaves the
 * state as it was. */
static int dispatch(server *s, const rlb_envelope *message, const extra_frames *frames,
                    msgpack_packer *pk, const rlb_array **out_frames, size_t *n_out,
                    rlb_value *action, char *error) {
    const rlb_agent *agent = s->agent;
    const msgpack_object *body = &message->body;
    rlb_value observation;
    double reward;
    char *text = NULL;
    int code = RLB_OK;
    char application[RLB_ERROR_TEXT_BYTES] = "";
    switch (message->type) {
    case RLB_HELLO:
        if ((code = handle_hello(body, error)) != RLB_OK)
            return code;
        msgpack_pack_array(pk, 5);
        rlb_pack_str(pk, "agent");
        msgpack_pack_int(pk, RLB_PROTOCOL_VERSION);
        rlb_pack_str(pk, IMPLEMENTATION);
        rlb_pack_str(pk, LANGUAGE);
        rlb_pack_str(pk, agent->name != NULL ? agent->name : "");
        return RLB_OK;
    case RLB_HEARTBEAT:
        msgpack_pack_object(pk, *body);
        return RLB_OK;
    case RLB_SHUTDOWN:
        if (body->type != MSGPACK_OBJECT_NIL && body->type != MSGPACK_OBJECT_STR) {
            snprintf(error, RLB_ERROR_TEXT_BYTES, "SHUTDOWN takes a str or nil body; got %s",
                     rlb_kind_name(body));
            return RLB_BAD_FIELD;
        }
        if ((code = rlb_session_owner_only(s, message->type, error)) != RLB_OK)
            return code;
        if (rlb_session_owner(s))
            s->session.active = 0;
        s->stop = 1;
        msgpack_pack_nil(pk);
        return RLB_OK;
    case RLB_AGENT_INIT:
        if ((code = read_text(body, "task spec", &text, error)) != RLB_OK
            || (code = rlb_session_claim(s, error)) != RLB_OK) {
            free(text);
            return code;
        }
        rlb_batch_restore(s);
        if (agent->init != NULL && agent->init(agent->state, text, application) != 0) {
            code = RLB_APPLICATION;
        } else {
            rlb_batch_end(s);
            s->state = READY;
            rlb_session_start(s, message->type);
            msgpack_pack_nil(pk);
        }
        free(text);
        break;
    case RLB_AGENT_START:
        code = rlb_decode_value(body, frames->data, frames->size, frames->count, &observation,
                                error);
        if (code == RLB_OK && (code = need_state(s, message->type, error)) != RLB_OK)
            rlb_value_free(&observation);
        if (code != RLB_OK)
            return code;
        if ((agent->start ? agent->start(agent->state, &observation, action, application)
                          : agent->act(agent->state, &observation, action, application)) != 0)
            code = RLB_APPLICATION;
        rlb_value_free(&observation);
        if (code == RLB_OK) {
            s->state = RUNNING;
            rlb_pack_value(pk, action, out_frames, n_out, MAX_OUT_FRAMES);
        }
        break;
    case RLB_AGENT_STEP:
        if (body->type != MSGPACK_OBJECT_ARRAY || body->via.array.size != 2) {
            fail_text(error, "agent_step body must be [reward, observation]");
            return RLB_BAD_FIELD;
        }
        if ((code = rlb_read_reward(&body->via.array.ptr[0], &reward, error)) != RLB_OK)
            return code;
        code = rlb_decode_value(&body->via.array.ptr[1], frames->data, frames->size,
                                frames->count, &observation, error);
        if (code == RLB_OK && (code = need_state(s, message->type, error)) != RLB_OK)
            rlb_value_free(&observation);
        if (code != RLB_OK)
            return code;
        if ((agent->step ? agent->step(agent->state, reward, &observation, action, application)
                         : agent->act(agent->state, &observation, action, application)) != 0)
            code = RLB_APPLICATION;
        rlb_value_free(&observation);
        if (code == RLB_OK) {
            s->state = RUNNING;
            rlb_pack_value(pk, action, out_frames, n_out, MAX_OUT_FRAMES);
        }
        break;
    case RLB_AGENT_END:
        if ((code = rlb_read_reward(body, &reward, error)) != RLB_OK
            || (code = need_state(s, message->type, error)) != RLB_OK)
            return code;
        if (agent->end != NULL && agent->end(agent->state, reward, application) != 0) {
            code = RLB_APPLICATION;
        } else {
            s->state = ENDED;
            msgpack_pack_nil(pk);
        }
        break;
    case RLB_AGENT_CLEANUP:
        if (body->type != MSGPACK_OBJECT_NIL) {
            snprintf(error, RLB_ERROR_TEXT_BYTES, "AGENT_CLEANUP takes a nil body; got %s",
                     rlb_kind_name(body));
            return RLB_BAD_FIELD;
        }
        if ((code = need_state(s, message->type, error)) != RLB_OK
            || (code = rlb_session_owner_only(s, message->type, error)) != RLB_OK)
            return code;
        rlb_batch_restore(s);
        if (agent->cleanup != NULL && agent->cleanup(agent->state, application) != 0) {
            code = RLB_APPLICATION;
        } else {
            rlb_batch_end(s);
            s->state = FRESH;
            if (rlb_session_owner(s))
                s->session.active = 0;
            msgpack_pack_nil(pk);
        }
        break;
    case RLB_AGENT_MESSAGE: {
        if ((code = read_text(body, "agent_message text", &text, error)) != RLB_OK)
            return code;
        char *reply = calloc(1, MESSAGE_REPLY_BYTES);
        size_t reply_size;
        if (agent->message != NULL) {
            if (agent->message(agent->state, text, reply, MESSAGE_REPLY_BYTES, application) != 0)
                code = RLB_APPLICATION;
            reply_size = strnlen(reply, MESSAGE_REPLY_BYTES);
        } else {
            reply_size = 0; /* the user's text: an agent without a message callback knows none */
        }
        if (code == RLB_OK) {
            msgpack_pack_str(pk, reply_size);
            msgpack_pack_str_body(pk, reply, reply_size);
        }
        free(reply);
        free(text);
        break;
    }
    case RLB_AGENT_QUERY:
        if ((code = handle_query(s, body, error)) != RLB_OK)
            return code;
        msgpack_pack_nil(pk);
        return RLB_OK;
    case RLB_AGENT_BATCH_INIT: {
        size_t count = 0;
        if ((code = rlb_read_agent_batch_init(body, &text, &count, error)) != RLB_OK
            || (code = rlb_session_claim(s, error)) != RLB_OK) {
            free(text);
            return code;
        }
        if ((code = rlb_batch_init(s, text, count, application)) == RLB_OK) {
            s->state = BATCHED;
            rlb_session_start(s, message->type);
            msgpack_pack_nil(pk);
        }
        free(text);
        break;
    }
    case RLB_AGENT_BATCH_STEP: {
        rlb_agent_batch_step request;
        if ((code = rlb_read_agent_batch_step(body, frames->data, frames->size, frames->count,
                                              &request, error)) != RLB_OK)
            return code;
        if ((code = need_state(s, message->type, error)) == RLB_OK)
            code = rlb_batch_step(s, &request, pk, out_frames, n_out, MAX_OUT_FRAMES, error);
        rlb_batch_free(&request.observations);
        return code; /* rlb_batch_step writes its own APPLICATION text, naming the instance */
    }
    default: /* serves() let through only the types above */
        return RLB_WRONG_STATE;
    }
    if (code == RLB_APPLICATION)
        snprintf(error, RLB_ERROR_TEXT_BYTES, "agent raised %.480s", application);
    return code;
}

/* Answer the request in s->request, in the order of checks of PROTOCOL.md. */
void rlb_handle_request(server *s, size_t max_bytes) {
    request *r = &s->request;
    char error[RLB_ERROR_TEXT_BYTES] = "";
    rlb_envelope message = {0};
    extra_frames frames = {0};
    for (size_t i = 1; i < r->n_parts; i++) {
        frames.data[frames.count] = zmq_msg_data(&r->parts[i]);
        frames.size[frames.count++] = zmq_msg_size(&r->parts[i]);
    }
    rlb_session_track(s);
    /* Too large to decode at all: only the envelope's first items are read, from its bytes. */
    int too_large = r->n_frames > RLB_MAX_MESSAGE_FRAMES || r->total_bytes > max_bytes;
    msgpack_unpacked root;
    msgpack_unpacked_init(&root);
    const char *payload = zmq_msg_data(&r->parts[0]);
    size_t length = zmq_msg_size(&r->parts[0]);
    int code = too_large ? rlb_peek_envelope(payload, length, &message, error)
                         : rlb_decode_message(payload, length, &root, &message, error);
    if (code == RLB_OK && !serves(message.type)) {
        snprintf(error, RLB_ERROR_TEXT_BYTES,
                 "the agent does not serve %s; it serves HELLO, HEARTBEAT, SHUTDOWN, AGENT_INIT, "
                 "AGENT_START, AGENT_STEP, AGENT_END, AGENT_CLEANUP, AGENT_MESSAGE, "
                 "AGENT_BATCH_INIT, AGENT_BATCH_STEP, AGENT_QUERY",
                 rlb_type_name(message.type));
        code = RLB_WRONG_STATE;
    }
    if (code == RLB_OK && too_large) {
        if (r->n_frames > RLB_MAX_MESSAGE_FRAMES)
            snprintf(error, sizeof error, "message of %zu frames exceeds the limit of %d frames",
                     r->n_frames, RLB_MAX_MESSAGE_FRAMES);
        else
            snprintf(error, sizeof error, "message of %zu bytes exceeds the limit of %zu bytes",
                     r->total_bytes, max_bytes);
        code = RLB_TOO_LARGE;
    }
    int64_t seq = message.ids_read ? message.seq : 0;
    int64_t episode = message.ids_read ? message.episode : 0;
    if (code != RLB_OK) {
        reply_error(s, seq, episode, code, error);
        msgpack_unpacked_destroy(&root);
        return;
    }
    msgpack_sbuffer buffer;
    msgpack_packer pk;
    msgpack_sbuffer_init(&buffer);
    msgpack_packer_init(&pk, &buffer, msgpack_sbuffer_write);
    rlb_pack_header(&pk, message.type, seq, episode);
    const rlb_array *out_frames[MAX_OUT_FRAMES];
    size_t n_out = 0;
    rlb_value action = {0};
    code = dispatch(s, &message, &frames, &pk, out_frames, &n_out, &action, error);
    if (code == RLB_OK)
        send_reply(s, &buffer, out_frames, n_out);
    else
        reply_error(s, seq, episode, code, error);
    rlb_batch_reply_sent(s);
    msgpack_sbuffer_destroy(&buffer);
    msgpack_unpacked_destroy(&root);
}
