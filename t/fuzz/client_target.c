/* t/fuzz/client_target.c: the fuzz target for libmemcached-rdma's reply
 * parsers (text and binary protocol): LLVMFuzzerTestOneInput plays a fake
 * server whose replies are the input, runs a few client calls against it and
 * aborts when a call breaks an invariant (an undefined return code, a value
 * without its terminating NUL, a result past its bounds, a socket left open;
 * for a first get answered by one well-formed reply: a value or miss other
 * than the reply's, or, for a binary frame of another command, any answer
 * but PROTOCOL_ERROR). make check replays t/fuzz/client.corpus through it
 * (t/fuzz/replay.c); with clang it also links as a libFuzzer target
 * (-fsanitize=fuzzer). Either way the link needs
 * -Wl,--wrap=connect,--wrap=send,--wrap=sendmsg.
 *
 * Fake server: the library's socket code connects to a Unix socket path
 * under /fuzz/; the wrapped connect() replaces the library's fd (dup2) by one
 * end of a SOCK_SEQPACKET socketpair whose other end, the server end, stays
 * here. Each time the library writes a request to such a socket (the
 * wrapped send()/sendmsg()), the server answers with the next segment of the
 * input's byte stream (segments are separated by SEGMENT_SEPARATOR), written
 * as messages of input-chosen sizes, so the library's recv() sees the reply
 * cut where the input says. Once the segments run out every server end shuts
 * down its writing side (the server hangs up) or, in stall mode, stays
 * silent (the library must time out). No threads: deterministic.
 *
 * Input layout:
 *   [0] client bits: 0 binary, 1 SUPPORT_CAS, 2 stall (no EOF), 3 namespace,
 *       4 two servers, 5 REQUEST_WINDOW=2, 6 NOREPLY, 7 BUFFER_REQUESTS
 *       (bits 4 and 5 together: NUMBER_OF_REPLICAS=1)
 *   [1] message sizes: 0 -> 4096 bytes, else alternating small sizes
 *   [2] bits 0-1: number of calls - 1; 2 socket spin 30 us; 3
 *       REMOVE_FAILED_SERVERS with failure limit 1; 4 RETRY_TIMEOUT 2 s (else
 *       0); 5 SERVER_TIMEOUT_LIMIT 2; 6 a third server (with bit 4 of [0])
 *   [3..10] 4 x (call, argument)
 *   [11..] the servers' byte stream */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem */
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <libmemcached/memcached.h>

#include "mcr/byteorder.h"
#define SEGMENT_SEPARATOR "~~NEXT~~"
#define SEGMENT_SEPARATOR_LEN 8
#define INPUT_HEADER_LEN 11
#define MAX_SEGMENTS 16
#define MAX_SERVER_ENDS 64
/* the library's fds that can be faked (fd -> server end) */
#define MAX_FD 1024
/* a fetch loop longer than this never ends */
#define MAX_FETCHED 100000
#define FAKE_SOCKET_PREFIX "/fuzz/"
#define NUMBER_OF_CALLS 26
#define BINARY_OP_GET 0x00
#define BINARY_OP_GETK 0x0c

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int __real_connect(int fd, const struct sockaddr *addr, socklen_t len);
ssize_t __real_send(int fd, const void *buf, size_t len, int flags);
ssize_t __real_sendmsg(int fd, const struct msghdr *msg, int flags);
int __wrap_connect(int fd, const struct sockaddr *addr, socklen_t len);
ssize_t __wrap_send(int fd, const void *buf, size_t len, int flags);
ssize_t __wrap_sendmsg(int fd, const struct msghdr *msg, int flags);

/* ASan reads its defaults here, before ASAN_OPTIONS (make check sets only
 * abort_on_error and detect_leaks): a huge value length in a reply must make
 * the library's malloc return NULL, as it can without ASan, not stop the
 * process. A plain definition: it overrides the runtime's weak default, and
 * without ASan nothing calls it. */
__attribute__((visibility("default"), used)) const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "allocator_may_return_null=1:max_allocation_size_mb=1024";
}

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        fprintf(stderr, "INVARIANT: " __VA_ARGS__);                                                \
        fputc('\n', stderr);                                                                       \
        abort();                                                                                   \
    } while (0)

/* the input's server stream, cut into segments (one per request written) */
static const uint8_t *segments[MAX_SEGMENTS];
static size_t segment_lengths[MAX_SEGMENTS];
static int segment_count;
static int next_segment;
/* the fake server's ends of the socketpairs, in order of connection */
static int server_ends[MAX_SERVER_ENDS];
static int server_end_count;
/* the library's fd -> its server end, or -1 for a real socket */
static int server_end_of_fd[MAX_FD];
static uint8_t message_sizes;
static bool stall;
static bool verbose;

static size_t message_size(unsigned index)
{
    if (message_sizes == 0)
        return 4096;
    return (index & 1) ? 1 + (size_t)(message_sizes >> 4) * 17 : 1 + (size_t)(message_sizes & 0x0f);
}

