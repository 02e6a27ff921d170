#!/bin/sh
# t/libmc/by_key_ref.t: t/libmc/by_key.c built against Debian's libmemcached
# (t/libmc/by_key_ref) against $MC_SERVER: the _by_key expectations that
# by_key checks in libmemcached-rdma are libmemcached's own.
ref="${top_builddir:?}/t/libmc/by_key_ref"
if [ ! -x "$ref" ]; then
    echo "1..0 # SKIP Debian's libmemcached not available (no by_key_ref)"
    exit 0
fi
exec "$ref"
