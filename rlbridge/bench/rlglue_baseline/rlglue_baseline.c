/* The C baseline of `rlbridge bench rlglue`: a countdown game played through a glue
 * process after RL-Glue 3.0's published design, written for the bench (it is not C
 * RL-Glue's own code, which cannot be fetched here).
 *
 * One binary, four roles, each its own process:
 *   glue                       listens on 127.0.0.1 (a free port, printed on one line)
 *                              and serves the three others; RL_episode runs in the glue
 *   env HOST PORT LENGTH       the countdown: LENGTH steps an episode, one int observation
 *   agent HOST PORT            the `first` agent: always the lowest action, 0
 *   experiment HOST PORT EPISODES   RL_init, then EPISODES calls of RL_episode(0) and
 *                              RL_num_steps, then RL_cleanup; prints the steps taken
 *
 * The design it follows (RL-Glue 3.0's network codec): TCP with TCP_NODELAY; every
 * message is an 8-byte header [code, payload size] in network byte order, written in one
 * send() and followed by the payload in a second send(), and read as a header recv()
 * then a payload recv(); each item of a payload is put in network byte order one at a
 * time; a value is [numInts, numDoubles, numChars] then its items. Every step of an
 * episode is two round trips from the glue: env_step to the environment, then
 * agent_step (agent_end at the last step) to the agent.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

enum { CONNECT_EXPERIMENT = 1, CONNECT_ENV = 2, CONNECT_AGENT = 3 };
enum { ENV_INIT = 10, ENV_START, ENV_STEP, ENV_CLEANUP };
enum { AGENT_INIT = 20, AGENT_START, AGENT_STEP, AGENT_END, AGENT_CLEANUP };
enum { RL_INIT = 30, RL_EPISODE, RL_NUM_STEPS, RL_CLEANUP, RL_TERM = 40 };

#define MAX_ITEMS 16

typedef struct { unsigned char *data; uint32_t size, cap, read; } buffer;
typedef struct {
    int32_t num_ints, num_doubles, num_chars;
    int32_t ints[MAX_ITEMS];
    double doubles[MAX_ITEMS];
    char chars[MAX_ITEMS];
} value;

static void fail(const char *what) {
    perror(what);
    exit(1);
}

static void send_all(int fd, const void *data, size_t length) {
    const char *at = data;
    while (length > 0) {
        ssize_t sent = send(fd, at, length, 0);
        if (sent <= 0) fail("send");
        at += sent;
        length -= (size_t)sent;
    }
}

static void recv_all(int fd, void *data, size_t length) {
    char *at = data;
    while (length > 0) {
        ssize_t got = recv(fd, at, length, 0);
        if (got == 0) exit(0); /* the peer closed: the run is over */
        if (got < 0) fail("recv");
        at += got;
        length -= (size_t)got;
    }
}

static void reserve(buffer *b, uint32_t size) {
    if (size <= b->cap) return;
    b->cap = size * 2;
    b->data = realloc(b->data, b->cap);
    if (b->data == NULL) fail("realloc");
}

static void clear(buffer *b) { b->size = b->read = 0; }

static void send_message(int fd, int32_t code, const buffer *b) {
    uint32_t header[2] = {htonl((uint32_t)code), htonl(b->size)};
    send_all(fd, header, sizeof header);
    if (b->size > 0) send_all(fd, b->data, b->size);
}

static int32_t recv_message(int fd, buffer *b) {
    uint32_t header[2];
    recv_all(fd, header, sizeof header);
    clear(b);
    b->size = ntohl(header[1]);
    reserve(b, b->size);
    if (b->size > 0) recv_all(fd, b->data, b->size);
    return (int32_t)ntohl(header[0]);
}

static void put_int(buffer *b, int32_t x) {
    uint32_t wire = htonl((uint32_t)x);
    reserve(b, b->size + 4);
    memcpy(b->data + b->size, &wire, 4);
    b->size += 4;
}

static void put_double(buffer *b, double x) {
    uint64_t bits;
    memcpy(&bits, &x, 8);
    bits = htobe64(bits);
    reserve(b, b->size + 8);
    memcpy(b->data + b->size, &bits, 8);
    b->size += 8;
}

static int32_t get_int(buffer *b) {
    uint32_t wire;
    if (b->read + 4 > b->size) { fprintf(stderr, "short message\n"); exit(1); }
    memcpy(&wire, b->data + b->read, 4);
    b->read += 4;
    return (int32_t)ntohl(wire);
}

static double get_double(buffer *b) {
    uint64_t bits;
    double x;
    if (b->read + 8 > b->size) { fprintf(stderr, "short message\n"); exit(1); }
    memcpy(&bits, b->data + b->read, 8);
    b->read += 8;
    bits = be64toh(bits);
    memcpy(&x, &bits, 8);
    return x;
}

