#!/bin/sh
# t/libmc/redundancy_calls.t: the calls on REPLICATION and ERASURE_CODING
# keys, with servers stopped (t/libmc/redundancy_calls.c) against
# $MC_SERVER, over TCP and Unix sockets.
exec "${top_builddir:?}/t/libmc/redundancy_calls"
