#!/bin/sh
# t/libmc/resilience.t: replicas, failed-server removal, retries, window cap
# (t/libmc/resilience.c) against $MC_SERVER. Run with no socket spin budget,
# so every wait for a reply sleeps in poll() at once (the other suites run
# with the default budget).
LIBMEMCACHED_SOCKET_SPIN_US=0 exec "${top_builddir:?}/t/libmc/resilience"
