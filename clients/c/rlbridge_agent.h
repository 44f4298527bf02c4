/* The agent side of the rlbridge protocol (PROTOCOL.md) in C, on libzmq and msgpack-c.
 *
 * An agent fills in an rlb_agent with its callbacks and calls rlb_serve(): the
 * library binds a ZeroMQ ROUTER socket, answers HELLO, HEARTBEAT and SHUTDOWN
 * itself, checks every envelope, decodes observations, calls the agent, and
 * encodes its actions. Errors get the ERROR replies of PROTOCOL.md section 5 and
 * the server goes on serving. Requests outside the agent state machine are
 * WRONG_STATE, one experiment (session) is served at a time, and REQ clients
 * work. With a CURVE key directory (made by `rlbridge keys DIR`) it encrypts the
 * socket and refuses clients whose public key is not in DIR/authorized_clients,
 * logging each refusal. Batched requests (AGENT_BATCH_INIT, AGENT_BATCH_STEP) are served with
 * the same callbacks, once per instance: see rlb_agent.instance_offset.
 */
#ifndef RLBRIDGE_AGENT_H
#define RLBRIDGE_AGENT_H

#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>

#define RLB_PROTOCOL_VERSION 3 /* PROTOCOL.md's changelog: earlier peers are refused */
/* The VERSION_MISMATCH text of every implementation: expected, got (a decimal string), where
 * it was read, expected. */
#define RLB_VERSION_MISMATCH_TEXT                                                               \
    "protocol version mismatch: expected %d, got %s%s; this implementation speaks only "        \
    "version %d (PROTOCOL.md's changelog says what changed): run peers of the same protocol "   \
    "version"
#define RLB_MAX_DIMS 32
#define RLB_MAX_ARRAY_EXTENT_BYTES (1ull << 62) /* itemsize x the non-zero dimensions */
#define RLB_MAX_MESSAGE_FRAMES 1024             /* frames per message, the envelope included */
#define RLB_SESSION_IDLE_MS 60000               /* a silent session owner loses its session */
#define RLB_ZERO_COPY_THRESHOLD_BYTES (64 * 1024)
#define RLB_MAX_MESSAGE_BYTES (256u * 1024u * 1024u)
#define RLB_POLL_INTERVAL_MS 100
#define RLB_LINGER_MS 200
#define RLB_ERROR_TEXT_BYTES 512
/* The most instances a C agent answers for (AGENT_BATCH_INIT): 16 full environment shards of
 * MAX_INSTANCES (65536) each. More is BAD_FIELD. */
#define RLB_MAX_AGENT_INSTANCES (1u << 20)

enum rlb_message_type {
    RLB_HELLO = 1, RLB_ERROR = 2, RLB_HEARTBEAT = 3, RLB_SHUTDOWN = 4,
    RLB_ENV_INIT = 10, RLB_ENV_START = 11, RLB_ENV_STEP = 12, RLB_ENV_CLEANUP = 13,
    RLB_ENV_MESSAGE = 14, RLB_ENV_BATCH_INIT = 15, RLB_ENV_BATCH_STEP = 16, RLB_ENV_QUERY = 17,
    RLB_AGENT_INIT = 20, RLB_AGENT_START = 21, RLB_AGENT_STEP = 22, RLB_AGENT_END = 23,
    RLB_AGENT_CLEANUP = 24, RLB_AGENT_MESSAGE = 25, RLB_AGENT_BATCH_INIT = 26,
    RLB_AGENT_BATCH_STEP = 27, RLB_AGENT_QUERY = 28,
    RLB_RUN_EPISODE = 30, RLB_DELEGATE = 31, RLB_RUN_BATCH = 32
};

/* What AGENT_BATCH_STEP asks for one instance (PROTOCOL.md 16.4), a |u1 code each. */
enum rlb_agent_call {
    RLB_CALL_STEP = 0,          /* agent_step(reward, observation) -> action */
    RLB_CALL_START = 1,         /* agent_start(observation) -> action */
    RLB_CALL_END = 2,           /* agent_end(reward) */
    RLB_CALL_END_START = 3,     /* agent_end(reward), then agent_start(observation) -> action */
    RLB_CALL_NONE = 4           /* nothing */
};
#define RLB_AGENT_CALLS 5

