#!/bin/sh
# t/libmc/tls.t: tls:// servers (t/libmc/tls.c) against $MC_SERVER with -Z.
# The certificates are made here with the openssl command: a CA, a server
# certificate for 127.0.0.1 and localhost, a client certificate, and an
# unrelated CA.
prog="${top_builddir:?}/t/libmc/${TLS_TEST_PROGRAM:-tls}"
if [ ! -x "$prog" ]; then
    echo "1..0 # SKIP $prog not built"
    exit 0
fi
command -v openssl >/dev/null || { echo "1..0 # SKIP no openssl command"; exit 0; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/lmr-tls-XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
cert() { # name subject [ca-name san]
    openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:prime256v1 \
        -out "$dir/$1_key.pem" 2>/dev/null || return 1
    if [ -z "$3" ]; then
        openssl req -x509 -new -key "$dir/$1_key.pem" -days 3650 -subj "$2" \
            -out "$dir/$1.pem" 2>/dev/null
    else
        printf 'subjectAltName=%s\n' "$4" > "$dir/$1.ext"
        openssl req -new -key "$dir/$1_key.pem" -subj "$2" -out "$dir/$1.csr" 2>/dev/null &&
        openssl x509 -req -in "$dir/$1.csr" -CA "$dir/$3.pem" -CAkey "$dir/$3_key.pem" \
            -CAcreateserial -days 3650 -extfile "$dir/$1.ext" -out "$dir/$1_crt.pem" 2>/dev/null
    fi
}
cert ca "/CN=test CA" &&
cert server "/CN=localhost" ca "DNS:localhost,IP:127.0.0.1" &&
cert client "/CN=client" ca "DNS:client" &&
cert other_ca "/CN=unrelated CA" || { echo "1..0 # SKIP openssl could not make certificates"; exit 0; }
# a SASL user database too, for SASL over TLS (skipped without saslpasswd2)
saslpasswd=$(command -v saslpasswd2 || echo /usr/sbin/saslpasswd2)
if [ -x "$saslpasswd" ] &&
   printf 'mech_list: plain cram-md5\nsasldb_path: %s/sasldb\n' "$dir" > "$dir/memcached.conf" &&
   echo secret | "$saslpasswd" -f "$dir/sasldb" -a memcached -c -p alice; then
    SASL_CONF_PATH=$dir
    export SASL_CONF_PATH
fi
TLS_TEST_DIR=$dir "$prog"
