#!/bin/sh
# t/libmc/deprecated_types.t: libmemcached 1.0's older type names compile
# against libmemcached-rdma's headers and mean the same types
# (t/libmc/deprecated_types.c; no server needed).
exec "${top_builddir:?}/t/libmc/deprecated_types"
