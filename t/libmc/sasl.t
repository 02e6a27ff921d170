#!/bin/sh
# t/libmc/sasl.t: libmemcached's SASL calls (t/libmc/sasl.c) against
# $MC_SERVER started with -S. The user database (alice / secret, mechanisms
# PLAIN and CRAM-MD5) is made here with saslpasswd2 (Debian sasl2-bin).
prog="${top_builddir:?}/t/libmc/${SASL_TEST_PROGRAM:-sasl}"
if [ ! -x "$prog" ]; then
    echo "1..0 # SKIP $prog not built"
    exit 0
fi
saslpasswd=$(command -v saslpasswd2 || echo /usr/sbin/saslpasswd2)
if [ ! -x "$saslpasswd" ]; then
    echo "1..0 # SKIP saslpasswd2 (Debian sasl2-bin) is not installed"
    exit 0
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/lmr-sasl-XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
printf 'mech_list: plain cram-md5\nsasldb_path: %s/sasldb\n' "$dir" > "$dir/memcached.conf"
echo secret | "$saslpasswd" -f "$dir/sasldb" -a memcached -c -p alice || exit 1
SASL_CONF_PATH=$dir "$prog"
