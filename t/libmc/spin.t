#!/bin/sh
# t/libmc/spin.t: the socket spin budget LIBMEMCACHED_SOCKET_SPIN_US
# (t/libmc/spin.c) against $MC_SERVER.
exec "${top_builddir:?}/t/libmc/spin"