enum rlb_error_code {
    RLB_OK = 0, RLB_MALFORMED = 1, RLB_UNKNOWN_TYPE = 2, RLB_BAD_FIELD = 3, RLB_TOO_LARGE = 4,
    RLB_VERSION_MISMATCH = 5, RLB_INVALID_ACTION = 6, RLB_WRONG_STATE = 7,
    RLB_PEER_TIMEOUT = 8, RLB_PEER_ERROR = 9, RLB_APPLICATION = 10, RLB_ERR_SHUTDOWN = 11
};

/* A numeric array of an observation or action: dtype code, shape, little-endian bytes. */
typedef struct {
    char dtype[4];              /* "|b1", "|i1", "|u1", "<i2", ... "<f8" */
    size_t ndim;
    uint64_t shape[RLB_MAX_DIMS];
    const uint8_t *data;        /* C order; points into the message or the agent's memory */
    size_t nbytes;
} rlb_array;

/* An observation or action: RL-Glue's ints, doubles and chars, plus arrays. */
typedef struct {
    int64_t *ints;
    size_t n_ints;
    double *doubles;
    size_t n_doubles;
    const char *chars;          /* not NUL-terminated on decode: use n_chars */
    size_t n_chars;
    rlb_array *arrays;
    size_t n_arrays;
} rlb_value;

/* Callbacks return 0, or non-zero after writing a message into `error` (becomes APPLICATION). */
typedef struct {
    const char *name;           /* what HELLO's reply says the agent is (its short name), and logs */
    void *state;
    int (*init)(void *state, const char *task_spec, char *error);
    int (*start)(void *state, const rlb_value *observation, rlb_value *action, char *error);
    int (*step)(void *state, double reward, const rlb_value *observation, rlb_value *action,
                char *error);
    /* For a policy that needs only the observation: serves agent_start and agent_step when
     * `start` and `step` are NULL. */
    int (*act)(void *state, const rlb_value *observation, rlb_value *action, char *error);
    int (*end)(void *state, double reward, char *error);
    int (*cleanup)(void *state, char *error);
    /* The user's AGENT_MESSAGE text: writes a NUL-terminated reply of at most reply_size bytes.
     * NULL: every text gets "". */
    int (*message)(void *state, const char *text, char *reply, size_t reply_size, char *error);
    /* Called for the SEED query (AGENT_QUERY, PROTOCOL.md section 8); NULL: ignored. */
    void (*seed)(void *state, uint64_t seed);
    /* Batched calls (PROTOCOL.md section 16). The library makes each instance's start, step
     * and end calls, in instance order, on this one agent, so what it learns is shared. The
     * instance_size bytes of `state` from instance_offset are one instance's own (its episode
     * so far, its generator): the library keeps a copy per instance, every copy starting as
     * `init` left them, and swaps the right one in before each call. They must be plain data
     * (no pointer into themselves). With SEED A for every instance, `seed` is called for each
     * instance i with rlb_instance_seed(A, i). instance_size 0: everything is shared. */
    size_t instance_offset, instance_size;
} rlb_agent;

typedef struct {
    const char *address;        /* e.g. tcp://0.0.0.0:5556 or ipc:///tmp/x/agent.sock */
    int connect;                /* 1: connect to an experiment that binds instead of binding */
    const char *curve_dir;      /* NULL: no CURVE */
    long idle_timeout_ms;       /* <= 0: never */
    size_t max_message_bytes;   /* 0: RLB_MAX_MESSAGE_BYTES */
} rlb_options;

/* ---- serving --------------------------------------------------------------------------- */

/* Parse the common command line: NAME-less options --bind/--connect ADDR, --curve-dir DIR,
 * --no-curve, --idle-timeout-ms N, --opt KEY=VALUE (returned through opt_callback).
 * Defaults follow PROTOCOL.md ($RLBRIDGE_AGENT_ADDR, then ipc://$TMPDIR/rlbridge-$UID/agent.sock;
 * CURVE from $RLBRIDGE_CURVE_DIR, required when binding a non-loopback tcp address).
 * Returns 0, or 2 after printing usage to stderr. */
int rlb_parse_args(int argc, char **argv, rlb_options *options, char *address_buffer,
                   size_t address_size,
                   int (*opt_callback)(void *state, const char *key, const char *value),
                   void *state);

