/*
 * test_settings.c: unit test of the command-line parser (settings.c):
 * memcached 1.6's short and long flags set the same fields, -o suboptions
 * act, warn or fail, and bad input fails with a message. TAP output.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "settings.h"
#include "t/rdma/tap.h"

static char out_text[8192], err_text[8192];

/* Parses a NULL-terminated argument list into a fresh struct. */
static enum settings_action parse(struct settings *s, const char *const *args)
{
    char *argv[64];
    int argc = 0;
    argv[argc++] = "memcached-rdma";
    for (; *args && argc < 63; args++)
        argv[argc++] = (char *)*args;
    argv[argc] = NULL;
    settings_init(s);
    FILE *out = fmemopen(out_text, sizeof(out_text), "w");
    FILE *err = fmemopen(err_text, sizeof(err_text), "w");
    enum settings_action a = settings_parse(s, argc, argv, out, err);
    fclose(out);
    fclose(err);
    return a;
}

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* Refused, with either exit status (t/proto/cmdline.t checks which one
 * against memcached's). */
static bool refused(enum settings_action a)
{
    return a == SETTINGS_EXIT_BAD || a == SETTINGS_EXIT_FAILED;
}

/* The same, then frees what the refused parse kept (ext_path's paths). */
static bool refused_freed(struct settings *s, enum settings_action a)
{
    bool r = refused(a);
    settings_free(s);
    return r;
}

int main(void)
{
    struct settings s;
    tap_plan(49);

    tap_ok(parse(&s, ARGS("-v")) == SETTINGS_RUN && s.port == 11211 && s.maxconns == 1024 &&
               s.num_threads == 4 && s.maxbytes == 64u << 20 && s.item_size_max == 1u << 20 &&
               s.reqs_per_event == 20 && s.backlog == 1024 && s.use_cas && s.evict_to_free &&
               s.inter == NULL && s.udpport == 0,
           "memcached's defaults");
    settings_free(&s);

    tap_ok(parse(&s, ARGS("-p", "12345", "-U", "0", "-m", "128", "-c", "10", "-t", "2", "-R", "5",
                          "-b", "64", "-C", "-M", "-A", "-F", "-f", "1.5", "-n", "64", "-L")) ==
                   SETTINGS_RUN &&
               s.port == 12345 && s.maxbytes == 128u << 20 && s.maxconns == 10 &&
               s.num_threads == 2 && s.reqs_per_event == 5 && s.backlog == 64 && !s.use_cas &&
               !s.evict_to_free && s.shutdown_command && !s.flush_enabled && s.factor == 1.5 &&
               s.chunk_size == 64 && s.prealloc,
           "short flags");
    settings_free(&s);

    tap_ok(parse(&s, ARGS("--port=2222", "--udp-port=0", "--memory-limit=32", "--conn-limit=7",
                          "--threads=3", "--max-reqs-per-event=9", "--listen-backlog=8",
                          "--disable-cas", "--disable-evictions", "--enable-shutdown",
                          "--disable-flush-all", "--slab-growth-factor=2", "--slab-min-size=96",
                          "--enable-largepages", "--listen=127.0.0.2", "--protocol=ascii",
                          "--max-item-size=2m")) == SETTINGS_RUN &&
               s.port == 2222 && s.maxbytes == 32u << 20 && s.maxconns == 7 && s.num_threads == 3 &&
               s.reqs_per_event == 9 && s.backlog == 8 && !s.use_cas && !s.evict_to_free &&
               s.shutdown_command && !s.flush_enabled && s.factor == 2.0 && s.chunk_size == 96 &&
               s.prealloc && s.inter && strcmp(s.inter, "127.0.0.2") == 0 &&
               s.binding_protocol == PROTOCOL_ASCII && s.item_size_max == 2u << 20,
           "long flags");
    settings_free(&s);

    tap_ok(parse(&s, ARGS("--factor", "1.1", "--verbose")) == SETTINGS_RUN && s.factor == 1.1 &&
               s.verbose == 1,
           "--factor alias and --verbose");
    settings_free(&s);

    tap_ok(parse(&s, ARGS("-vvv")) == SETTINGS_RUN && s.verbose == 3, "-vvv is level 3");
    settings_free(&s);
    tap_ok(parse(&s, ARGS("-v", "-v")) == SETTINGS_RUN && s.verbose == 2, "-v -v is level 2");
    settings_free(&s);

    tap_ok(parse(&s, ARGS("-l", "127.0.0.1", "-l", "::1")) == SETTINGS_RUN && s.inter &&
               strcmp(s.inter, "127.0.0.1,::1") == 0,
           "repeated -l joins the lists");
    settings_free(&s);

    tap_ok(parse(&s, ARGS("-s", "/tmp/x.sock", "-a", "766")) == SETTINGS_RUN && s.socketpath &&
               strcmp(s.socketpath, "/tmp/x.sock") == 0 && s.access == 0766,
           "-s and octal -a");
    settings_free(&s);

    tap_ok(parse(&s, ARGS("-d", "-u", "nobody", "-P", "/tmp/pid")) == SETTINGS_RUN && s.daemonize &&
               strcmp(s.username, "nobody") == 0 && strcmp(s.pid_file, "/tmp/pid") == 0,
           "-d -u -P");
    settings_free(&s);

    tap_ok(parse(&s, ARGS("-B", "binary")) == SETTINGS_RUN && s.binding_protocol == PROTOCOL_BINARY,
           "-B binary");
    settings_free(&s);
    tap_ok(refused(parse(&s, ARGS("-B", "udp"))) &&
               strstr(err_text, "Invalid value for binding protocol"),
           "-B with a bad name fails with a message");
    settings_free(&s);

    tap_ok(parse(&s, ARGS("-I", "512k")) == SETTINGS_RUN && s.item_size_max == 512u * 1024,
           "-I with k suffix");
    settings_free(&s);
    tap_ok(refused(parse(&s, ARGS("-I", "100"))) && strstr(err_text, "1024 bytes"),
           "-I below 1k fails");
    settings_free(&s);
    tap_ok(refused(parse(&s, ARGS("-m", "64", "-I", "40m"))) && strstr(err_text, "1/2 of memory"),
           "-I above half of -m fails");
    settings_free(&s);

    tap_ok(parse(&s, ARGS("-o", "hashpower=20,slab_chunk_max=256,no_lru_crawler,idle_timeout=30,"
                                "no_maxconns_fast,tail_repair_time=60,lru_crawler_sleep=50,"
                                "lru_crawler_tocrawl=7,slab_automove=0")) == SETTINGS_RUN &&
               s.hashpower_init == 20 && s.slab_chunk_max == 256 && !s.lru_crawler &&
               s.idle_timeout == 30 && !s.maxconns_fast && s.tail_repair_time == 60 &&
               s.lru_crawler_sleep == 50 && s.lru_crawler_tocrawl == 7 && s.slab_automove == 0,
           "-o suboptions that act");
    settings_free(&s);

    tap_ok(parse(&s, ARGS("-o", "slab_reassign,lru_maintainer,hot_lru_pct=20")) == SETTINGS_RUN &&
               strstr(err_text, "slab_reassign") && strstr(err_text, "ignored"),
           "known but unimplemented -o suboptions warn and are ignored");
    settings_free(&s);

    tap_ok(refused(parse(&s, ARGS("-o", "no_such_option"))) && strstr(err_text, "no_such_option"),
           "unknown -o suboption fails naming it");
    settings_free(&s);
    tap_ok(refused(parse(&s, ARGS("-o", "hashpower=abc"))), "bad -o value fails");
    settings_free(&s);

    tap_ok(refused(parse(&s, ARGS("-q"))) && strstr(err_text, "Illegal argument"),
           "unknown short flag fails");
    settings_free(&s);
    tap_ok(refused(parse(&s, ARGS("--no-such-flag"))) && strstr(err_text, "--no-such-flag"),
           "unknown long flag fails naming it");
    settings_free(&s);
    tap_ok(refused(parse(&s, ARGS("-p"))) && strstr(err_text, "requires an argument"),
           "missing argument fails");
    settings_free(&s);

    tap_ok(refused(parse(&s, ARGS("-t", "0"))) && refused(parse(&s, ARGS("-c", "-1"))) &&
               refused(parse(&s, ARGS("-f", "1.0"))) && refused(parse(&s, ARGS("-R", "0"))) &&
               refused(parse(&s, ARGS("-p", "70000"))) && refused(parse(&s, ARGS("-U", "70000"))) &&
               refused(parse(&s, ARGS("-m", "lots"))),
           "out-of-range and non-numeric values fail");
    settings_free(&s);

    tap_ok(parse(&s, ARGS("-S")) == SETTINGS_RUN && s.sasl && s.binding_protocol == PROTOCOL_BINARY,
           "-S turns SASL on and the protocol to binary, as memcached");
    settings_free(&s);
    tap_ok(parse(&s, ARGS("-S", "-B", "auto")) == SETTINGS_EXIT_BAD && strstr(err_text, "ASCII") &&
               parse(&s, ARGS("-S", "-B", "ascii")) == SETTINGS_EXIT_BAD &&
               parse(&s, ARGS("-S", "-U", "11211")) == SETTINGS_EXIT_BAD &&
               strstr(err_text, "Cannot enable UDP") &&
               parse(&s, ARGS("-S", "-B", "binary")) == SETTINGS_RUN,
           "-S refuses the ASCII protocol and UDP (exit 64), as memcached");
    settings_free(&s);
    tap_ok(parse(&s, ARGS("-Z", "-o", "ssl_chain_cert=/c.pem,ssl_key=/k.pem,ssl_verify_mode=2",
                          "-o", "ssl_min_version=3,ssl_wbuf_size=64,ssl_session_cache")) ==
                   SETTINGS_RUN &&
               s.tls.enabled && strcmp(s.tls.chain_cert, "/c.pem") == 0 &&
               strcmp(s.tls.key, "/k.pem") == 0 && s.tls.verify_mode == 3 &&
               s.tls.min_version == 0x304 && s.tls.wbuf_size == 65536 && s.tls.session_cache,
           "-Z and -o ssl_* are read as memcached reads them");
    settings_free(&s);
    tap_ok(parse(&s, ARGS("-o", "ssl_verify_mode=4")) == SETTINGS_EXIT_FAILED &&
               strstr(err_text, "Invalid ssl_verify_mode") &&
               parse(&s, ARGS("-o", "ssl_min_version=x")) == SETTINGS_EXIT_FAILED &&
               parse(&s, ARGS("-o", "ssl_key")) == SETTINGS_EXIT_FAILED &&
               strstr(err_text, "Missing ssl_key argument") &&
               parse(&s, ARGS("-Z", "-p", "0")) == SETTINGS_EXIT_BAD &&
               strstr(err_text, "without a TCP port"),
           "bad ssl_* values and -Z without TCP are refused with memcached's lines");
    settings_free(&s);

    tap_ok(parse(&s, ARGS("-Y", "/etc/mc-auth")) == SETTINGS_RUN && s.auth_file &&
               strcmp(s.auth_file, "/etc/mc-auth") == 0,
           "-Y names the ASCII authentication file");
    settings_free(&s);

    tap_ok(parse(&s, ARGS("-h")) == SETTINGS_EXIT_OK && strstr(out_text, "--port") &&
               strstr(out_text, "-o, --extended"),
           "-h prints usage");
    settings_free(&s);
    tap_ok(parse(&s, ARGS("-V")) == SETTINGS_EXIT_OK &&
               strncmp(out_text, "memcached-rdma ", 15) == 0,
           "-V prints \"memcached-rdma <version>\"");
    settings_free(&s);
    tap_ok(parse(&s, ARGS("--version")) == SETTINGS_EXIT_OK &&
               strncmp(out_text, "memcached-rdma ", 15) == 0,
           "--version");
    settings_free(&s);

    tap_ok(parse(&s, ARGS("-p", "1", "stray")) == SETTINGS_RUN &&
               strstr(err_text, "ignoring argument \"stray\""),
           "a stray positional argument is ignored with a warning, as memcached runs");
    settings_free(&s);

    /* memcached 1.6.18 reads numbers with atoi(): trailing text is ignored */
    tap_ok(parse(&s, ARGS("-m", "100m")) == SETTINGS_RUN && s.maxbytes == 100u << 20,
           "-m 100m is 100 megabytes (the suffix is ignored, as memcached)");
    settings_free(&s);
    tap_ok(refused(parse(&s, ARGS("-m", "1g"))) && strstr(err_text, "1/2 of memory"),
           "-m 1g is 1 megabyte, too small for the default -I (as memcached)");
    settings_free(&s);
    tap_ok(parse(&s, ARGS("-c", "10x", "-t", "2x", "-R", "5x", "-n", "64x", "-f", "1.5x")) ==
                   SETTINGS_RUN &&
               s.maxconns == 10 && s.num_threads == 2 && s.reqs_per_event == 5 &&
               s.chunk_size == 64 && s.factor == 1.5,
           "numeric flags ignore trailing text");
    settings_free(&s);
    tap_ok(parse(&s, ARGS("-b", "0")) == SETTINGS_RUN && s.backlog == 0, "-b 0 is accepted");
    settings_free(&s);
    tap_ok(parse(&s, ARGS("-D", "ab")) == SETTINGS_RUN && s.prefix_delimiter == 'a' &&
               s.detail_enabled,
           "-D ab uses its first character");
    settings_free(&s);
    tap_ok(parse(&s, ARGS("-p", "-1", "-U", "-1")) == SETTINGS_RUN && s.port == -1 &&
               s.udpport == -1,
           "-p -1 and -U -1 (any free port)");
    settings_free(&s);
    tap_ok(parse(&s, ARGS("-I", "1.5m")) == SETTINGS_RUN && s.item_size_max == 1u << 20 &&
               refused(parse(&s, ARGS("-I", "1g"))),
           "-I reads atoi() and knows only k and m");
    settings_free(&s);

    /* slab_chunk_max is in bytes and checked against -I and the page size */
    tap_ok(parse(&s, ARGS("-o", "slab_chunk_max=524288")) == SETTINGS_RUN &&
               s.slab_chunk_max == 524288,
           "-o slab_chunk_max=524288 is bytes");
    settings_free(&s);
    tap_ok(refused(parse(&s, ARGS("-o", "slab_chunk_max=1000"))) &&
               strstr(err_text, "evenly divisible"),
           "slab_chunk_max must divide -I");
    settings_free(&s);
    tap_ok(refused(parse(&s, ARGS("-I", "100k"))) && strstr(err_text, "cannot be larger") &&
               parse(&s, ARGS("-I", "16k", "-o", "slab_chunk_max=16384")) == SETTINGS_RUN,
           "-I below the default slab_chunk_max needs a smaller slab_chunk_max");
    settings_free(&s);
    tap_ok(parse(&s, ARGS("-o", "no_modern")) == SETTINGS_RUN && s.slab_chunk_max == 1u << 20 &&
               !s.lru_crawler && s.slab_automove == 0,
           "-o no_modern restores 1.4 defaults");
    settings_free(&s);

    tap_ok(parse(&s, ARGS("-o", "modern,")) == SETTINGS_RUN &&
               refused(parse(&s, ARGS("-o", ",modern"))) &&
               refused(parse(&s, ARGS("-o", "modern,,track_sizes"))),
           "-o: a trailing comma ends the list, an empty entry elsewhere fails");
    settings_free(&s);
    tap_ok(refused(parse(&s, ARGS("-o", "tail_repair_time=0"))) &&
               refused(parse(&s, ARGS("-o", "hash_algorithm=foo"))) &&
               parse(&s, ARGS("-o", "hash_algorithm=xxh3")) == SETTINGS_RUN,
           "-o tail_repair_time and hash_algorithm are checked");
    settings_free(&s);
    tap_ok(refused(parse(&s, ARGS("-o", "no_lru_maintainer,temporary_ttl=10"))) &&
               parse(&s, ARGS("-o", "hot_lru_pct=70,warm_lru_pct=5")) == SETTINGS_RUN &&
               refused(parse(&s, ARGS("-o", "hot_lru_pct=70"))),
           "-o LRU tunables are checked together once all are read");
    settings_free(&s);
    tap_ok(parse(&s, ARGS("-o", "slab_sizes=100-200-300")) == SETTINGS_RUN &&
               refused(parse(&s, ARGS("-o", "slab_sizes=1000-200"))) &&
               refused(parse(&s, ARGS("-o", "slab_sizes=100-104"))) &&
               refused(parse(&s, ARGS("-o", "worker_logbuf_size=10"))),
           "-o slab_sizes is checked (and worker_logbuf_size's value too, as memcached)");
    settings_free(&s);
    tap_ok(refused(parse(&s, ARGS("-o", "meta_response_old"))) &&
               refused(parse(&s, ARGS("-o", "proxy_config=x"))) &&
               refused(parse(&s, ARGS("-o", "ext_page_size=abc"))) &&
               refused(parse(&s, ARGS("-o", "ext_path=/tmp/x"))) &&
               refused_freed(&s, parse(&s, ARGS("-o", "ext_path=/tmp/x:64m,ext_page_size=8"))) &&
               refused_freed(&s, parse(&s, ARGS("-o", "ext_wbuf_size=3,ext_path=/tmp/x:64m"))) &&
               refused(parse(&s, ARGS("-o", "ext_path=/tmp/x:64m:compact"))) &&
               refused(parse(&s, ARGS("-o", "ext_item_size=-1"))) &&
               refused(parse(&s, ARGS("-o", "ssl_verify_mode=9"))) &&
               parse(&s, ARGS("-o", "ext_page_size=64,ssl_verify_mode=1")) == SETTINGS_RUN,
           "-o: options memcached 1.6.18 lacks fail; ignored ones have their values checked");
    settings_free(&s);
    tap_ok(parse(&s, ARGS("-o",
                          "ext_page_size=8,ext_wbuf_size=2,ext_path=/tmp/x:1g,ext_path=/tmp/y:64m",
                          "-o", "ext_item_size=100,ext_max_frag=0.5,ext_drop_unread")) ==
                   SETTINGS_RUN &&
               s.ext.npaths == 2 && s.ext.paths[0].size == 1024ULL * 1024 * 1024 &&
               strcmp(s.ext.paths[1].path, "/tmp/y") == 0 && s.ext.paths[1].size == 64ULL << 20 &&
               s.ext.page_size == 8ULL << 20 && s.ext.wbuf_size == 2ULL << 20 &&
               s.ext.item_size == 100 && s.ext.max_frag == 0.5 && s.ext.drop_unread,
           "-o ext_*: paths with sizes, page and buffer sizes in MiB, thresholds");
    settings_free(&s);
    tap_ok(parse(&s, ARGS("-o", "hashpower=12")) == SETTINGS_EXIT_FAILED &&
               parse(&s, ARGS("-t", "2", "-o", "hashpower=12")) == SETTINGS_RUN &&
               refused(parse(&s, ARGS("-N", "8"))),
           "hashpower must exceed the item lock table; -N at most -t");
    settings_free(&s);
    return tap_exit_status();
}
