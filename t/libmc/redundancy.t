#!/bin/sh
# t/libmc/redundancy.t: REPLICATION and ERASURE_CODING with servers killed
# (t/libmc/redundancy.c) against $MC_SERVER, over TCP and Unix sockets.
exec "${top_builddir:?}/t/libmc/redundancy"
