#!/bin/sh
# t/libmc/nonblocking.t: the non-blocking API and failure handling
# (t/libmc/nonblocking.c) against $MC_SERVER.
exec "${top_builddir:?}/t/libmc/nonblocking"