static void hang_up_all(void)
{
    if (stall)
        return;
    for (int i = 0; i < server_end_count; i++)
        shutdown(server_ends[i], SHUT_WR);
}

/* The fake server answers a write of the client with the next segment. */
static void answer_request(int server_end)
{
    char request[65536];
    while (recv(server_end, request, sizeof(request), MSG_DONTWAIT) > 0)
        ; /* read and dropped */
    if (next_segment >= segment_count) {
        hang_up_all();
        return;
    }
    const uint8_t *at = segments[next_segment];
    size_t left = segment_lengths[next_segment];
    next_segment++;
    unsigned messages = 0;
    while (left > 0) {
        size_t n = message_size(messages++);
        if (n > left)
            n = left;
        ssize_t written = send(server_end, at, n, MSG_NOSIGNAL);
        if (written < 0) {
            if (verbose)
                fprintf(stderr, "target: send to a fake socket failed: %s\n", strerror(errno));
            break; /* the rest is lost: a shorter stream */
        }
        at += written;
        left -= (size_t)written;
    }
    if (next_segment >= segment_count)
        hang_up_all();
}

int __wrap_connect(int fd, const struct sockaddr *addr, socklen_t len)
{
    const struct sockaddr_un *unix_addr = (const struct sockaddr_un *)addr;
    if (addr->sa_family != AF_UNIX ||
        strncmp(unix_addr->sun_path, FAKE_SOCKET_PREFIX, strlen(FAKE_SOCKET_PREFIX)) != 0 ||
        fd < 0 || fd >= MAX_FD)
        return __real_connect(fd, addr, len);
    if (server_end_count >= MAX_SERVER_ENDS) {
        errno = ECONNREFUSED;
        return -1;
    }
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0)
        abort();
    int send_buffer = 64 << 20;
    if (setsockopt(pair[1], SOL_SOCKET, SO_SNDBUFFORCE, &send_buffer, sizeof(send_buffer)) != 0)
        (void)setsockopt(pair[1], SOL_SOCKET, SO_SNDBUF, &send_buffer, sizeof(send_buffer));
    (void)fcntl(pair[1], F_SETFL, O_NONBLOCK);
    server_ends[server_end_count++] = pair[1];
    int status_flags = fcntl(fd, F_GETFL);
    if (dup2(pair[0], fd) < 0)
        abort();
    (void)fcntl(fd, F_SETFL, status_flags);
    (void)fcntl(fd, F_SETFD, FD_CLOEXEC);
    close(pair[0]);
    server_end_of_fd[fd] = pair[1];
    if (next_segment >= segment_count && !stall)
        shutdown(pair[1], SHUT_WR);
    return 0;
}

ssize_t __wrap_send(int fd, const void *buf, size_t len, int flags)
{
    ssize_t n = __real_send(fd, buf, len, flags);
    if (n > 0 && fd >= 0 && fd < MAX_FD && server_end_of_fd[fd] >= 0)
        answer_request(server_end_of_fd[fd]);
    return n;
}

ssize_t __wrap_sendmsg(int fd, const struct msghdr *msg, int flags)
{
    ssize_t n = __real_sendmsg(fd, msg, flags);
    if (n > 0 && fd >= 0 && fd < MAX_FD && server_end_of_fd[fd] >= 0)
        answer_request(server_end_of_fd[fd]);
    return n;
}

/* Reads every byte (ASan checks each read). */
static volatile uint8_t touched;
static void touch(const void *p, size_t n)
{
    const volatile uint8_t *bytes = p;
    uint8_t sum = 0;
    for (size_t i = 0; i < n; i++)
        sum ^= bytes[i];
    touched ^= sum;
}

static void check_rc(memcached_return_t rc, const char *where)
{
    if ((int)rc < 0 || rc >= MEMCACHED_MAXIMUM_RETURN)
        FAIL("%s returned undefined code %d", where, (int)rc);
}

static char long_key[200];
static char max_key[249];
/* the values stored: 'a' to 'z' over and over */
static char store_value[20000];
/* the caller's buffers of memcached_iget */
static char iget_buffers[8][20001];

static const char *key_of(uint8_t arg, size_t *len)
{
    static const char *const short_keys[] = {"foo", "bar", "k", "fake", "other", "a:b"};
    switch (arg % 8) {
    case 6:
        *len = sizeof(long_key);
        return long_key;
    case 7:
        *len = sizeof(max_key);
        return max_key;
    default:
        *len = strlen(short_keys[arg % 8]);
        return short_keys[arg % 8];
    }
}

static size_t value_size(uint8_t arg)
{
    static const size_t sizes[] = {0, 1, 5, 7, 64, 300, 5000, 20000};
    return sizes[(arg >> 3) % 8];
}

