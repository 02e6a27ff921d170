#!/bin/sh
# t/libmc/compat.t: key placement of libmemcached-rdma matches Debian's
# libmemcached over three servers (t/libmc/compat_reader.c).
exec "${top_builddir:?}/t/libmc/compat_reader"
