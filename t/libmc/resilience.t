#!/bin/sh
# t/libmc/resilience.t: replicas, failed-server removal, retries, window cap
# (t/libmc/resilience.c) against $MC_SERVER.
exec "${top_builddir:?}/t/libmc/resilience"