static void check_result(const memcached_result_st *result)
{
    if (verbose)
        fprintf(stderr, "  result key '%.*s' value '%.*s' flags %u cas %llu\n",
                (int)result->key_length, result->item_key, (int)result->value_length,
                result->value ? result->value : "", result->item_flags,
                (unsigned long long)result->item_cas);
    size_t key_length = memcached_result_key_length(result);
    if (key_length >= MEMCACHED_MAX_KEY)
        FAIL("result key length %zu", key_length);
    touch(result->item_key, key_length + 1);
    if (result->item_key[key_length] != '\0')
        FAIL("result key not terminated");
    const char *value = memcached_result_value(result);
    size_t value_length = memcached_result_length(result);
    if (value == NULL && value_length > 0)
        FAIL("result without value, length %zu", value_length);
    if (value != NULL) {
        touch(value, value_length + 1);
        if (value[value_length] != '\0')
            FAIL("result value not terminated");
    }
}

/* fetch_execute callback: checks the result, stops at every third */
static memcached_return_t check_executed(const memcached_st *client, memcached_result_st *result,
                                         void *context)
{
    int *count = context;
    (void)client;
    check_result(result);
    (*count)++;
    return *count % 3 == 0 ? MEMCACHED_FAILURE : MEMCACHED_SUCCESS;
}

static memcached_return_t check_stat(const memcached_instance_st *server, const char *key,
                                     size_t key_length, const char *value, size_t value_length,
                                     void *context)
{
    int *count = context;
    touch(key, key_length);
    touch(value, value_length);
    touch(memcached_server_name(server), 1);
    (*count)++;
    return MEMCACHED_SUCCESS;
}

/* Fetches a multi-get's results: how 0 fetch_result into new results, 1
 * into the caller's, 2 fetch, 3 fetch_execute. */
static void fetch_all(memcached_st *client, int how)
{
    memcached_return_t rc;
    int fetched = 0;
    if (how == 0) {
        memcached_result_st *result;
        while ((result = memcached_fetch_result(client, NULL, &rc)) != NULL) {
            check_rc(rc, "fetch_result");
            check_result(result);
            memcached_result_free(result);
            if (++fetched > MAX_FETCHED)
                FAIL("fetch_result never ends");
        }
        check_rc(rc, "fetch_result end");
    } else if (how == 1) {
        memcached_result_st own;
        memcached_result_create(client, &own);
        memcached_result_st *result;
        while ((result = memcached_fetch_result(client, &own, &rc)) != NULL) {
            if (result != &own)
                FAIL("fetch_result did not use the caller's result");
            check_result(result);
            if (++fetched > MAX_FETCHED)
                FAIL("fetch_result never ends");
        }
        memcached_result_free(&own);
    } else if (how == 2) {
        char key[MEMCACHED_MAX_KEY];
        size_t key_length, value_length;
        uint32_t flags;
        char *value;
        while ((value = memcached_fetch(client, key, &key_length, &value_length, &flags, &rc)) !=
               NULL) {
            check_rc(rc, "fetch");
            if (key_length >= MEMCACHED_MAX_KEY || key[key_length] != '\0')
                FAIL("fetch key length %zu", key_length);
            touch(value, value_length + 1);
            if (value[value_length] != '\0')
                FAIL("fetch value not terminated");
            free(value);
            if (++fetched > MAX_FETCHED)
                FAIL("fetch never ends");
        }
    } else {
        int count = 0;
        memcached_execute_fn callbacks[2] = {check_executed, check_executed};
        rc = memcached_fetch_execute(client, callbacks, &count, 2);
        check_rc(rc, "fetch_execute");
    }
}

/* A request waited for: done, and a value only on success; an iget's value
 * (user_buffer) within the caller's capacity, a bget's NUL-terminated. */
static void check_request(memcached_request_st *request, size_t capacity, bool user_buffer)
{
    memcached_return_t rc = memcached_request_return(request);
    check_rc(rc, "request_return");
    if (rc == MEMCACHED_IN_PROGRESS)
        FAIL("request still in progress after wait");
    size_t value_length = 0;
    const char *value = memcached_request_value(request, &value_length);
    (void)memcached_request_flags(request);
    (void)memcached_request_cas(request);
    if (verbose)
        fprintf(stderr, "  request rc %d value %s len %zu '%.*s'\n", rc, value ? "set" : "NULL",
                value_length, value ? (int)(value_length < 64 ? value_length : 64) : 0,
                value ? value : "");
    if (value == NULL)
        return;
    if (rc != MEMCACHED_SUCCESS)
        FAIL("value with rc %d", rc);
    if (user_buffer && value_length > capacity)
        FAIL("iget value %zu over capacity %zu", value_length, capacity);
    touch(value, user_buffer ? value_length : value_length + 1);
}

static const char *const stat_groups[] = {NULL, "items", "slabs", "settings"};

/* What a first get on a fresh connection must return when its whole answer
 * (segment 0) is one well-formed reply. */
