#!/bin/sh
# t/libmc/api_basic.t: the blocking libmemcached API's data calls
# (t/libmc/api_basic.c) against $MC_SERVER.
exec "${top_builddir:?}/t/libmc/api_basic"
