/* The agent's request loop on a ZeroMQ ROUTER socket, with optional CURVE and a ZAP handler, and
 * the one experiment (session) it serves at a time. */
#define _POSIX_C_SOURCE 200809L
#include "rlbridge_internal.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile sig_atomic_t stopping = 0;

static void on_signal(int signum) {
    (void)signum;
    stopping = 1;
}

void rlb_warn(const char *format, ...) {
    va_list args;
    va_start(args, format);
    fprintf(stderr, "rlbridge agent: ");
    vfprintf(stderr, format, args);
    fprintf(stderr, "\n");
    fflush(stderr);
    va_end(args);
}

long long rlb_now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* ---- sessions (PROTOCOL.md section 13) ---------------------------------------------------- */

int rlb_session_owner(const server *s) {
    const zmq_msg_t *identity = &s->request.identity;
    return s->session.active && zmq_msg_size((zmq_msg_t *)identity) == s->session.owner_size
        && memcmp(zmq_msg_data((zmq_msg_t *)identity), s->session.owner,
                  s->session.owner_size) == 0;
}

/* A session ends when its owner says so or has been silent for RLB_SESSION_IDLE_MS. */
void rlb_session_track(server *s) {
    if (!s->session.active)
        return;
    if (rlb_session_owner(s))
        s->session.last_heard_ms = rlb_now_ms();
    else if (rlb_now_ms() - s->session.last_heard_ms >= RLB_SESSION_IDLE_MS)
        s->session.active = 0;
}

int rlb_session_claim(server *s, char *error) {
    if (s->session.active && !rlb_session_owner(s)) {
        snprintf(error, RLB_ERROR_TEXT_BYTES,
                 "this agent already serves an experiment (session started by %s %lld s ago); "
                 "start another agent process for a second experiment",
                 rlb_type_name(s->session.init_type),
                 (rlb_now_ms() - s->session.started_ms + 500) / 1000);
        return RLB_WRONG_STATE;
    }
    return RLB_OK;
}

/* AGENT_CLEANUP and SHUTDOWN would reset or stop the owner's experiment: only the owner of an
 * active session may send them. */
int rlb_session_owner_only(server *s, int type, char *error) {
    if (s->session.active && !rlb_session_owner(s)) {
        snprintf(error, RLB_ERROR_TEXT_BYTES,
                 "this agent serves another client's experiment (session started by %s %lld s "
                 "ago); only that client may send %s%s",
                 rlb_type_name(s->session.init_type),
                 (rlb_now_ms() - s->session.started_ms + 500) / 1000, rlb_type_name(type),
                 type == RLB_SHUTDOWN ? " (or stop the process with SIGTERM)" : "");
        return RLB_WRONG_STATE;
    }
    return RLB_OK;
}

void rlb_session_start(server *s, int init_type) {
    if (rlb_session_owner(s))
        return;
    zmq_msg_t *identity = &s->request.identity;
    size_t size = zmq_msg_size(identity);
    s->session.owner_size = size < RLB_MAX_IDENTITY_BYTES ? size : RLB_MAX_IDENTITY_BYTES;
    memcpy(s->session.owner, zmq_msg_data(identity), s->session.owner_size);
    s->session.started_ms = s->session.last_heard_ms = rlb_now_ms();
    s->session.active = 1;
    s->session.init_type = init_type;
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
            || !rlb_curve_server(s.socket, options->curve_dir, &s.authorized)) {
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
        rlb_warn("cannot %s %s: %s", options->connect ? "connect to" : "bind",
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
    /* Who may connect, as curve.py's exposure() says it. */
    const char *exposure = options->curve_dir ? " with CURVE"
        : options->connect || strncmp(options->address, "tcp://", 6) != 0 ? ""
        : rlb_is_loopback_tcp(options->address)
            ? " (loopback tcp without CURVE: any user of this machine may connect)"
            : " (tcp without CURVE: anyone who reaches this address may connect)";
    rlb_warn("serving %s (C) on %s%s", agent->name ? agent->name : "agent", options->address,
             exposure);
    long long idle_since = rlb_now_ms();
    int exit_code = 0;
    while (!s.stop && !stopping) {
        zmq_pollitem_t items[3] = {{s.socket, 0, ZMQ_POLLIN, 0}, {zap, 0, ZMQ_POLLIN, 0},
                                   {monitor, 0, ZMQ_POLLIN, 0}};
        int ready = zmq_poll(items, zap ? 3 : 1, RLB_POLL_INTERVAL_MS);
        if (ready < 0) {
            if (errno == EINTR)
                continue;
            rlb_warn("poll failed: %s", zmq_strerror(errno));
            exit_code = 1;
            break;
        }
        if (zap && (items[1].revents & ZMQ_POLLIN))
            rlb_answer_zap(zap, &s.authorized);
        if (monitor && (items[2].revents & ZMQ_POLLIN))
            rlb_report_handshake_failure(monitor);
        if (!(items[0].revents & ZMQ_POLLIN)) {
            if (options->idle_timeout_ms > 0 && rlb_now_ms() - idle_since > options->idle_timeout_ms) {
                rlb_warn("no request for %ld ms; stopping", options->idle_timeout_ms);
                exit_code = 1;
                break;
            }
            continue;
        }
        if (!receive_request(&s))
            continue;
        rlb_handle_request(&s, max_bytes);
        release_request(&s);
        idle_since = rlb_now_ms();
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
