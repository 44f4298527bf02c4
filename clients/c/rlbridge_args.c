/* The C agents' command line: addresses, the private default ipc directory, CURVE and --opt. */
#define _POSIX_C_SOURCE 200809L
#include "rlbridge_agent.h"
#include "rlbridge_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The default ipc directory sits in a shared temporary directory: had another user created it
 * first, they could swap our socket for theirs. Ours, a directory, and closed to others. */
static int check_private_directory(const char *directory) {
    struct stat info;
    if (lstat(directory, &info) != 0 || !S_ISDIR(info.st_mode)) {
        fprintf(stderr, "rlbridge agent: %s must be a directory owned by uid %u; it is a link, a "
                "file or missing\n", directory, (unsigned)getuid());
        return -1;
    }
    if (info.st_uid != getuid()) {
        fprintf(stderr, "rlbridge agent: %s must be owned by uid %u, but uid %u owns it: refusing "
                "to bind sockets inside it\n", directory, (unsigned)getuid(),
                (unsigned)info.st_uid);
        return -1;
    }
    if (info.st_mode & 022) {
        fprintf(stderr, "rlbridge agent: %s must have mode 0700 (no group or other access), but "
                "has %04o, writable by others: check its contents, then chmod 700 it\n",
                directory, (unsigned)(info.st_mode & 07777));
        return -1;
    }
    if (info.st_mode & 077)
        chmod(directory, 0700); /* readable only: nobody else can have put a socket in it */
    return 0;
}

int rlb_is_loopback_tcp(const char *address) {
    if (strncmp(address, "tcp://", 6) != 0)
        return 1; /* ipc:// and inproc:// never leave the machine */
    const char *host = address + 6;
    return strncmp(host, "127.", 4) == 0 || strncmp(host, "localhost:", 10) == 0
        || strncmp(host, "[::1]:", 6) == 0;
}

int rlb_parse_args(int argc, char **argv, rlb_options *options, char *address_buffer,
                   size_t address_size,
                   int (*opt_callback)(void *state, const char *key, const char *value),
                   void *state) {
    memset(options, 0, sizeof *options);
    const char *address = NULL;
    int no_curve = 0;
    options->curve_dir = getenv("RLBRIDGE_CURVE_DIR");
    if (options->curve_dir != NULL && options->curve_dir[0] == '\0')
        options->curve_dir = NULL;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        const char *next = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(arg, "--no-curve") == 0) {
            no_curve = 1;
            continue;
        }
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0)
            goto usage;
        if (next == NULL)
            goto usage;
        if (strcmp(arg, "--bind") == 0) {
            address = next;
        } else if (strcmp(arg, "--connect") == 0) {
            address = next;
            options->connect = 1;
        } else if (strcmp(arg, "--curve-dir") == 0) {
            options->curve_dir = next;
        } else if (strcmp(arg, "--idle-timeout-ms") == 0) {
            options->idle_timeout_ms = atol(next);
        } else if (strcmp(arg, "--max-message-bytes") == 0) {
            options->max_message_bytes = (size_t)atoll(next);
        } else if (strcmp(arg, "--opt") == 0) {
            char pair[512];
            snprintf(pair, sizeof pair, "%s", next);
            char *equals = strchr(pair, '=');
            if (equals == NULL || equals == pair) {
                fprintf(stderr, "--opt takes key=value; got '%s'\n", next);
                return 2;
            }
            *equals = '\0';
            if (opt_callback == NULL || opt_callback(state, pair, equals + 1) != 0) {
                fprintf(stderr, "unknown option --opt %s\n", next);
                return 2;
            }
        } else {
            goto usage;
        }
        i++;
    }
    if (address == NULL)
        address = getenv("RLBRIDGE_AGENT_ADDR");
    if (address == NULL || address[0] == '\0') {
        const char *tmp = getenv("TMPDIR");
        char directory[900];
        snprintf(directory, sizeof directory, "%s/rlbridge-%u", tmp && tmp[0] ? tmp : "/tmp",
                 (unsigned)getuid());
        mkdir(directory, 0700);
        if (check_private_directory(directory) != 0)
            return 2;
        snprintf(address_buffer, address_size, "ipc://%s/agent.sock", directory);
    } else {
        snprintf(address_buffer, address_size, "%s", address);
    }
    options->address = address_buffer;
    if (no_curve)
        options->curve_dir = NULL;
    else if (!options->connect && !rlb_is_loopback_tcp(address_buffer) && options->curve_dir == NULL) {
        fprintf(stderr, "rlbridge agent: binding %s (not loopback) needs CURVE keys: run "
                "`rlbridge keys DIR` and pass --curve-dir DIR (or set RLBRIDGE_CURVE_DIR), or "
                "pass --no-curve to accept anyone\n", address_buffer);
        return 2;
    }
    return 0;
usage:
    fprintf(stderr, "usage: %s [--bind ADDR | --connect ADDR] [--curve-dir DIR | --no-curve] "
            "[--idle-timeout-ms N] [--max-message-bytes N] [--opt KEY=VALUE]...\n", argv[0]);
    return 2;
}
