#!/bin/sh
# t/libmc/exports.t: the shared library exports only the public API
# (memcached_* and libmemcached_* functions), carries a versioned soname, and
# exports every function Debian's libmemcached does, except those
# doc/libmemcached-rdma.md lists as not done (so a program that links with
# libmemcached links with this library).
lib="${top_builddir:?}/libmemcached-rdma/.libs/libmemcached-rdma.so"
echo "1..5"
if [ ! -e "$lib" ]; then
  echo "not ok 1 - $lib exists"; echo "not ok 2 # SKIP"; echo "not ok 3 # SKIP"; echo "not ok 4 # SKIP"; echo "not ok 5 # SKIP"
  exit 1
fi
echo "ok 1 - $lib exists"
if ! command -v nm >/dev/null 2>&1 || ! command -v objdump >/dev/null 2>&1; then
  echo "ok 2 # SKIP nm/objdump not available"; echo "ok 3 # SKIP"; echo "ok 4 # SKIP"; echo "ok 5 # SKIP"; exit 0
fi
symbols=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBRVW]$/ {print $3}')
stray=$(printf '%s\n' "$symbols" | grep -v -E '^(memcached|libmemcached_)' | grep -v '^$')
if [ -z "$stray" ]; then
  echo "ok 2 - only memcached_* / libmemcached_* symbols are exported"
else
  echo "not ok 2 - only memcached_* / libmemcached_* symbols are exported"
  printf '%s\n' "$stray" | sed 's/^/#   stray: /'
fi
# check_exported N "what" NAME...: test N passes when every NAME is exported.
check_exported() {
  n=$1 what=$2 missing=""
  shift 2
  for name in "$@"; do
    printf '%s\n' "$symbols" | grep -qx "$name" || missing="$missing $name"
  done
  if [ -z "$missing" ]; then echo "ok $n - $what"; else echo "not ok $n - $what (missing:$missing)"; fi
}
check_exported 3 "the blocking and non-blocking calls are exported" \
  memcached_create memcached_iset memcached_wait_all
soname=$(objdump -p "$lib" | awk '$1 == "SONAME" {print $2}')
case "$soname" in
  libmemcached-rdma.so.[0-9]*) echo "ok 4 - versioned soname $soname" ;;
  *) echo "not ok 4 - versioned soname (got '$soname')" ;;
esac
# not done yet (doc/libmemcached-rdma.md): none
not_yet=""
ref=$(ldconfig -p 2>/dev/null | awk '/libmemcached\.so\.[0-9]/ {print $NF; exit}')
if [ -z "$ref" ] || [ ! -e "$ref" ]; then
  echo "ok 5 # SKIP Debian's libmemcached not installed"
  exit 0
fi
expected=""
for name in $(nm -D --defined-only "$ref" | awk '$2 ~ /^[TDBRVW]$/ {print $3}' | sort -u); do
  case " $(echo $not_yet) " in *" $name "*) ;; *) expected="$expected $name" ;; esac
done
# shellcheck disable=SC2086 # one word per name
check_exported 5 "every function libmemcached exports is exported, but the listed ones not done" $expected
