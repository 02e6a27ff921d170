#!/bin/sh
# t/libmc/deprecated_types_ref.t: t/libmc/deprecated_types.c built against
# Debian's libmemcached: the names and what they mean are libmemcached's.
ref="${top_builddir:?}/t/libmc/deprecated_types_ref"
if [ ! -x "$ref" ]; then
    echo "1..0 # SKIP Debian's libmemcached not available (no deprecated_types_ref)"
    exit 0
fi
exec "$ref"
