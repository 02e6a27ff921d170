#!/bin/sh
# t/libmc/degraded.t: one server killed or stopped costs no poll timeout
# (t/libmc/degraded.c) against $MC_SERVER, over TCP and Unix sockets.
exec "${top_builddir:?}/t/libmc/degraded"
