/* libmemcached/constants.h: the enumerations and numeric limits of the
 * libmemcached 1.x API (return codes, behaviors, hash and distribution
 * kinds, connection types). The numbering is part of the ABI that programs
 * written for libmemcached rely on: never renumber, only append.
 * This file declares no functions and no structures. */
#ifndef LIBMEMCACHED_RDMA_CONSTANTS_H
#define LIBMEMCACHED_RDMA_CONSTANTS_H

#define LIBMEMCACHED_VERSION_STRING "1.1.4"
#define LIBMEMCACHED_VERSION_HEX 0x001001004
#define LIBMEMCACHED_RDMA 1

#define MEMCACHED_MAX_BUFFER 8196
#define MEMCACHED_MAX_KEY 251 /* longest key plus the terminating NUL */
#define MEMCACHED_MAX_NAMESPACE 128
#define MEMCACHED_MAX_HOST_SORT_LENGTH 86
#define MEMCACHED_MAX_INTEGER_DISPLAY_LENGTH 20
#define MEMCACHED_VERSION_STRING_LENGTH 24
#define MEMCACHED_NI_MAXHOST 1025
#define MEMCACHED_NI_MAXSERV 32

#define MEMCACHED_DEFAULT_PORT 11211
#define MEMCACHED_DEFAULT_PORT_STRING "11211"
#define MEMCACHED_POINTS_PER_SERVER 100
#define MEMCACHED_POINTS_PER_SERVER_KETAMA 160
#define MEMCACHED_DEFAULT_TIMEOUT 5000
#define MEMCACHED_DEFAULT_CONNECT_TIMEOUT 4000
#define MEMCACHED_EXPIRATION_NOT_ADD 0xffffffffU
#define MEMCACHED_SERVER_FAILURE_LIMIT 5
#define MEMCACHED_SERVER_FAILURE_RETRY_TIMEOUT 2
#define MEMCACHED_SERVER_FAILURE_DEAD_TIMEOUT 0
#define MEMCACHED_SERVER_TIMEOUT_LIMIT 0

/* Default cap on requests in flight per server (non-blocking API). */
#define MEMCACHED_DEFAULT_REQUEST_WINDOW 1024
/* Values of MEMCACHED_BEHAVIOR_REPLICATION and _ERASURE_CODING. */
#define MEMCACHED_REPLICATION_ASYNC_FLAG 0x10000u
#define MEMCACHED_REPLICATION_SYNC(copies) ((uint64_t)(copies))
#define MEMCACHED_REPLICATION_ASYNC(copies) ((uint64_t)(copies) | MEMCACHED_REPLICATION_ASYNC_FLAG)
#define MEMCACHED_ERASURE_CODING(data_chunks, parity_chunks)                                       \
    (((uint64_t)(data_chunks) << 8) | (uint64_t)(parity_chunks))
/* values from 128 KiB on are coded: below, a coded get (K requests) costs
 * more than 1.2 times a replicated one (doc/resilience.md) */
#define MEMCACHED_DEFAULT_ERASURE_CODING_THRESHOLD 131072
#define MEMCACHED_DEFAULT_RESILIENCE_HEDGE_TIMEOUT 100