/* Serve until SHUTDOWN, SIGTERM/SIGINT or the idle timeout; returns a process exit code. */
int rlb_serve(const rlb_agent *agent, const rlb_options *options);

/* A whole agent program's main(): rlb_parse_args (options go to opt_callback with
 * agent->state; NULL: no --opt accepted), then rlb_serve. */
int rlb_main(int argc, char **argv, const rlb_agent *agent,
             int (*opt_callback)(void *state, const char *key, const char *value));

/* ---- codec (also used by the tests) ------------------------------------------------------ */

typedef struct {
    int version, type;
    int64_t seq, episode;
    int ids_read;               /* 1: seq and episode were ints, even if the envelope is refused */
    msgpack_object body;
} rlb_envelope;

/* Check and decode an envelope in the order of PROTOCOL.md: a 5-item array (MALFORMED), int
 * version, type, seq, episode (BAD_FIELD), version (VERSION_MISMATCH), type (UNKNOWN_TYPE).
 * Returns RLB_OK or an error code with a message in `error`; sets out->ids_read either way. */
int rlb_decode_envelope(const msgpack_object *root, rlb_envelope *out, char *error);

/* Unpack the first frame and check its envelope: root must be initialised with
 * msgpack_unpacked_init and destroyed by the caller. Returns RLB_OK or an error code. */
int rlb_decode_message(const char *payload, size_t length, msgpack_unpacked *root,
                       rlb_envelope *out, char *error);

/* The checks of rlb_decode_envelope on the envelope's first four items only, read from the
 * bytes without decoding the body: for a message too large to decode. out->body stays nil. */
int rlb_peek_envelope(const char *payload, size_t length, rlb_envelope *out, char *error);

/* Decode a value; `frames`/`frame_sizes` are the message's extra frames. The value's
 * buffers are malloc'ed: free them with rlb_value_free. */
int rlb_decode_value(const msgpack_object *raw, const void *const *frames,
                     const size_t *frame_sizes, size_t n_frames, rlb_value *out, char *error);
void rlb_value_free(rlb_value *value);

/* Decode one array [dtype, shape, data] of a value (section 3); data points into the message. */
int rlb_decode_array(const msgpack_object *entry, const void *const *frames,
                     const size_t *frame_sizes, size_t n_frames, rlb_array *out, char *error);

/* Read a reward (float64, float32 or int). */
int rlb_read_reward(const msgpack_object *raw, double *out, char *error);

/* Pack [ints, doubles, chars, arrays]. Arrays of RLB_ZERO_COPY_THRESHOLD_BYTES or more are
 * appended to frames[*n_frames] (when frames is not NULL) and referenced by index. */
void rlb_pack_value(msgpack_packer *pk, const rlb_value *value, const rlb_array **frames,
                    size_t *n_frames, size_t max_frames);
void rlb_pack_str(msgpack_packer *pk, const char *text);
/* Start an envelope [version, type, seq, episode, <body follows>]. */
void rlb_pack_header(msgpack_packer *pk, int type, int64_t seq, int64_t episode);

/* Pack [dtype, shape, data]: inline bin, or a frame index when the array is
 * RLB_ZERO_COPY_THRESHOLD_BYTES or more and frames has room (as rlb_pack_value). */
void rlb_pack_array(msgpack_packer *pk, const rlb_array *array, const rlb_array **frames,
                    size_t *n_frames, size_t max_frames);

/* ---- batches and columns (PROTOCOL.md 16.1; rlbridge_batch.c) --------------------------- */

/* M values decoded from a batch, stacked or listed: read them with rlb_batch_value. Their chars
 * and array bytes point into the message. Free with rlb_batch_free. */
typedef struct {
    size_t count;
    int stacked;                /* 1: it arrived [M, ints, doubles, chars, arrays] */
    /* internal: the listed values, or the stacked parts and the row rlb_batch_value fills */
    rlb_value *listed;
    rlb_array ints, doubles, *arrays;
    size_t n_arrays;
    const msgpack_object *chars;
    rlb_value row;
} rlb_batch;

/* Decode a batch; `name` starts the BAD_FIELD texts ("AGENT_BATCH_STEP observations"). */
int rlb_decode_batch(const msgpack_object *raw, const void *const *frames,
                     const size_t *frame_sizes, size_t n_frames, const char *name,
                     rlb_batch *out, char *error);