static void put_value(buffer *b, const value *v) {
    put_int(b, v->num_ints);
    put_int(b, v->num_doubles);
    put_int(b, v->num_chars);
    for (int i = 0; i < v->num_ints; i++) put_int(b, v->ints[i]);
    for (int i = 0; i < v->num_doubles; i++) put_double(b, v->doubles[i]);
    reserve(b, b->size + (uint32_t)v->num_chars);
    memcpy(b->data + b->size, v->chars, (size_t)v->num_chars);
    b->size += (uint32_t)v->num_chars;
}

static void get_value(buffer *b, value *v) {
    v->num_ints = get_int(b);
    v->num_doubles = get_int(b);
    v->num_chars = get_int(b);
    if (v->num_ints < 0 || v->num_ints > MAX_ITEMS || v->num_doubles < 0 ||
        v->num_doubles > MAX_ITEMS || v->num_chars < 0 || v->num_chars > MAX_ITEMS ||
        b->read + (uint32_t)v->num_chars > b->size) {
        fprintf(stderr, "bad value\n");
        exit(1);
    }
    for (int i = 0; i < v->num_ints; i++) v->ints[i] = get_int(b);
    for (int i = 0; i < v->num_doubles; i++) v->doubles[i] = get_double(b);
    memcpy(v->chars, b->data + b->read, (size_t)v->num_chars);
    b->read += (uint32_t)v->num_chars;
}