enum memcached_return_t {
    MEMCACHED_SUCCESS,                          /* 0 */
    MEMCACHED_FAILURE,                          /* 1 */
    MEMCACHED_HOST_LOOKUP_FAILURE,              /* 2 */
    MEMCACHED_CONNECTION_FAILURE,               /* 3 */
    MEMCACHED_CONNECTION_BIND_FAILURE,          /* 4 */
    MEMCACHED_WRITE_FAILURE,                    /* 5 */
    MEMCACHED_READ_FAILURE,                     /* 6 */
    MEMCACHED_UNKNOWN_READ_FAILURE,             /* 7 */
    MEMCACHED_PROTOCOL_ERROR,                   /* 8 */
    MEMCACHED_CLIENT_ERROR,                     /* 9 */
    MEMCACHED_SERVER_ERROR,                     /* 10 */
    MEMCACHED_ERROR,                            /* 11 */
    MEMCACHED_DATA_EXISTS,                      /* 12 */
    MEMCACHED_DATA_DOES_NOT_EXIST,              /* 13 */
    MEMCACHED_NOTSTORED,                        /* 14 */
    MEMCACHED_STORED,                           /* 15 */
    MEMCACHED_NOTFOUND,                         /* 16 */
    MEMCACHED_MEMORY_ALLOCATION_FAILURE,        /* 17 */
    MEMCACHED_PARTIAL_READ,                     /* 18 */
    MEMCACHED_SOME_ERRORS,                      /* 19 */
    MEMCACHED_NO_SERVERS,                       /* 20 */
    MEMCACHED_END,                              /* 21 */
    MEMCACHED_DELETED,                          /* 22 */
    MEMCACHED_VALUE,                            /* 23 */
    MEMCACHED_STAT,                             /* 24 */
    MEMCACHED_ITEM,                             /* 25 */
    MEMCACHED_ERRNO,                            /* 26 */
    MEMCACHED_FAIL_UNIX_SOCKET,                 /* 27 */
    MEMCACHED_NOT_SUPPORTED,                    /* 28 */
    MEMCACHED_NO_KEY_PROVIDED,                  /* 29 */
    MEMCACHED_FETCH_NOTFINISHED,                /* 30 */
    MEMCACHED_TIMEOUT,                          /* 31 */
    MEMCACHED_BUFFERED,                         /* 32 */
    MEMCACHED_BAD_KEY_PROVIDED,                 /* 33 */
    MEMCACHED_INVALID_HOST_PROTOCOL,            /* 34 */
    MEMCACHED_SERVER_MARKED_DEAD,               /* 35 */
    MEMCACHED_UNKNOWN_STAT_KEY,                 /* 36 */
    MEMCACHED_E2BIG,                            /* 37 */
    MEMCACHED_INVALID_ARGUMENTS,                /* 38 */
    MEMCACHED_KEY_TOO_BIG,                      /* 39 */
    MEMCACHED_AUTH_PROBLEM,                     /* 40 */
    MEMCACHED_AUTH_FAILURE,                     /* 41 */
    MEMCACHED_AUTH_CONTINUE,                    /* 42 */
    MEMCACHED_PARSE_ERROR,                      /* 43 */
    MEMCACHED_PARSE_USER_ERROR,                 /* 44 */
    MEMCACHED_DEPRECATED,                       /* 45 */
    MEMCACHED_IN_PROGRESS,                      /* 46 */
    MEMCACHED_SERVER_TEMPORARILY_DISABLED,      /* 47 */
    MEMCACHED_SERVER_MEMORY_ALLOCATION_FAILURE, /* 48 */
    MEMCACHED_MAXIMUM_RETURN,                   /* 49: new codes go before this */
    MEMCACHED_CONNECTION_SOCKET_CREATE_FAILURE = MEMCACHED_ERROR
};
typedef enum memcached_return_t memcached_return_t;

enum memcached_behavior_t {
    MEMCACHED_BEHAVIOR_NO_BLOCK,               /* 0 */
    MEMCACHED_BEHAVIOR_TCP_NODELAY,            /* 1 */
    MEMCACHED_BEHAVIOR_HASH,                   /* 2 */
    MEMCACHED_BEHAVIOR_KETAMA,                 /* 3 */
    MEMCACHED_BEHAVIOR_SOCKET_SEND_SIZE,       /* 4 */
    MEMCACHED_BEHAVIOR_SOCKET_RECV_SIZE,       /* 5 */
    MEMCACHED_BEHAVIOR_CACHE_LOOKUPS,          /* 6 */
    MEMCACHED_BEHAVIOR_SUPPORT_CAS,            /* 7 */
    MEMCACHED_BEHAVIOR_POLL_TIMEOUT,           /* 8 */
    MEMCACHED_BEHAVIOR_DISTRIBUTION,           /* 9 */
    MEMCACHED_BEHAVIOR_BUFFER_REQUESTS,        /* 10 */
    MEMCACHED_BEHAVIOR_USER_DATA,              /* 11 */
    MEMCACHED_BEHAVIOR_SORT_HOSTS,             /* 12 */
    MEMCACHED_BEHAVIOR_VERIFY_KEY,             /* 13 */
    MEMCACHED_BEHAVIOR_CONNECT_TIMEOUT,        /* 14 */
    MEMCACHED_BEHAVIOR_RETRY_TIMEOUT,          /* 15 */
    MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED,        /* 16 */
    MEMCACHED_BEHAVIOR_KETAMA_HASH,            /* 17 */
    MEMCACHED_BEHAVIOR_BINARY_PROTOCOL,        /* 18 */
    MEMCACHED_BEHAVIOR_SND_TIMEOUT,            /* 19 */
    MEMCACHED_BEHAVIOR_RCV_TIMEOUT,            /* 20 */
    MEMCACHED_BEHAVIOR_SERVER_FAILURE_LIMIT,   /* 21 */
    MEMCACHED_BEHAVIOR_IO_MSG_WATERMARK,       /* 22 */
    MEMCACHED_BEHAVIOR_IO_BYTES_WATERMARK,     /* 23 */
    MEMCACHED_BEHAVIOR_IO_KEY_PREFETCH,        /* 24 */
    MEMCACHED_BEHAVIOR_HASH_WITH_PREFIX_KEY,   /* 25 */
    MEMCACHED_BEHAVIOR_NOREPLY,                /* 26 */
    MEMCACHED_BEHAVIOR_USE_UDP,                /* 27 */
    MEMCACHED_BEHAVIOR_AUTO_EJECT_HOSTS,       /* 28 */
    MEMCACHED_BEHAVIOR_NUMBER_OF_REPLICAS,     /* 29 */
    MEMCACHED_BEHAVIOR_RANDOMIZE_REPLICA_READ, /* 30 */
    MEMCACHED_BEHAVIOR_CORK,                   /* 31 */
    MEMCACHED_BEHAVIOR_TCP_KEEPALIVE,          /* 32 */
    MEMCACHED_BEHAVIOR_TCP_KEEPIDLE,           /* 33 */
    MEMCACHED_BEHAVIOR_LOAD_FROM_FILE,         /* 34 */
    MEMCACHED_BEHAVIOR_REMOVE_FAILED_SERVERS,  /* 35 */
    MEMCACHED_BEHAVIOR_DEAD_TIMEOUT,           /* 36 */
    MEMCACHED_BEHAVIOR_SERVER_TIMEOUT_LIMIT,   /* 37 */
    MEMCACHED_BEHAVIOR_MAX,                    /* 38 */
    /* libmemcached-rdma additions, numbered far from the shared range: */
    MEMCACHED_BEHAVIOR_REQUEST_WINDOW = 1000, /* cap on requests in flight per server */
    /* F copies of every value (2..32; 0 or 1: off), or'ed with
     * MEMCACHED_REPLICATION_ASYNC_FLAG for asynchronous copies */
    MEMCACHED_BEHAVIOR_REPLICATION = 1001,
    /* Reed-Solomon: MEMCACHED_ERASURE_CODING(K, M) (0: off) */
    MEMCACHED_BEHAVIOR_ERASURE_CODING = 1002,
    /* values shorter than this many bytes are replicated, not coded */
    MEMCACHED_BEHAVIOR_ERASURE_CODING_THRESHOLD = 1003,
    /* copies and chunks that could not be written (get; set 0 to reset) */
    MEMCACHED_BEHAVIOR_RESILIENCE_FAILURES = 1004,
    /* milliseconds after which a read under REPLICATION or ERASURE_CODING
     * whose server completed nothing meanwhile asks the other copies or
     * chunks too (0: only after the poll timeout failed the server) */
    MEMCACHED_BEHAVIOR_RESILIENCE_HEDGE_TIMEOUT = 1005
};
typedef enum memcached_behavior_t memcached_behavior_t;