void rlb_batch_free(rlb_batch *batch);
/* Value i of a batch; for a stacked batch, valid until the next call (its ints and doubles are
 * copied out of the rows, its arrays point at row i). */
const rlb_value *rlb_batch_value(rlb_batch *batch, size_t i);

/* Values packed as a batch: stacked when they share a layout (the same numbers of ints,
 * doubles and arrays, the same dtypes and shapes), else listed. Arrays of
 * RLB_ZERO_COPY_THRESHOLD_BYTES or more go to frames, as with rlb_pack_value. Returns the
 * stacked bytes that those frames point to (NULL when there are none): free it with free()
 * once the message is sent. */
void *rlb_pack_batch(msgpack_packer *pk, const rlb_value *values, size_t count,
                     const rlb_array **frames, size_t *n_frames, size_t max_frames);

/* Decode a column: a one-dimensional array of `dtype` (and `count` entries unless count < 0).
 * Senders put columns inline; a frame is accepted too, as for any array. */
int rlb_decode_column(const msgpack_object *raw, const void *const *frames,
                      const size_t *frame_sizes, size_t n_frames, const char *dtype,
                      const char *name, int64_t count, rlb_array *out, char *error);

/* Element i of a <i8 or <f8 column or array (little-endian on the wire). */
int64_t rlb_column_i64(const rlb_array *column, size_t i);
double rlb_column_f64(const rlb_array *column, size_t i);

/* AGENT_BATCH_STEP's body, read and checked as PROTOCOL.md 16.4 says (BAD_FIELD). */
typedef struct {
    int64_t first_instance;
    rlb_array calls;            /* |u1, one enum rlb_agent_call per instance */
    rlb_array rewards;          /* <f8, as many */
    rlb_batch observations;     /* one per STEP, START or END_START; free with rlb_batch_free */
} rlb_agent_batch_step;
int rlb_read_agent_batch_step(const msgpack_object *body, const void *const *frames,
                              const size_t *frame_sizes, size_t n_frames,
                              rlb_agent_batch_step *out, char *error);

/* Whether an agent call takes an observation (and gives an action): STEP, START, END_START. */
int rlb_call_takes_observation(int call);

/* Read an int64 (1), or say it is none (0): another type, or a uint64 past INT64_MAX. */
int rlb_read_i64(const msgpack_object *o, int64_t *out);

/* The msgpack kind of an object, for error texts: "nil", "int", "str", "array", ... */
const char *rlb_kind_name(const msgpack_object *o);

/* Names of message types and error codes (NULL / "UNKNOWN" when not in PROTOCOL.md). */
const char *rlb_type_name(int type);
const char *rlb_error_name(int code);

/* Bytes per element of a wire dtype, or 0 if the code is not a wire dtype. */
size_t rlb_dtype_size(const char *dtype, size_t length);

/* ---- task specs ---------------------------------------------------------------------------- */

#define RLB_MAX_RANGES 64
typedef struct {
    int n_action_ints;                      /* action int ranges, each (low high), counts expanded */
    int64_t action_low[RLB_MAX_RANGES], action_high[RLB_MAX_RANGES];
    int legal_mask;                         /* index of the observation's legal-mask array, or -1 */
} rlb_task_spec;

/* Read the action INTS ranges and the legal mask from an RL-Glue 3.0 task-spec string. */
int rlb_parse_task_spec(const char *text, rlb_task_spec *out, char *error);

/* The legal actions (ints) of an observation, from its legal mask; returns how many were
 * written, or -1 when the task has no legal mask. */
int rlb_legal_actions(const rlb_task_spec *spec, const rlb_value *observation, int64_t *out,
                      size_t capacity);

/* ---- randomness: splitmix64, so agents need no global state --------------------------------- */
typedef struct { uint64_t state; } rlb_rng;
void rlb_rng_seed(rlb_rng *rng, uint64_t seed);
uint64_t rlb_rng_next(rlb_rng *rng);
/* Uniform in [0, n). */
uint64_t rlb_rng_below(rlb_rng *rng, uint64_t n);

/* The seed of instance `instance` of a batch seeded with `seed` (PROTOCOL.md 16.5): `seed`
 * itself for instance 0, else the first word of numpy's SeedSequence([seed, instance]). */
uint64_t rlb_instance_seed(uint64_t seed, uint64_t instance);

#endif