static struct {
    bool active;
    memcached_return_t rc;
    const uint8_t *value;
    size_t length;
    uint32_t flags;
} expected_get;

static bool parse_decimal(const uint8_t **at, const uint8_t *end, uint64_t *number, uint64_t max)
{
    const uint8_t *digit = *at;
    uint64_t sum = 0;
    if (digit >= end || *digit < '0' || *digit > '9')
        return false;
    while (digit < end && *digit >= '0' && *digit <= '9') {
        if (sum > (max - (uint64_t)(*digit - '0')) / 10)
            return false;
        sum = sum * 10 + (uint64_t)(*digit - '0');
        digit++;
    }
    *at = digit;
    *number = sum;
    return true;
}

static void expect_get(memcached_return_t rc, const uint8_t *value, size_t length, uint32_t flags)
{
    expected_get.active = true;
    expected_get.rc = rc;
    expected_get.value = value;
    expected_get.length = length;
    expected_get.flags = flags;
}

static void expect_text_get(const char *key, size_t key_length)
{
    const uint8_t *reply = segments[0], *end = reply + segment_lengths[0];
    size_t n = segment_lengths[0];
    if (n == 5 && memcmp(reply, "END\r\n", 5) == 0) {
        expect_get(MEMCACHED_NOTFOUND, NULL, 0, 0);
        return;
    }
    if (n < 7 + key_length || memcmp(reply, "VALUE ", 6) != 0 ||
        memcmp(reply + 6, key, key_length) != 0 || reply[6 + key_length] != ' ')
        return;
    const uint8_t *at = reply + 7 + key_length;
    uint64_t flags, bytes, cas;
    if (!parse_decimal(&at, end, &flags, UINT32_MAX) || at >= end || *at++ != ' ' ||
        !parse_decimal(&at, end, &bytes, 1 << 20))
        return;
    if (at < end && *at == ' ') {
        at++;
        if (!parse_decimal(&at, end, &cas, UINT64_MAX))
            return;
    }
    if ((size_t)(end - at) != 2 + bytes + 7 || memcmp(at, "\r\n", 2) != 0 ||
        memcmp(at + 2 + bytes, "\r\nEND\r\n", 7) != 0)
        return;
    expect_get(MEMCACHED_SUCCESS, at + 2, (size_t)bytes, (uint32_t)flags);
}

/* A GET or GETK answer (GETK with the key asked for; libmemcached takes
 * both) gives its value or its miss; a frame of any other command fails the
 * get with PROTOCOL_ERROR. */
static void expect_binary_get(const char *key, size_t key_length)
{
    const uint8_t *frame = segments[0];
    size_t n = segment_lengths[0];
    /* one response frame, data type 0 */
    if (n < 24 || frame[0] != 0x81 || frame[5] != 0)
        return;
    uint8_t opcode = frame[1];
    size_t frame_key_length = mcr_be_get16(frame + 2);
    uint8_t extras_length = frame[4];
    uint16_t status = mcr_be_get16(frame + 6);
    uint32_t body_length = mcr_be_get32(frame + 8);
    uint32_t opaque = mcr_be_get32(frame + 12);
    if (opaque != 1 || (size_t)body_length != n - 24 ||
        (size_t)body_length < extras_length + frame_key_length)
        return;
    if (opcode != BINARY_OP_GET && opcode != BINARY_OP_GETK) {
        expect_get(MEMCACHED_PROTOCOL_ERROR, NULL, 0, 0);
        return;
    }
    if (extras_length != 4 && extras_length != 0)
        return;
    bool key_as_asked = opcode == BINARY_OP_GET
                            ? frame_key_length == 0
                            : frame_key_length == key_length &&
                                  memcmp(frame + 24 + extras_length, key, key_length) == 0;
    if (!key_as_asked)
        return;
    if (status == 1) {
        expect_get(MEMCACHED_NOTFOUND, NULL, 0, 0);
        return;
    }
    if (status != 0)
        return;
    uint32_t flags = extras_length ? mcr_be_get32(frame + 24) : 0;
    size_t header_length = 24 + extras_length + frame_key_length;
    expect_get(MEMCACHED_SUCCESS, frame + header_length, n - header_length, flags);
}

static void check_expected_get(memcached_return_t rc, const char *value, size_t length,
                               uint32_t flags)
{
    if (!expected_get.active)
        return;
    expected_get.active = false;
    if (rc != expected_get.rc)
        FAIL("oracle: get rc %d, expected %d", rc, expected_get.rc);
    if (rc != MEMCACHED_SUCCESS)
        return;
    if (length != expected_get.length || flags != expected_get.flags ||
        memcmp(value, expected_get.value, length) != 0)
        FAIL("oracle: get value/flags differ (len %zu vs %zu, flags %u vs %u)", length,
             expected_get.length, flags, expected_get.flags);
}

