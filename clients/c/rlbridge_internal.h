/* Internal to the C agent library (not for agents): its error-text helper, and the server's
 * state shared by the request loop (rlbridge_serve.c), the request handling
 * (rlbridge_requests.c) and CURVE (rlbridge_curve.c). */
#ifndef RLBRIDGE_INTERNAL_H
#define RLBRIDGE_INTERNAL_H

#include <zmq.h>

#include "rlbridge_agent.h"

/* Write an error text of at most RLB_ERROR_TEXT_BYTES into ``error``, printf-style: the one
 * helper every decoder (envelope, values, batches) reports BAD_FIELD texts with. */
void rlb_fail(char *error, const char *format, ...);

/* The bytes of the first `max_chars` characters of the UTF-8 text `text` of `size` bytes, so
 * that a text cut for a reply stays whole characters (a msgpack str must be valid UTF-8). */
size_t rlb_utf8_prefix(const char *text, size_t size, size_t max_chars);

#define RLB_MAX_AUTHORIZED 64
#define RLB_Z85_KEY_CHARS 40
#define RLB_MAX_IDENTITY_BYTES 256

/* The Z85 public keys of the clients a CURVE server lets in. */
typedef struct {
    char keys[RLB_MAX_AUTHORIZED][RLB_Z85_KEY_CHARS + 1];
    int count;
} rlb_authorized;

/* PROTOCOL.md section 12's agent states: AGENT_INIT makes READY, AGENT_START and AGENT_STEP
 * RUNNING, AGENT_END ENDED, AGENT_CLEANUP FRESH, AGENT_BATCH_INIT BATCHED; a failed request
 * leaves the state as it was. */
typedef enum { FRESH, READY, RUNNING, ENDED, BATCHED } agent_state;

/* Each instance's own state in BATCHED (PROTOCOL.md 16.2). */
typedef enum { INSTANCE_NEW, INSTANCE_RUNNING, INSTANCE_ENDED } instance_state;

/* The instances since AGENT_BATCH_INIT, and what a batched reply needs until it is sent. */
typedef struct {
    size_t count;               /* 0: not batched */
    uint8_t *states;            /* an instance_state per instance */
    unsigned char *saved;       /* count x agent->instance_size: each instance's own bytes */
    size_t current;             /* the instance whose bytes are in the agent's state now */
    void **reply_blocks;        /* the reply's actions, and their stacked form */
    size_t n_reply_blocks;
} batch;

/* The experiment this agent serves: the client identity whose AGENT_INIT started it. */
typedef struct {
    int active;
    unsigned char owner[RLB_MAX_IDENTITY_BYTES];
    size_t owner_size;
    long long started_ms, last_heard_ms;
    int init_type;              /* AGENT_INIT or AGENT_BATCH_INIT */
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
    rlb_authorized authorized;
    request request;
    batch batch;
} server;

/* 1 for ipc://, inproc:// and tcp on 127.*, localhost or [::1] (rlbridge_args.c). */
int rlb_is_loopback_tcp(const char *address);
/* Log one line to stderr, prefixed "rlbridge agent: ". */
void rlb_warn(const char *format, ...);
long long rlb_now_ms(void);

/* Sessions: whether the request comes from the session's owner; forget a silent owner's session;
 * WRONG_STATE for a second experiment's INIT, and for another client's AGENT_CLEANUP or SHUTDOWN;
 * make the sender the owner. */
int rlb_session_owner(const server *s);
void rlb_session_track(server *s);
int rlb_session_claim(server *s, char *error);
int rlb_session_owner_only(server *s, int type, char *error);
void rlb_session_start(server *s, int init_type);

/* Answer the request in s->request (PROTOCOL.md's order of checks, then the agent). */
void rlb_handle_request(server *s, size_t max_bytes);

/* ---- batched calls (rlbridge_batched.c) ---- */

/* AGENT_BATCH_INIT's body: the task spec (malloc'ed) and the number of instances (BAD_FIELD). */
int rlb_read_agent_batch_init(const msgpack_object *body, char **task_spec, size_t *count,
                              char *error);
/* Initialise the agent for `count` instances, every one NEW; the state is untouched when
 * `init` fails (APPLICATION, its text in `application`). */
int rlb_batch_init(server *s, const char *task_spec, size_t count, char *application);
/* The calls of an AGENT_BATCH_STEP in state BATCHED, its actions packed into pk. */
int rlb_batch_step(server *s, rlb_agent_batch_step *request, msgpack_packer *pk,
                   const rlb_array **frames, size_t *n_frames, size_t max_frames, char *error);
/* Leaving BATCHED (AGENT_INIT, AGENT_CLEANUP): instance 0's bytes go back into the state. */
void rlb_batch_restore(server *s);
void rlb_batch_end(server *s);
/* Seed the agent: every instance i with rlb_instance_seed(seed, i) when batched. */
void rlb_seed_agent(server *s, uint64_t seed);
/* Seed one instance (its own seed, not an instance seed); 0, or BAD_FIELD for an instance the
 * agent does not answer for, with the text in `error`. */
int rlb_seed_instance(server *s, uint64_t instance, uint64_t seed, char *error);
/* Free what the last batched reply needed, once it is sent. */
void rlb_batch_reply_sent(server *s);

/* Make `socket` a CURVE server with the keys of curve_dir; 0 after logging why not. */
int rlb_curve_server(void *socket, const char *curve_dir, rlb_authorized *authorized);
/* Answer one ZAP request: allow the client keys in `authorized`, log refusals. */
void rlb_answer_zap(void *zap, const rlb_authorized *authorized);
/* Log a monitor event: a peer whose CURVE handshake failed before ZAP was asked. */
void rlb_report_handshake_failure(void *monitor);

#endif
