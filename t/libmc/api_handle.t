#!/bin/sh
# t/libmc/api_handle.t: the blocking libmemcached API's handle: behaviors,
# server lists, configuration strings, callbacks, allocators
# (t/libmc/api_handle.c) against $MC_SERVER.
exec "${top_builddir:?}/t/libmc/api_handle"