enum memcached_hash_t {
    MEMCACHED_HASH_DEFAULT = 0,
    MEMCACHED_HASH_MD5,
    MEMCACHED_HASH_CRC,
    MEMCACHED_HASH_FNV1_64,
    MEMCACHED_HASH_FNV1A_64,
    MEMCACHED_HASH_FNV1_32,
    MEMCACHED_HASH_FNV1A_32,
    MEMCACHED_HASH_HSIEH,
    MEMCACHED_HASH_MURMUR,
    MEMCACHED_HASH_JENKINS,
    MEMCACHED_HASH_MURMUR3,
    MEMCACHED_HASH_CUSTOM,
    MEMCACHED_HASH_MAX
};
typedef enum memcached_hash_t memcached_hash_t;

enum memcached_server_distribution_t {
    MEMCACHED_DISTRIBUTION_MODULA,
    MEMCACHED_DISTRIBUTION_CONSISTENT,
    MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA,
    MEMCACHED_DISTRIBUTION_RANDOM,
    MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA_SPY,
    MEMCACHED_DISTRIBUTION_CONSISTENT_WEIGHTED,
    MEMCACHED_DISTRIBUTION_VIRTUAL_BUCKET,
    MEMCACHED_DISTRIBUTION_CONSISTENT_MAX
};
typedef enum memcached_server_distribution_t memcached_server_distribution_t;

enum memcached_connection_t {
    MEMCACHED_CONNECTION_TCP,
    MEMCACHED_CONNECTION_UDP,
    MEMCACHED_CONNECTION_UNIX_SOCKET,
    /* rdma://host:port (libmemcached-rdma): RDMA RC, or UD when the server
     * refuses RC */
    MEMCACHED_CONNECTION_RDMA,
    MEMCACHED_CONNECTION_TLS,     /* tls://host:port: TCP with TLS (libmemcached-rdma) */
    MEMCACHED_CONNECTION_RDMA_UD, /* rdma+ud://host:port: RDMA UD only (libmemcached-rdma) */
    MEMCACHED_CONNECTION_RDMA_RC  /* rdma+rc://host:port: RDMA RC only (libmemcached-rdma) */
};
typedef enum memcached_connection_t memcached_connection_t;

enum memcached_callback_t {
    MEMCACHED_CALLBACK_PREFIX_KEY = 0,
    MEMCACHED_CALLBACK_USER_DATA = 1,
    MEMCACHED_CALLBACK_CLEANUP_FUNCTION = 2,
    MEMCACHED_CALLBACK_CLONE_FUNCTION = 3,
    MEMCACHED_CALLBACK_GET_FAILURE = 7,
    MEMCACHED_CALLBACK_DELETE_TRIGGER = 8,
    MEMCACHED_CALLBACK_MAX,
    MEMCACHED_CALLBACK_NAMESPACE = MEMCACHED_CALLBACK_PREFIX_KEY
};
typedef enum memcached_callback_t memcached_callback_t;

#endif