static void call_get(memcached_st *client, const char *key, size_t key_length)
{
    memcached_return_t rc;
    size_t length;
    uint32_t flags;
    char *value = memcached_get(client, key, key_length, &length, &flags, &rc);
    check_rc(rc, "get");
    if (rc == MEMCACHED_SUCCESS && value == NULL)
        FAIL("get SUCCESS with NULL");
    if (rc != MEMCACHED_SUCCESS && value != NULL)
        FAIL("get rc %d with value", rc);
    if (value != NULL) {
        touch(value, length + 1);
        if (value[length] != '\0')
            FAIL("get value not terminated");
    }
    check_expected_get(rc, value, length, flags);
    if (verbose)
        fprintf(stderr, "  get rc %d value %s len %zu flags %u: '%.*s'\n", rc,
                value ? "set" : "NULL", value ? length : 0, value ? flags : 0,
                value ? (int)length : 0, value ? value : "");
    free(value);
}

static void call_store(memcached_st *client, const char *key, size_t key_length, uint8_t arg)
{
    memcached_return_t rc;
    size_t length = value_size(arg);
    switch (arg % 6) {
    case 0:
        rc = memcached_set(client, key, key_length, store_value, length, 0, 7);
        break;
    case 1:
        rc = memcached_add(client, key, key_length, store_value, length, 0, 7);
        break;
    case 2:
        rc = memcached_replace(client, key, key_length, store_value, length, 0, 7);
        break;
    case 3:
        rc = memcached_append(client, key, key_length, store_value, length, 0, 7);
        break;
    case 4:
        rc = memcached_prepend(client, key, key_length, store_value, length, 0, 7);
        break;
    default:
        rc = memcached_cas(client, key, key_length, store_value, length, 0, 7, 12345);
        break;
    }
    check_rc(rc, "store");
}

static void call_stat(memcached_st *client, uint8_t arg)
{
    memcached_return_t rc;
    memcached_stat_st *stats = memcached_stat(client, (char *)stat_groups[arg % 4], &rc);
    check_rc(rc, "stat");
    if (stats == NULL)
        return;
    for (uint32_t server = 0; server < memcached_server_count(client); server++) {
        memcached_return_t key_rc;
        char **keys = memcached_stat_get_keys(client, &stats[server], &key_rc);
        for (size_t i = 0; keys && keys[i]; i++) {
            char *value = memcached_stat_get_value(client, &stats[server], keys[i], &key_rc);
            if (value)
                touch(value, strlen(value));
            free(value);
        }
        free(keys);
        touch(stats[server].version, sizeof(stats[server].version));
    }
    memcached_stat_free(client, stats);
}

static void call_iget(memcached_st *client, const char *key, size_t key_length, uint8_t arg)
{
    static const size_t capacities[] = {0, 1, 5, 16, 100, 8191, 8200, 20000};
    size_t capacity = capacities[(arg >> 3) % 8];
    memcached_request_st *request = memcached_request_create(client);
    memcached_return_t rc = memcached_iget(client, key, key_length,
                                           capacity ? iget_buffers[0] : NULL, capacity, request);
    check_rc(rc, "iget");
    check_rc(memcached_wait(client, request), "wait");
    check_request(request, capacity, true);
    memcached_request_free(request);
}

static void call_bget(memcached_st *client, const char *key, size_t key_length, uint8_t arg)
{
    memcached_request_st *request = memcached_request_create(client);
    check_rc(memcached_bget(client, key, key_length, request), "bget");
    for (int i = 0; i < (arg & 7); i++)
        check_rc(memcached_test(client, request), "test");
    check_rc(memcached_wait(client, request), "wait");
    check_request(request, 0, false);
    /* the same request again, for a second get */
    if (arg & 0x40) {
        check_rc(memcached_bget(client, key, key_length, request), "bget again");
        check_rc(memcached_wait(client, request), "wait again");
        check_request(request, 0, false);
    }
    memcached_request_free(request);
}

static void call_iset_or_bset(memcached_st *client, const char *key, size_t key_length, uint8_t arg)
{
    memcached_request_st *request = memcached_request_create(client);
    size_t length = value_size(arg);
    memcached_return_t rc =
        (arg & 1) ? memcached_bset(client, key, key_length, store_value, length, 0, 3, request)
                  : memcached_iset(client, key, key_length, store_value, length, 0, 3, request);
    check_rc(rc, "iset/bset");
    check_rc(memcached_wait(client, request), "wait");
    check_request(request, 0, false);
    memcached_request_free(request);
}

/* a burst of 2 to 9 non-blocking requests, waited for all at once or one by
 * one from the last */
