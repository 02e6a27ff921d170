/* benchmarks/mc_fill.c: fast loader for the memory comparison. Stores COUNT
 * items with VALUE_SIZE-byte values into one server over one TCP connection,
 * as pipelined text-protocol "set ... noreply" commands, then sends "version"
 * and waits for its reply so that every set has been processed when it
 * exits. Speaks only the text protocol; measures nothing but its own time. */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int connect_to(const char *host, const char *port)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res;
    int rc = getaddrinfo(host, port, &hints, &res);
    if (rc != 0) {
        fprintf(stderr, "mc_fill: %s:%s: %s\n", host, port, gai_strerror(rc));
        return -1;
    }
    int fd = -1;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
        if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
            break;
        if (fd >= 0)
            close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0)
        fprintf(stderr, "mc_fill: cannot connect to %s:%s: %s\n", host, port, strerror(errno));
    return fd;
}

static int send_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            fprintf(stderr, "mc_fill: send: %s\n", strerror(errno));
            return -1;
        }
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Reads replies until the "VERSION" line; returns how many other lines came
 * first (errors: noreply sets are otherwise silent), or -1. */
static long wait_for_version(int fd)
{
    char buf[4096];
    size_t have = 0;
    long other_lines = 0;
    for (;;) {
        ssize_t n = recv(fd, buf + have, sizeof(buf) - 1 - have, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            fprintf(stderr, "mc_fill: connection closed before VERSION\n");
            return -1;
        }
        have += (size_t)n;
        buf[have] = '\0';
        char *line = buf, *eol;
        while ((eol = strstr(line, "\r\n")) != NULL) {
            if (strncmp(line, "VERSION", 7) == 0)
                return other_lines;
            if (other_lines++ < 5)
                fprintf(stderr, "mc_fill: server said: %.*s\n", (int)(eol - line), line);
            line = eol + 2;
        }
        have = (size_t)(buf + have - line);
        memmove(buf, line, have);
        if (have == sizeof(buf) - 1)
            have = 0; /* an absurdly long line: drop it */
    }
}

int main(int argc, char **argv)
{
    if (argc < 5 || argc > 6) {
        fprintf(stderr, "usage: mc_fill HOST PORT COUNT VALUE_SIZE [KEY_PREFIX]\n");
        return 2;
    }
    unsigned long count = strtoul(argv[3], NULL, 10);
    size_t value_size = strtoul(argv[4], NULL, 10);
    const char *prefix = argc == 6 ? argv[5] : "fill:";
    if (value_size > 1024 * 1024 || strlen(prefix) > 200) {
        fprintf(stderr, "mc_fill: value size or key prefix too large\n");
        return 2;
    }
    int fd = connect_to(argv[1], argv[2]);
    if (fd < 0)
        return 1;

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    size_t cap = 256 * 1024 + value_size + 512;
    char *batch = malloc(cap);
    char *value = malloc(value_size + 2);
    if (batch == NULL || value == NULL) {
        fprintf(stderr, "mc_fill: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < value_size; i++)
        value[i] = (char)('A' + i % 26);
    memcpy(value + value_size, "\r\n", 2);

    size_t used = 0;
    int failed = 0;
    for (unsigned long i = 0; i < count && !failed; i++) {
        used += (size_t)snprintf(batch + used, cap - used, "set %s%lu 0 0 %zu noreply\r\n", prefix,
                                 i, value_size);
        memcpy(batch + used, value, value_size + 2);
        used += value_size + 2;
        if (used >= 256 * 1024) {
            failed = send_all(fd, batch, used);
            used = 0;
        }
    }
    long errors = -1;
    if (!failed) {
        memcpy(batch + used, "version\r\n", 9);
        used += 9;
        if (send_all(fd, batch, used) == 0)
            errors = wait_for_version(fd);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    free(value);
    free(batch);
    close(fd);
    if (errors != 0) {
        fprintf(stderr, "mc_fill: %s\n", errors < 0 ? "failed" : "the server reported errors");
        return 1;
    }
    printf("stored %lu items of %zu bytes in %.2f s\n", count, value_size, seconds);
    return 0;
}
