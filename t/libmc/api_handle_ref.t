#!/bin/sh
# t/libmc/api_handle_ref.t: t/libmc/api_handle.c built against Debian's
# libmemcached (t/libmc/api_handle_ref) against $MC_SERVER: the expectations
# that api_handle checks in libmemcached-rdma are libmemcached's own.
ref="${top_builddir:?}/t/libmc/api_handle_ref"
if [ ! -x "$ref" ]; then
    echo "1..0 # SKIP Debian's libmemcached not available (no api_handle_ref)"
    exit 0
fi
exec "$ref"