static void call_burst(memcached_st *client, uint8_t arg)
{
    int count = 2 + (arg & 7);
    memcached_request_st *requests[9];
    size_t capacities[9];
    bool user_buffers[9];
    for (int i = 0; i < count; i++) {
        memcached_return_t rc;
        requests[i] = memcached_request_create(client);
        size_t key_length;
        const char *key = key_of((uint8_t)(arg * 7 + i), &key_length);
        int kind = (arg >> 3) + i;
        capacities[i] = (size_t)(i * 37) % 20001;
        user_buffers[i] = false;
        switch (kind % 4) {
        case 0:
            rc = memcached_bget(client, key, key_length, requests[i]);
            break;
        case 1:
            user_buffers[i] = true;
            rc = memcached_iget(client, key, key_length, iget_buffers[i % 8], capacities[i],
                                requests[i]);
            break;
        case 2:
            rc = memcached_bset(client, key, key_length, store_value, (size_t)i * 5, 0, 1,
                                requests[i]);
            break;
        default:
            rc = memcached_iset(client, key, key_length, store_value, (size_t)i * 5, 0, 1,
                                requests[i]);
            break;
        }
        check_rc(rc, "burst issue");
        if (i == 1 && (arg & 0x80))
            check_rc(memcached_test(client, requests[0]), "burst test");
    }
    if (arg & 0x40) {
        check_rc(memcached_wait_all(client), "wait_all");
    } else {
        for (int i = count - 1; i >= 0; i--)
            check_rc(memcached_wait(client, requests[i]), "burst wait");
    }
    for (int i = count - 1; i >= 0; i--) {
        check_request(requests[i], capacities[i], user_buffers[i]);
        memcached_request_free(requests[i]);
    }
}

static void call_by_key(memcached_st *client, const char *key, size_t key_length,
                        const char *const *keys, const size_t *key_lengths, size_t key_count,
                        uint8_t arg)
{
    memcached_return_t rc;
    size_t length;
    uint32_t flags;
    char *value = memcached_get_by_key(client, "grp", 3, key, key_length, &length, &flags, &rc);
    check_rc(rc, "get_by_key");
    if (value)
        touch(value, length + 1);
    free(value);
    rc = memcached_mget_by_key(client, "grp", 3, keys, key_lengths, key_count);
    check_rc(rc, "mget_by_key");
    fetch_all(client, arg & 3);
}

/* a multi-get, one result fetched, then a get drops the rest */
static void call_mget_then_get(memcached_st *client, const char *key, size_t key_length,
                               const char *const *keys, const size_t *key_lengths, size_t key_count)
{
    memcached_return_t rc = memcached_mget(client, keys, key_lengths, key_count);
    check_rc(rc, "mget");
    memcached_result_st *result = memcached_fetch_result(client, NULL, &rc);
    if (result) {
        check_result(result);
        memcached_result_free(result);
    }
    size_t length;
    uint32_t flags;
    char *value = memcached_get(client, key, key_length, &length, &flags, &rc);
    check_rc(rc, "get after mget");
    free(value);
}

/* a request freed while in flight, before the one after it is waited for */
static void call_free_in_flight(memcached_st *client, const char *key, size_t key_length)
{
    memcached_request_st *freed = memcached_request_create(client);
    memcached_request_st *waited = memcached_request_create(client);
    (void)memcached_bget(client, key, key_length, freed);
    (void)memcached_iget(client, key, key_length, iget_buffers[1], 10, waited);
    memcached_request_free(freed);
    check_rc(memcached_wait(client, waited), "wait after a free");
    check_request(waited, 10, true);
    memcached_request_free(waited);
}

/* gets (with CAS) and a cas of the first result's CAS */
static void call_gets_cas(memcached_st *client, const char *key, size_t key_length,
                          const char *const *keys, const size_t *key_lengths, size_t key_count)
{
    memcached_behavior_set(client, MEMCACHED_BEHAVIOR_SUPPORT_CAS, 1);
    memcached_return_t rc = memcached_mget(client, keys, key_lengths, key_count);
    check_rc(rc, "mget(cas)");
    memcached_result_st *result = memcached_fetch_result(client, NULL, &rc);
    uint64_t cas = 0;
    if (result) {
        check_result(result);
        cas = memcached_result_cas(result);
        memcached_result_free(result);
    }
    fetch_all(client, 0);
    check_rc(memcached_cas(client, key, key_length, store_value, 3, 0, 0, cas), "cas");
}

