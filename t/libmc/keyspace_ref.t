#!/bin/sh
# t/libmc/keyspace_ref.t: t/libmc/keyspace.c built against Debian's
# libmemcached (t/libmc/keyspace_ref) against $MC_SERVER: the placement and
# the stored ciphertext keyspace checks in libmemcached-rdma are
# libmemcached's own.
ref="${top_builddir:?}/t/libmc/keyspace_ref"
if [ ! -x "$ref" ]; then
    echo "1..0 # SKIP Debian's libmemcached not available (no keyspace_ref)"
    exit 0
fi
# Debian's libhashkit leaks the encoding key's contexts (see the file)
export LSAN_OPTIONS="suppressions=$(dirname "$0")/lsan-libhashkit.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
exec "$ref"
