#!/bin/sh
# t/libmc/sasl_ref.t: t/libmc/sasl.c built against Debian's libmemcached
# (t/libmc/sasl_ref): the expectations sasl.t checks are libmemcached's.
if [ ! -x "${top_builddir:?}/t/libmc/sasl_ref" ]; then
    echo "1..0 # SKIP Debian's libmemcached not available (no sasl_ref)"
    exit 0
fi
SASL_TEST_PROGRAM=sasl_ref exec sh "$(dirname "$0")/sasl.t"