static void run_call(memcached_st *client, uint8_t call, uint8_t arg)
{
    size_t key_length;
    const char *key = key_of(arg, &key_length);
    const char *keys[4];
    size_t key_lengths[4];
    size_t key_count = 1 + (arg >> 6);
    for (size_t i = 0; i < key_count; i++)
        keys[i] = key_of((uint8_t)(arg + i * 3), &key_lengths[i]);
    uint64_t number = 0;
    int count = 0;
    switch (call % NUMBER_OF_CALLS) {
    case 0:
        call_get(client, key, key_length);
        break;
    case 1:
    case 2:
    case 3:
    case 4:
        check_rc(memcached_mget(client, keys, key_lengths, key_count), "mget");
        fetch_all(client, call % NUMBER_OF_CALLS - 1);
        break;
    case 5:
        call_store(client, key, key_length, arg);
        break;
    case 6:
        check_rc(memcached_delete(client, key, key_length, 0), "delete");
        break;
    case 7:
        check_rc((arg & 1) ? memcached_increment(client, key, key_length, 3, &number)
                           : memcached_decrement(client, key, key_length, 3, &number),
                 "incr/decr");
        break;
    case 8:
        check_rc((arg & 1)
                     ? memcached_increment_with_initial(client, key, key_length, 3, 10, 0, &number)
                     : memcached_decrement_with_initial(client, key, key_length, 3, 10, 0, &number),
                 "incr/decr with initial");
        break;
    case 9:
        check_rc(memcached_touch(client, key, key_length, 100), "touch");
        break;
    case 10:
        check_rc(memcached_exist(client, key, key_length), "exist");
        break;
    case 11:
        check_rc(memcached_flush(client, arg & 1 ? 10 : 0), "flush");
        break;
    case 12:
        check_rc(memcached_version(client), "version");
        for (uint32_t i = 0; i < memcached_server_count(client); i++) {
            const memcached_instance_st *server = memcached_server_instance_by_position(client, i);
            (void)memcached_server_major_version(server);
            const char *error = memcached_server_error(server);
            touch(error ? error : "", 1);
        }
        break;
    case 13:
        check_rc(memcached_verbosity(client, arg), "verbosity");
        break;
    case 14:
        call_stat(client, arg);
        break;
    case 15:
        check_rc(memcached_stat_execute(client, stat_groups[arg % 4], check_stat, &count),
                 "stat_execute");
        break;
    case 16:
        call_iget(client, key, key_length, arg);
        break;
    case 17:
        call_bget(client, key, key_length, arg);
        break;
    case 18:
        call_iset_or_bset(client, key, key_length, arg);
        break;
    case 19:
        call_burst(client, arg);
        break;
    case 20:
        call_by_key(client, key, key_length, keys, key_lengths, key_count, arg);
        break;
    case 21:
        call_mget_then_get(client, key, key_length, keys, key_lengths, key_count);
        break;
    case 22:
        memcached_quit(client);
        break;
    case 23:
        /* a multi-get whose results are never fetched (freed with the client) */
        check_rc(memcached_mget(client, keys, key_lengths, key_count), "mget");
        break;
    case 24:
        call_free_in_flight(client, key, key_length);
        break;
    default:
        call_gets_cas(client, key, key_length, keys, key_lengths, key_count);
        break;
    }
    const char *message = memcached_last_error_message(client);
    touch(message, strlen(message));
    if (verbose)
        fprintf(stderr, "call %u arg 0x%02x: last rc %d (%s)\n", call % NUMBER_OF_CALLS, arg,
                (int)memcached_last_error(client), message);
}

static void split_stream(const uint8_t *stream, size_t length)
{
    segment_count = 0;
    next_segment = 0;
    const uint8_t *at = stream;
    size_t left = length;
    while (segment_count < MAX_SEGMENTS) {
        const uint8_t *separator = memmem(at, left, SEGMENT_SEPARATOR, SEGMENT_SEPARATOR_LEN);
        segments[segment_count] = at;
        if (separator == NULL || segment_count == MAX_SEGMENTS - 1) {
            segment_lengths[segment_count++] = left;
            break;
        }
        segment_lengths[segment_count++] = (size_t)(separator - at);
        left -= (size_t)(separator - at) + SEGMENT_SEPARATOR_LEN;
        at = separator + SEGMENT_SEPARATOR_LEN;
    }
}

/* Closes the fake server's ends (last first) once the client is gone. */
static void close_server_ends(void)
{
    for (int i = server_end_count - 1; i >= 0; i--)
        close(server_ends[i]);
    server_end_count = 0;
    for (int fd = 0; fd < MAX_FD; fd++)
        server_end_of_fd[fd] = -1;
}

/* Without the link's --wrap options every call fails to connect and every
 * input would pass without reaching a parser: a version call must get the
 * fake server's answer. */
static void check_fake_server_linked(void)
{
    static const char version_reply[] = "VERSION 1.6.99\r\n";
    split_stream((const uint8_t *)version_reply, strlen(version_reply));
    stall = false;
    message_sizes = 0;
    setenv("LIBMEMCACHED_SOCKET_SPIN_US", "0", 1);
    memcached_st *client = memcached_create(NULL);
    memcached_server_add_unix_socket(client, FAKE_SOCKET_PREFIX "check.sock");
    memcached_return_t rc = memcached_version(client);
    const memcached_instance_st *server = memcached_server_instance_by_position(client, 0);
    uint8_t major = server ? memcached_server_major_version(server) : 0;
    memcached_free(client);
    close_server_ends();
    if (rc != MEMCACHED_SUCCESS || major != 1)
        FAIL("no answer from the fake server (rc %d, major version %u): link with "
             "-Wl,--wrap=connect,--wrap=send,--wrap=sendmsg",
             (int)rc, major);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    memset(long_key, 'L', sizeof(long_key));
    memset(max_key, 'M', sizeof(max_key));
    for (size_t i = 0; i < sizeof(store_value); i++)
        store_value[i] = (char)('a' + i % 26);
    verbose = getenv("FUZZ_VERBOSE") != NULL;
    for (int fd = 0; fd < MAX_FD; fd++)
        server_end_of_fd[fd] = -1;
    check_fake_server_linked();
    return 0;
}

