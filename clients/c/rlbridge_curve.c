/* CURVE for the C agents: the server keys and authorized client keys of a directory made by
 * `rlbridge keys DIR`, the ZAP handler (RFC 27) that refuses and logs unknown clients, and the
 * log line of a peer whose handshake failed before ZAP was asked. */
#define _POSIX_C_SOURCE 200809L
#include "rlbridge_internal.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <zmq.h>

#define REPEAT_LOG_MS 10000

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
        if (quote != NULL && strlen(quote + 1) > RLB_Z85_KEY_CHARS && quote[1 + RLB_Z85_KEY_CHARS] == '"') {
            memcpy(out, quote + 1, RLB_Z85_KEY_CHARS);
            out[RLB_Z85_KEY_CHARS] = '\0';
            found = 1;
        }
    }
    fclose(file);
    return found;
}

static int load_authorized(rlb_authorized *authorized, const char *curve_dir) {
    char path[1024];
    snprintf(path, sizeof path, "%s/authorized_clients", curve_dir);
    DIR *directory = opendir(path);
    if (directory == NULL) {
        rlb_warn("cannot open %s: %s", path, strerror(errno));
        return 0;
    }
    struct dirent *entry;
    while ((entry = readdir(directory)) != NULL && authorized->count < RLB_MAX_AUTHORIZED) {
        size_t length = strlen(entry->d_name);
        if (length < 5 || strcmp(entry->d_name + length - 4, ".key") != 0)
            continue;
        char file[1400];
        snprintf(file, sizeof file, "%s/%s", path, entry->d_name);
        if (read_key(file, "public-key", authorized->keys[authorized->count]))
            authorized->count++;
    }
    closedir(directory);
    return 1;
}

int rlb_curve_server(void *socket, const char *curve_dir, rlb_authorized *authorized) {
    char path[1024], public_key[RLB_Z85_KEY_CHARS + 1], secret_key[RLB_Z85_KEY_CHARS + 1];
    snprintf(path, sizeof path, "%s/server.key_secret", curve_dir);
    /* A secret key others can read is no secret: refused as the Python side refuses it
     * (rlbridge/experiment/net/curve.py, check_private), in the same words. */
    struct stat info;
    if (stat(path, &info) == 0 && (info.st_mode & 077) != 0) {
        rlb_warn("a CURVE secret key must be readable by its owner only, but %s has mode %04o: "
                 "`chmod 600 %s`, and make new keys with `rlbridge keys %s --force` if others "
                 "may have read it", path, (unsigned)(info.st_mode & 07777), path, curve_dir);
        return 0;
    }
    if (!read_key(path, "public-key", public_key) || !read_key(path, "secret-key", secret_key)) {
        rlb_warn("cannot read the CURVE server keys from %s (make them with `rlbridge keys %s`)",
             path, curve_dir);
        return 0;
    }
    if (!load_authorized(authorized, curve_dir))
        return 0;
    int yes = 1;
    zmq_setsockopt(socket, ZMQ_CURVE_SERVER, &yes, sizeof yes);
    zmq_setsockopt(socket, ZMQ_CURVE_PUBLICKEY, public_key, RLB_Z85_KEY_CHARS);
    zmq_setsockopt(socket, ZMQ_CURVE_SECRETKEY, secret_key, RLB_Z85_KEY_CHARS);
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
void rlb_answer_zap(void *zap, const rlb_authorized *authorized) {
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
    char z85[RLB_Z85_KEY_CHARS + 1] = "";
    int allowed = 0;
    if (strcmp(mechanism, "CURVE") == 0 && key_length == 32) {
        zmq_z85_encode(z85, client_key, 32);
        for (int i = 0; i < authorized->count && !allowed; i++)
            allowed = strcmp(z85, authorized->keys[i]) == 0;
    }
    if (!allowed)
        rlb_warn("refused a %s client from %s: its public key %s is not in authorized_clients",
             mechanism, address, z85[0] ? z85 : "(none)");
    const char *status = allowed ? "200" : "400";
    const char *text = allowed ? "OK" : "client key not authorized";
    zmq_send(zap, "1.0", 3, ZMQ_SNDMORE);
    zmq_send(zap, request_id, id_length > 0 ? (size_t)id_length : 0, ZMQ_SNDMORE);
    zmq_send(zap, status, 3, ZMQ_SNDMORE);
    zmq_send(zap, text, strlen(text), ZMQ_SNDMORE);
    zmq_send(zap, allowed ? z85 : "", allowed ? RLB_Z85_KEY_CHARS : 0, ZMQ_SNDMORE);
    zmq_send(zap, "", 0, 0);
}

/* Log a monitor event: a peer whose CURVE handshake failed before ZAP was asked. */
void rlb_report_handshake_failure(void *monitor) {
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
    if (strcmp(text, last) == 0 && rlb_now_ms() - last_ms < REPEAT_LOG_MS)
        return;
    snprintf(last, sizeof last, "%s", text);
    last_ms = rlb_now_ms();
    rlb_warn("refused a peer on %s: the CURVE handshake failed: %s (%#x)", endpoint, reason,
         value);
}
