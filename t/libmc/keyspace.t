#!/bin/sh
# t/libmc/keyspace.t: virtual buckets, hashkit objects and encrypted values
# (t/libmc/keyspace.c) against $MC_SERVER.
exec "${top_builddir:?}/t/libmc/keyspace"