static memcached_st *create_client(uint8_t client_bits, uint8_t more_bits)
{
    memcached_st *client = memcached_create(NULL);
    memcached_server_add_unix_socket(client, FAKE_SOCKET_PREFIX "a.sock");
    if (client_bits & 0x10)
        memcached_server_add_unix_socket(client, FAKE_SOCKET_PREFIX "b.sock");
    if ((client_bits & 0x10) && (more_bits & 0x40))
        memcached_server_add_unix_socket(client, FAKE_SOCKET_PREFIX "c.sock");
    memcached_behavior_set(client, MEMCACHED_BEHAVIOR_BINARY_PROTOCOL, client_bits & 1);
    memcached_behavior_set(client, MEMCACHED_BEHAVIOR_SUPPORT_CAS, (client_bits & 2) != 0);
    memcached_behavior_set(client, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, stall ? 3 : 10);
    memcached_behavior_set(client, MEMCACHED_BEHAVIOR_RETRY_TIMEOUT, (more_bits & 0x10) ? 2 : 0);
    if (more_bits & 8) {
        memcached_behavior_set(client, MEMCACHED_BEHAVIOR_REMOVE_FAILED_SERVERS, 1);
        memcached_behavior_set(client, MEMCACHED_BEHAVIOR_SERVER_FAILURE_LIMIT, 1);
    }
    if (more_bits & 0x20)
        memcached_behavior_set(client, MEMCACHED_BEHAVIOR_SERVER_TIMEOUT_LIMIT, 2);
    if (client_bits & 8)
        memcached_callback_set(client, MEMCACHED_CALLBACK_PREFIX_KEY, "ns:");
    if (client_bits & 0x20)
        memcached_behavior_set(client, MEMCACHED_BEHAVIOR_REQUEST_WINDOW, 2);
    if (client_bits & 0x40)
        memcached_behavior_set(client, MEMCACHED_BEHAVIOR_NOREPLY, 1);
    if (client_bits & 0x80)
        memcached_behavior_set(client, MEMCACHED_BEHAVIOR_BUFFER_REQUESTS, 1);
    if ((client_bits & 0x30) == 0x30)
        memcached_behavior_set(client, MEMCACHED_BEHAVIOR_NUMBER_OF_REPLICAS, 1);
    return client;
}

/* The oracle: a first call that is a get, to one server, of a key the
 * namespace leaves short enough. */
static void expect_first_get(uint8_t client_bits, const uint8_t *calls)
{
    expected_get.active = false;
    if (calls[0] % NUMBER_OF_CALLS != 0 || (client_bits & 0x10) || segment_count < 1)
        return;
    size_t key_length;
    const char *key = key_of(calls[1], &key_length);
    size_t prefix_length = (client_bits & 8) ? 3 : 0;
    if (key_length + prefix_length >= MEMCACHED_MAX_KEY)
        return;
    char full_key[MEMCACHED_MAX_KEY];
    memcpy(full_key, "ns:", prefix_length);
    memcpy(full_key + prefix_length, key, key_length);
    if (client_bits & 1)
        expect_binary_get(full_key, prefix_length + key_length);
    else
        expect_text_get(full_key, prefix_length + key_length);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < INPUT_HEADER_LEN)
        return 0;
    uint8_t client_bits = data[0];
    message_sizes = data[1];
    uint8_t more_bits = data[2];
    int call_count = 1 + more_bits % 4;
    const uint8_t *calls = data + 3;
    stall = (client_bits & 4) != 0;
    setenv("LIBMEMCACHED_SOCKET_SPIN_US", (more_bits & 4) ? "30" : "0", 1);
    split_stream(data + INPUT_HEADER_LEN, size - INPUT_HEADER_LEN);
    server_end_count = 0;

    memcached_st *client = create_client(client_bits, more_bits);
    expect_first_get(client_bits, calls);
    for (int i = 0; i < call_count; i++)
        run_call(client, calls[2 * i], calls[2 * i + 1]);
    /* the client goes before the fake server's ends (as a server outlives
     * its clients), and must have closed every socket it opened */
    memcached_free(client);
    for (int fd = 0; fd < MAX_FD; fd++) {
        if (server_end_of_fd[fd] < 0 || fcntl(fd, F_GETFD) == -1)
            continue;
        bool server_end = false;
        for (int i = 0; i < server_end_count; i++)
            server_end |= server_ends[i] == fd;
        if (!server_end)
            FAIL("fd %d of the library still open after memcached_free", fd);
    }
    close_server_ends();
    return 0;
}
