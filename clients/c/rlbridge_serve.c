/* The agent's request loop on a ZeroMQ ROUTER socket, with optional CURVE and a ZAP handler. */
#define _POSIX_C_SOURCE 200809L
#include "rlbridge_agent.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <zmq.h>

#define IMPLEMENTATION "rlbridge-c"
#define LANGUAGE "c"
#define MAX_OUT_FRAMES 16
#define MAX_IDENTITY_BYTES 256
#define MAX_AUTHORIZED 64
#define Z85_KEY_CHARS 40
#define MESSAGE_REPLY_BYTES 65536
#define REPEAT_LOG_MS 10000

static volatile sig_atomic_t stopping = 0;

static void on_signal(int signum) {
    (void)signum;
    stopping = 1;
}

/* PROTOCOL.md's agent states: AGENT_INIT makes READY, AGENT_START RUNNING, AGENT_END READY
 * again, AGENT_CLEANUP FRESH. */
typedef enum { FRESH, READY, RUNNING } agent_state;

/* The experiment this agent serves: the client identity whose AGENT_INIT started it. */
typedef struct {
    int active;
    unsigned char owner[MAX_IDENTITY_BYTES];
    size_t owner_size;
    long long started_ms, last_heard_ms;
} session;

/* One received request: the frames after the ROUTER identity (and REQ's delimiter). */
typedef struct {
    zmq_msg_t identity;
    int delimited;              /* a REQ client: its empty delimiter frame goes back in the reply */
    zmq_msg_t parts[RLB_MAX_MESSAGE_FRAMES];
    size_t n_parts;             /* stored: at most RLB_MAX_MESSAGE_FRAMES */
    size_t n_frames;            /* received, the drained excess included */
    size_t total_bytes;
} request;

typedef struct {
    const rlb_agent *agent;
    const char *address;
    void *socket;
    agent_state state;
    session session;
    int stop;
    char authorized[MAX_AUTHORIZED][Z85_KEY_CHARS + 1];
    int n_authorized;
    request request;
} server;

static void warn(const server *s, const char *format, ...) {
    va_list args;
    va_start(args, format);
    fprintf(stderr, "rlbridge agent: ");
    vfprintf(stderr, format, args);
    fprintf(stderr, "\n");
    fflush(stderr);
    va_end(args);
    (void)s;
}

static void fail_text(char *error, const char *text) {
    snprintf(error, RLB_ERROR_TEXT_BYTES, "%s", text);
}

static long long now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* ---- CURVE keys -------------------------------------------------------------------------- */

/* Read `public-key = "..."` or `secret-key = "..."` (Z85) from a ZeroMQ certificate file. */
static int read_key(const char *path, const char *field, char *out) {
    FILE *file = fopen(path, "r");
    if (file == NULL)
        return 0;
    char line[512];
    int found = 0;
    while (!found && fgets(line, sizeof line, file)) {
        char *at = strstr(line, field);
        if (at == NULL)
            continue;
        char *quote = strchr(at, '"');
        if (quote != NULL && strlen(quote + 1) > Z85_KEY_CHARS && quote[1 + Z85_KEY_CHARS] == '"') {
            memcpy(out, quote + 1, Z85_KEY_CHARS);
            out[Z85_KEY_CHARS] = '\0';
            found = 1;
        }
    }
    fclose(file);
    return found;
}

static int load_authorized(server *s, const char *curve_dir) {
    char path[1024];
    snprintf(path, sizeof path, "%s/authorized_clients", curve_dir);
    DIR *directory = opendir(path);
    if (directory == NULL) {
        warn(s, "cannot open %s: %s", path, strerror(errno));
        return 0;
    }
    struct dirent *entry;
    while ((entry = readdir(directory)) != NULL && s->n_authorized < MAX_AUTHORIZED) {
        size_t length = strlen(entry->d_name);
        if (length < 5 || strcmp(entry->d_name + length - 4, ".key") != 0)
            continue;
        char file[1400];
        snprintf(file, sizeof file, "%s/%s", path, entry->d_name);
        if (read_key(file, "public-key", s->authorized[s->n_authorized]))
            s->n_authorized++;
    }
    closedir(directory);
    return 1;
}

