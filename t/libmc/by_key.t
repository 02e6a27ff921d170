#!/bin/sh
# t/libmc/by_key.t: the _by_key calls over three servers (t/libmc/by_key.c)
# against $MC_SERVER.
exec "${top_builddir:?}/t/libmc/by_key"
