#!/bin/sh
# t/libmc/slow_handshake.t: a TLS handshake or SASL exchange longer than
# POLL_TIMEOUT inside a wait (t/libmc/slow_handshake.c), with the
# certificates and the SASL user database t/libmc/tls.t makes.
TLS_TEST_PROGRAM=slow_handshake exec sh "$(dirname "$0")/tls.t"
