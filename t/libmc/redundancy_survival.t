#!/bin/sh
# t/libmc/redundancy_survival.t: REPLICATION and ERASURE_CODING keep values
# with servers killed (t/libmc/redundancy_survival.c) against $MC_SERVER,
# over TCP and Unix sockets.
exec "${top_builddir:?}/t/libmc/redundancy_survival"