static int tcp_socket(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    if (fd < 0) fail("socket");
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

/* Connect to the glue and say who we are: a header whose code is the connection type. */
static int connect_to_glue(const char *host, const char *port, int32_t kind) {
    struct sockaddr_in address = {0};
    buffer empty = {0};
    int fd = tcp_socket();
    address.sin_family = AF_INET;
    address.sin_port = htons((uint16_t)atoi(port));
    if (inet_pton(AF_INET, host, &address.sin_addr) != 1) fail("inet_pton");
    if (connect(fd, (struct sockaddr *)&address, sizeof address) != 0) fail("connect");
    send_message(fd, kind, &empty);
    return fd;
}

static int env_main(int fd, int32_t length) {
    buffer b = {0};
    int32_t counter = length;
    value observation = {.num_ints = 1}, action;
    static const char spec[] =
        "VERSION RL-Glue-3.0 PROBLEMTYPE episodic DISCOUNTFACTOR 1.0 OBSERVATIONS INTS (0 1000) "
        "ACTIONS INTS (0 1) REWARDS (0 1000.0)";
    for (;;) {
        int32_t code = recv_message(fd, &b);
        switch (code) {
        case ENV_INIT:
            clear(&b);
            put_int(&b, (int32_t)sizeof spec);
            reserve(&b, b.size + sizeof spec);
            memcpy(b.data + b.size, spec, sizeof spec);
            b.size += sizeof spec;
            break;
        case ENV_START:
            clear(&b);
            counter = length;
            observation.ints[0] = counter;
            put_value(&b, &observation);
            break;
        case ENV_STEP: {
            double reward = counter;
            get_value(&b, &action);
            clear(&b);
            if (action.num_ints != 1 || action.ints[0] < 0 || action.ints[0] > 1) {
                fprintf(stderr, "countdown action must be one int in [0, 1]\n");
                return 1;
            }
            counter -= 1;
            observation.ints[0] = counter;
            put_int(&b, counter == 0);
            put_double(&b, reward);
            put_value(&b, &observation);
            break;
        }
        case ENV_CLEANUP:
            clear(&b);
            break;
        case RL_TERM:
            return 0;
        default:
            fprintf(stderr, "environment: unknown message %d\n", code);
            return 1;
        }
        send_message(fd, code, &b);
    }
}

static int agent_main(int fd) {
    buffer b = {0};
    value observation, action = {.num_ints = 1, .ints = {0}};
    for (;;) {
        int32_t code = recv_message(fd, &b);
        switch (code) {
        case AGENT_INIT:
        case AGENT_CLEANUP:
            clear(&b);
            break;
        case AGENT_START:
            get_value(&b, &observation);
            clear(&b);
            put_value(&b, &action);
            break;
        case AGENT_STEP:
            (void)get_double(&b);
            get_value(&b, &observation);
            clear(&b);
            put_value(&b, &action);
            break;
        case AGENT_END:
            (void)get_double(&b);
            clear(&b);
            break;
        case RL_TERM:
            return 0;
        default:
            fprintf(stderr, "agent: unknown message %d\n", code);
            return 1;
        }
        send_message(fd, code, &b);
    }
}

/* A round trip from the glue: ``b`` holds the request's payload, then the reply's. */
static void call(int fd, int32_t code, buffer *b) {
    send_message(fd, code, b);
    if (recv_message(fd, b) != code) { fprintf(stderr, "glue: a reply out of turn\n"); exit(1); }
}

static int glue_main(void) {
    struct sockaddr_in address = {0};
    socklen_t size = sizeof address;
    int server = tcp_socket(), one = 1, fds[4] = {0};
    buffer b = {0};
    value observation, action;
    int32_t steps = 0;
    setsockopt(server, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(server, (struct sockaddr *)&address, sizeof address) != 0) fail("bind");
    if (listen(server, 10) != 0) fail("listen");
    if (getsockname(server, (struct sockaddr *)&address, &size) != 0) fail("getsockname");
    printf("%d\n", ntohs(address.sin_port));
    fflush(stdout);
    for (int connected = 0; connected < 3;) {
        int client = accept(server, NULL, NULL), kind;
        if (client < 0) fail("accept");
        setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        kind = recv_message(client, &b);
        if (kind < CONNECT_EXPERIMENT || kind > CONNECT_AGENT || fds[kind]) {
            fprintf(stderr, "glue: unexpected connection type %d\n", kind);
            return 1;
        }
        fds[kind] = client;
        connected++;
    }
    close(server);
    int experiment = fds[CONNECT_EXPERIMENT], env = fds[CONNECT_ENV], agent = fds[CONNECT_AGENT];
    for (;;) {
        int32_t code = recv_message(experiment, &b);
        switch (code) {
        case RL_INIT:
            clear(&b);
            call(env, ENV_INIT, &b); /* the task spec goes on to the agent as it came */
            b.read = 0;
            call(agent, AGENT_INIT, &b);
            clear(&b);
            break;
        case RL_EPISODE: {
            int32_t max_steps = get_int(&b), terminal = 0;
            clear(&b);
            call(env, ENV_START, &b);
            get_value(&b, &observation);
            clear(&b);
            put_value(&b, &observation);
            call(agent, AGENT_START, &b);
            get_value(&b, &action);
            steps = 0;
            while (!terminal) {
                double reward;
                clear(&b);
                put_value(&b, &action);
                call(env, ENV_STEP, &b);
                terminal = get_int(&b);
                reward = get_double(&b);
                get_value(&b, &observation);
                steps++;
                clear(&b);
                put_double(&b, reward);
                if (terminal) {
                    call(agent, AGENT_END, &b);
                    break;
                }
                if (max_steps > 0 && steps >= max_steps) break;
                put_value(&b, &observation);
                call(agent, AGENT_STEP, &b);
                get_value(&b, &action);
            }
            clear(&b);
            put_int(&b, terminal);
            break;
        }
        case RL_NUM_STEPS:
            clear(&b);
            put_int(&b, steps);
            break;
        case RL_CLEANUP:
            clear(&b);
            call(env, ENV_CLEANUP, &b);
            clear(&b);
            call(agent, AGENT_CLEANUP, &b);
            clear(&b);
            break;
        case RL_TERM:
            clear(&b);
            send_message(env, RL_TERM, &b);
            send_message(agent, RL_TERM, &b);
            send_message(experiment, RL_TERM, &b);
            return 0;
        default:
            fprintf(stderr, "glue: unknown message %d\n", code);
            return 1;
        }
        send_message(experiment, code, &b);
    }
}

static int experiment_main(int fd, int32_t episodes) {
    buffer b = {0};
    long total = 0;
    call(fd, RL_INIT, &b);
    for (int32_t e = 0; e < episodes; e++) {
        clear(&b);
        put_int(&b, 0);
        call(fd, RL_EPISODE, &b);
        clear(&b);
        call(fd, RL_NUM_STEPS, &b);
        total += get_int(&b);
    }
    clear(&b);
    call(fd, RL_CLEANUP, &b);
    clear(&b);
    send_message(fd, RL_TERM, &b);
    recv_message(fd, &b);
    printf("%ld\n", total);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "glue") == 0) return glue_main();
    if (argc == 5 && strcmp(argv[1], "env") == 0)
        return env_main(connect_to_glue(argv[2], argv[3], CONNECT_ENV), atoi(argv[4]));
    if (argc == 4 && strcmp(argv[1], "agent") == 0)
        return agent_main(connect_to_glue(argv[2], argv[3], CONNECT_AGENT));
    if (argc == 5 && strcmp(argv[1], "experiment") == 0)
        return experiment_main(connect_to_glue(argv[2], argv[3], CONNECT_EXPERIMENT),
                               atoi(argv[4]));
    fprintf(stderr, "usage: %s glue | env HOST PORT LENGTH | agent HOST PORT | "
                    "experiment HOST PORT EPISODES\n", argv[0]);
    return 2;
}