static int apply_curve_server(server *s, void *socket, const char *curve_dir) {
    char path[1024], public_key[Z85_KEY_CHARS + 1], secret_key[Z85_KEY_CHARS + 1];
    snprintf(path, sizeof path, "%s/server.key_secret", curve_dir);
    if (!read_key(path, "public-key", public_key) || !read_key(path, "secret-key", secret_key)) {
        warn(s, "cannot read the CURVE server keys from %s (make them with `rlbridge keys %s`)",
             path, curve_dir);
        return 0;
    }
    if (!load_authorized(s, curve_dir))
        return 0;
    int yes = 1;
    zmq_setsockopt(socket, ZMQ_CURVE_SERVER, &yes, sizeof yes);
    zmq_setsockopt(socket, ZMQ_CURVE_PUBLICKEY, public_key, Z85_KEY_CHARS);
    zmq_setsockopt(socket, ZMQ_CURVE_SECRETKEY, secret_key, Z85_KEY_CHARS);
    zmq_setsockopt(socket, ZMQ_ZAP_DOMAIN, "rlbridge", 8);
    return 1;
}

static int recv_string(void *socket, char *out, size_t size) {
    int n = zmq_recv(socket, out, size - 1, 0);
    if (n < 0)
        return -1;
    if ((size_t)n > size - 1)
        n = (int)size - 1;
    out[n] = '\0';
    return n;
}

/* Answer one ZAP request (RFC 27): allow the client keys in authorized_clients, log refusals. */
static void answer_zap(server *s, void *zap) {
    char version[16], request_id[256], domain[256], address[256], identity[256], mechanism[32];
    unsigned char client_key[64];
    recv_string(zap, version, sizeof version);
    int id_length = zmq_recv(zap, request_id, sizeof request_id, 0);
    recv_string(zap, domain, sizeof domain);
    recv_string(zap, address, sizeof address);
    recv_string(zap, identity, sizeof identity);
    recv_string(zap, mechanism, sizeof mechanism);
    int key_length = 0;
    int more = 0;
    size_t more_size = sizeof more;
    zmq_getsockopt(zap, ZMQ_RCVMORE, &more, &more_size);
    if (more)
        key_length = zmq_recv(zap, client_key, sizeof client_key, 0);
    for (;;) { /* drain anything else */
        zmq_getsockopt(zap, ZMQ_RCVMORE, &more, &more_size);
        if (!more)
            break;
        char sink[256];
        zmq_recv(zap, sink, sizeof sink, 0);
    }
    char z85[Z85_KEY_CHARS + 1] = "";
    int allowed = 0;
    if (strcmp(mechanism, "CURVE") == 0 && key_length == 32) {
        zmq_z85_encode(z85, client_key, 32);
        for (int i = 0; i < s->n_authorized && !allowed; i++)
            allowed = strcmp(z85, s->authorized[i]) == 0;
    }
    if (!allowed)
        warn(s, "refused a %s client from %s: its public key %s is not in authorized_clients",
             mechanism, address, z85[0] ? z85 : "(none)");
    const char *status = allowed ? "200" : "400";
    const char *text = allowed ? "OK" : "client key not authorized";
    zmq_send(zap, "1.0", 3, ZMQ_SNDMORE);
    zmq_send(zap, request_id, id_length > 0 ? (size_t)id_length : 0, ZMQ_SNDMORE);
    zmq_send(zap, status, 3, ZMQ_SNDMORE);
    zmq_send(zap, text, strlen(text), ZMQ_SNDMORE);
    zmq_send(zap, allowed ? z85 : "", allowed ? Z85_KEY_CHARS : 0, ZMQ_SNDMORE);
    zmq_send(zap, "", 0, 0);
}

