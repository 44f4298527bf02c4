/* Internal to the C agent library (not for agents): the server's state shared by the request
 * loop (rlbridge_serve.c), the request handling (rlbridge_requests.c) and CURVE
 * (rlbridge_curve.c). */
#ifndef RLBRIDGE_INTERNAL_H
#define RLBRIDGE_INTERNAL_H

#include <zmq.h>

#include "rlbridge_agent.h"

#define RLB_MAX_AUTHORIZED 64
#define RLB_Z85_KEY_CHARS 40
#define RLB_MAX_IDENTITY_BYTES 256

/* The Z85 public keys of the clients a CURVE server lets in. */
typedef struct {
    char keys[RLB_MAX_AUTHORIZED][RLB_Z85_KEY_CHARS + 1];
    int count;
} rlb_authorized;

/* PROTOCOL.md section 12's agent states: AGENT_INIT makes READY, AGENT_START and AGENT_STEP
 * RUNNING, AGENT_END ENDED, AGENT_CLEANUP FRESH; a failed request leaves the state as it was. */
typedef enum { FRESH, READY, RUNNING, ENDED } agent_state;

/* The experiment this agent serves: the client identity whose AGENT_INIT started it. */
typedef struct {
    int active;
    unsigned char owner[RLB_MAX_IDENTITY_BYTES];
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
    rlb_authorized authorized;
    request request;
} server;

/* Log one line to stderr, prefixed "rlbridge agent: ". */
void rlb_warn(const char *format, ...);
long long rlb_now_ms(void);

/* Answer the request in s->request (PROTOCOL.md's order of checks, then the agent). */
void rlb_handle_request(server *s, size_t max_bytes);

/* Make `socket` a CURVE server with the keys of curve_dir; 0 after logging why not. */
int rlb_curve_server(void *socket, const char *curve_dir, rlb_authorized *authorized);
/* Answer one ZAP request: allow the client keys in `authorized`, log refusals. */
void rlb_answer_zap(void *zap, const rlb_authorized *authorized);
/* Log a monitor event: a peer whose CURVE handshake failed before ZAP was asked. */
void rlb_report_handshake_failure(void *monitor);

#endif