/* Log a monitor event: a peer whose CURVE handshake failed before ZAP was asked. */
static void report_handshake_failure(server *s, void *monitor) {
    unsigned char event[6];
    char endpoint[256];
    if (zmq_recv(monitor, event, sizeof event, 0) < 0)
        return;
    int n = zmq_recv(monitor, endpoint, sizeof endpoint - 1, 0);
    endpoint[n > 0 ? (n < (int)sizeof endpoint ? n : (int)sizeof endpoint - 1) : 0] = '\0';
    uint16_t kind;
    uint32_t value;
    memcpy(&kind, event, sizeof kind);
    memcpy(&value, event + 2, sizeof value);
    const char *reason = kind == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL
        ? "the connection broke during the handshake (as with a peer without CURVE)"
        : value == ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC
        ? "its messages do not decrypt with our key (it has the wrong server key)"
        : value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH ? "it does not speak CURVE"
        : "ZeroMQ protocol error";
    /* A peer that keeps reconnecting is logged once per REPEAT_LOG_MS. */
    static char last[512];
    static long long last_ms = -REPEAT_LOG_MS;
    char text[512];
    snprintf(text, sizeof text, "%s %s", endpoint, reason);
    if (strcmp(text, last) == 0 && now_ms() - last_ms < REPEAT_LOG_MS)
        return;
    snprintf(last, sizeof last, "%s", text);
    last_ms = now_ms();
    warn(s, "refused a peer on %s: the CURVE handshake failed: %s (%#x)", endpoint, reason,
         value);
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
    warn(s, "error %s: %s", rlb_error_name(code), text);
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
    if (body->type != MSGPACK_OBJECT_ARRAY || body->via.array.size != 4) {
        fail_text(error, "hello body must be [role, version, implementation, language]");
        return RLB_BAD_FIELD;
    }
    const msgpack_object *f = body->via.array.ptr;
    if (f[0].type != MSGPACK_OBJECT_STR || f[1].type != MSGPACK_OBJECT_POSITIVE_INTEGER
        || f[2].type != MSGPACK_OBJECT_STR || f[3].type != MSGPACK_OBJECT_STR) {
        fail_text(error, "hello body must be [role str, version int, implementation str, "
                         "language str]");
        return RLB_BAD_FIELD;
    }
    if (!string_is(&f[0], "experiment") && !string_is(&f[0], "environment")
        && !string_is(&f[0], "agent")) {
        snprintf(error, RLB_ERROR_TEXT_BYTES,
                 "hello role must be experiment, environment or agent; got '%.*s'",
                 (int)(f[0].via.str.size < 64 ? f[0].via.str.size : 64), f[0].via.str.ptr);
        return RLB_BAD_FIELD;
    }
    if (f[1].via.u64 != RLB_PROTOCOL_VERSION) {
        snprintf(error, RLB_ERROR_TEXT_BYTES,
                 "protocol version mismatch: expected %d, got %llu from %.*s",
                 RLB_PROTOCOL_VERSION, (unsigned long long)f[1].via.u64,
                 (int)(f[2].via.str.size < 64 ? f[2].via.str.size : 64), f[2].via.str.ptr);
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

/* Default agent_message: "seed N" seeds through agent->seed and answers "ok"; a bad seed
 * argument answers an error string (messages are free text: they never raise); else "". */
static void default_message(const rlb_agent *agent, const char *text, char *reply,
                            size_t reply_size) {
    reply[0] = '\0';
    while (*text == ' ' || *text == '\t' || *text == '\n')
        text++;
    if (strncmp(text, "seed", 4) != 0 || (text[4] != '\0' && strchr(" \t\n", text[4]) == NULL))
        return;
    const char *argument = text + 4;
    while (*argument == ' ' || *argument == '\t' || *argument == '\n')
        argument++;
    size_t length = strlen(argument);
    while (length > 0 && strchr(" \t\n", argument[length - 1]) != NULL)
        length--;
    size_t digits = strspn(argument, "0123456789");
    errno = 0;
    unsigned long long seed = digits ? strtoull(argument, NULL, 10) : 0;
    if (digits == 0 || digits != length || errno == ERANGE) {
        snprintf(reply, reply_size, "error: seed takes a non-negative integer; got '%.*s'",
                 (int)(length < 200 ? length : 200), argument);
        return;
    }
    if (agent->seed != NULL)
        agent->seed(agent->state, (uint64_t)seed);
    snprintf(reply, reply_size, "ok");
}

static int serves(int type) {
    return type == RLB_HELLO || type == RLB_HEARTBEAT || type == RLB_SHUTDOWN
        || (type >= RLB_AGENT_INIT && type <= RLB_AGENT_MESSAGE);
}

static int is_owner(const server *s) {
    const zmq_msg_t *identity = &s->request.identity;
    return s->session.active && zmq_msg_size((zmq_msg_t *)identity) == s->session.owner_size
        && memcmp(zmq_msg_data((zmq_msg_t *)identity), s->session.owner,
                  s->session.owner_size) == 0;
}

/* A session ends when its owner says so or has been silent for RLB_SESSION_IDLE_MS. */
static void track_session(server *s) {
    if (!s->session.active)
        return;
    if (is_owner(s))
        s->session.last_heard_ms = now_ms();
    else if (now_ms() - s->session.last_heard_ms >= RLB_SESSION_IDLE_MS)
        s->session.active = 0;
}

static int claim_session(server *s, char *error) {
    if (s->session.active && !is_owner(s)) {
        snprintf(error, RLB_ERROR_TEXT_BYTES,
                 "this agent already serves an experiment (session started by AGENT_INIT %lld s "
                 "ago); start another agent process for a second experiment",
                 (now_ms() - s->session.started_ms) / 1000);
        return RLB_WRONG_STATE;
    }
    return RLB_OK;
}

static void start_session(server *s) {
    if (is_owner(s))
        return;
    zmq_msg_t *identity = &s->request.identity;
    size_t size = zmq_msg_size(identity);
    s->session.owner_size = size < MAX_IDENTITY_BYTES ? size : MAX_IDENTITY_BYTES;
    memcpy(s->session.owner, zmq_msg_data(identity), s->session.owner_size);
    s->session.started_ms = s->session.last_heard_ms = now_ms();
    s->session.active = 1;
}

static int need_state(const server *s, int type, char *error) {
    const char *names[] = {"FRESH (before AGENT_INIT)", "READY (no episode running)",
                           "RUNNING"};
    int allowed = type == RLB_AGENT_START ? s->state != FRESH : s->state == RUNNING;
    if (!allowed)
        snprintf(error, RLB_ERROR_TEXT_BYTES, "%s needs %s; the agent is %s",
                 rlb_type_name(type),
                 type == RLB_AGENT_START ? "a successful AGENT_INIT first"
                                         : "a running episode (after AGENT_START)",
                 names[s->state]);
    return allowed ? RLB_OK : RLB_WRONG_STATE;
}

/* Handle one request: body fields, then state, then the agent. Packs the reply body into pk;
 * returns RLB_OK or an error code with its text in `error`. */
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
        msgpack_pack_array(pk, 4);
        rlb_pack_str(pk, "agent");
        msgpack_pack_int(pk, RLB_PROTOCOL_VERSION);
        rlb_pack_str(pk, IMPLEMENTATION);
        rlb_pack_str(pk, LANGUAGE);
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
        if (is_owner(s))
            s->session.active = 0;
        s->stop = 1;
        msgpack_pack_nil(pk);
        return RLB_OK;
    case RLB_AGENT_INIT:
        if ((code = read_text(body, "task spec", &text, error)) != RLB_OK
            || (code = claim_session(s, error)) != RLB_OK) {
            free(text);
            return code;
        }
        s->state = FRESH; /* until the agent accepts the new task */
        if (agent->init != NULL && agent->init(agent->state, text, application) != 0) {
            code = RLB_APPLICATION;
        } else {
            s->state = READY;
            start_session(s);
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
        s->state = RUNNING;
        if ((agent->start ? agent->start(agent->state, &observation, action, application)
                          : agent->act(agent->state, &observation, action, application)) != 0)
            code = RLB_APPLICATION;
        rlb_value_free(&observation);
        if (code == RLB_OK)
            rlb_pack_value(pk, action, out_frames, n_out, MAX_OUT_FRAMES);
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
        if (code == RLB_OK)
            rlb_pack_value(pk, action, out_frames, n_out, MAX_OUT_FRAMES);
        break;
    case RLB_AGENT_END:
        if ((code = rlb_read_reward(body, &reward, error)) != RLB_OK
            || (code = need_state(s, message->type, error)) != RLB_OK)
            return code;
        s->state = READY;
        if (agent->end != NULL && agent->end(agent->state, reward, application) != 0)
            code = RLB_APPLICATION;
        else
            msgpack_pack_nil(pk);
        break;
    case RLB_AGENT_CLEANUP:
        if (body->type != MSGPACK_OBJECT_NIL) {
            snprintf(error, RLB_ERROR_TEXT_BYTES, "AGENT_CLEANUP takes a nil body; got %s",
                     rlb_kind_name(body));
            return RLB_BAD_FIELD;
        }
        s->state = FRESH;
        if (is_owner(s))
            s->session.active = 0;
        if (agent->cleanup != NULL && agent->cleanup(agent->state, application) != 0)
            code = RLB_APPLICATION;
        else
            msgpack_pack_nil(pk);
        break;
    case RLB_AGENT_MESSAGE: {
        if ((code = read_text(body, "agent_message text", &text, error)) != RLB_OK)
            return code;
        char *reply = calloc(1, MESSAGE_REPLY_BYTES);
        if (agent->message != NULL) {
            if (agent->message(agent->state, text, reply, MESSAGE_REPLY_BYTES, application) != 0)
                code = RLB_APPLICATION;
        } else {
            default_message(agent, text, reply, MESSAGE_REPLY_BYTES);
        }
        if (code == RLB_OK)
            rlb_pack_str(pk, reply);
        free(reply);
        free(text);
        break;
    }
    default: /* serves() let through only the types above */
        return RLB_WRONG_STATE;
    }
    if (code == RLB_APPLICATION)
        snprintf(error, RLB_ERROR_TEXT_BYTES, "agent raised %.480s", application);
    return code;
}

/* Answer the request in s->request, in the order of checks of PROTOCOL.md. */
static void handle(server *s, size_t max_bytes) {
    request *r = &s->request;
    char error[RLB_ERROR_TEXT_BYTES] = "";
    rlb_envelope message = {0};
    extra_frames frames = {0};
    for (size_t i = 1; i < r->n_parts; i++) {
        frames.data[frames.count] = zmq_msg_data(&r->parts[i]);
        frames.size[frames.count++] = zmq_msg_size(&r->parts[i]);
    }
    track_session(s);
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
                 "AGENT_START, AGENT_STEP, AGENT_END, AGENT_CLEANUP, AGENT_MESSAGE",
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
    msgpack_sbuffer_destroy(&buffer);
    msgpack_unpacked_destroy(&root);
}

/* Receive one request into s->request: the identity, REQ's empty delimiter if there is one,
 * then at most RLB_MAX_MESSAGE_FRAMES frames; the excess is drained without being kept.
 * Returns 0 when nothing could be received. */
static int receive_request(server *s) {
    request *r = &s->request;
    zmq_msg_init(&r->identity);
    if (zmq_msg_recv(&r->identity, s->socket, 0) < 0) {
        zmq_msg_close(&r->identity);
        return 0;
    }
    r->delimited = 0;
    r->n_parts = r->n_frames = r->total_bytes = 0;
    int more = zmq_msg_more(&r->identity);
    while (more) {
        zmq_msg_t *part = &r->parts[r->n_parts < RLB_MAX_MESSAGE_FRAMES ? r->n_parts : 0];
        zmq_msg_t excess;
        if (r->n_parts >= RLB_MAX_MESSAGE_FRAMES)
            part = &excess;
        zmq_msg_init(part);
        zmq_msg_recv(part, s->socket, 0);
        more = zmq_msg_more(part);
        if (r->n_frames == 0 && !r->delimited && zmq_msg_size(part) == 0 && more) {
            r->delimited = 1;
            zmq_msg_close(part);
            continue;
        }
        r->n_frames++;
        r->total_bytes += zmq_msg_size(part);
        if (part == &excess)
            zmq_msg_close(part);
        else
            r->n_parts++;
    }
    if (r->n_parts == 0) {
        zmq_msg_init(&r->parts[0]);
        r->n_parts = 1;
    }
    return 1;
}

static void release_request(server *s) {
    for (size_t i = 0; i < s->request.n_parts; i++)
        zmq_msg_close(&s->request.parts[i]);
    zmq_msg_close(&s->request.identity);
}

int rlb_main(int argc, char **argv, const rlb_agent *agent,
             int (*opt_callback)(void *state, const char *key, const char *value)) {
    rlb_options options;
    char address[1024];
    int code = rlb_parse_args(argc, argv, &options, address, sizeof address, opt_callback,
                              agent->state);
    return code ? code : rlb_serve(agent, &options);
}

int rlb_serve(const rlb_agent *agent, const rlb_options *options) {
    if ((agent->start == NULL || agent->step == NULL) && agent->act == NULL) {
        fprintf(stderr, "rlbridge agent %s: give start and step, or act\n", agent->name);
        return 2;
    }
    static server s;
    memset(&s, 0, sizeof s);
    s.agent = agent;
    s.address = options->address;
    size_t max_bytes = options->max_message_bytes ? options->max_message_bytes
                                                  : RLB_MAX_MESSAGE_BYTES;
    void *context = zmq_ctx_new();
    void *zap = NULL;
    s.socket = zmq_socket(context, ZMQ_ROUTER);
    int linger = RLB_LINGER_MS;
    zmq_setsockopt(s.socket, ZMQ_LINGER, &linger, sizeof linger);
    if (options->curve_dir != NULL) {
        zap = zmq_socket(context, ZMQ_REP);
        zmq_setsockopt(zap, ZMQ_LINGER, &linger, sizeof linger);
        if (zmq_bind(zap, "inproc://zeromq.zap.01") != 0
            || !apply_curve_server(&s, s.socket, options->curve_dir)) {
            zmq_close(zap);
            zmq_close(s.socket);
            zmq_ctx_term(context);
            return 2;
        }
    }
    void *monitor = NULL;
    if (zap != NULL) {
        /* Peers that fail before the ZAP handler is asked: wrong server key, or no CURVE. */
        zmq_socket_monitor(s.socket, "inproc://rlbridge-agent-monitor",
                           ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL
                           | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL);
        monitor = zmq_socket(context, ZMQ_PAIR);
        zmq_setsockopt(monitor, ZMQ_LINGER, &linger, sizeof linger);
        zmq_connect(monitor, "inproc://rlbridge-agent-monitor");
    }
    int rc = options->connect ? zmq_connect(s.socket, options->address)
                              : zmq_bind(s.socket, options->address);
    if (rc != 0) {
        warn(&s, "cannot %s %s: %s", options->connect ? "connect to" : "bind",
             options->address, zmq_strerror(errno));
        if (zap)
            zmq_close(zap);
        zmq_close(s.socket);
        zmq_ctx_term(context);
        return 2;
    }
    struct sigaction action = {0};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    sigaction(SIGTERM, &action, NULL);
    sigaction(SIGINT, &action, NULL);
    warn(&s, "serving %s on %s%s", agent->name ? agent->name : "agent", options->address,
         options->curve_dir ? " with CURVE" : "");
    long long idle_since = now_ms();
    int exit_code = 0;
    while (!s.stop && !stopping) {
        zmq_pollitem_t items[3] = {{s.socket, 0, ZMQ_POLLIN, 0}, {zap, 0, ZMQ_POLLIN, 0},
                                   {monitor, 0, ZMQ_POLLIN, 0}};
        int ready = zmq_poll(items, zap ? 3 : 1, RLB_POLL_INTERVAL_MS);
        if (ready < 0) {
            if (errno == EINTR)
                continue;
            warn(&s, "poll failed: %s", zmq_strerror(errno));
            exit_code = 1;
            break;
        }
        if (zap && (items[1].revents & ZMQ_POLLIN))
            answer_zap(&s, zap);
        if (monitor && (items[2].revents & ZMQ_POLLIN))
            report_handshake_failure(&s, monitor);
        if (!(items[0].revents & ZMQ_POLLIN)) {
            if (options->idle_timeout_ms > 0 && now_ms() - idle_since > options->idle_timeout_ms) {
                warn(&s, "no request for %ld ms; stopping", options->idle_timeout_ms);
                exit_code = 1;
                break;
            }
            continue;
        }
        if (!receive_request(&s))
            continue;
        handle(&s, max_bytes);
        release_request(&s);
        idle_since = now_ms();
    }
    if (monitor) {
        zmq_socket_monitor(s.socket, NULL, 0);
        zmq_close(monitor);
    }
    zmq_close(s.socket);
    if (zap)
        zmq_close(zap);
    zmq_ctx_term(context);
    return exit_code;
}
