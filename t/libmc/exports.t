#!/bin/sh
# t/libmc/exports.t: the shared library exports only the public API
# (memcached_* and libmemcached_* functions) and carries a versioned soname.
lib="${top_builddir:?}/libmemcached-rdma/.libs/libmemcached-rdma.so"
echo "1..4"
if [ ! -e "$lib" ]; then
  echo "not ok 1 - $lib exists"; echo "not ok 2 # SKIP"; echo "not ok 3 # SKIP"; echo "not ok 4 # SKIP"
  exit 1
fi
echo "ok 1 - $lib exists"
if ! command -v nm >/dev/null 2>&1 || ! command -v objdump >/dev/null 2>&1; then
  echo "ok 2 # SKIP nm/objdump not available"; echo "ok 3 # SKIP"; echo "ok 4 # SKIP"; exit 0
fi
symbols=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBRVW]$/ {print $3}')
stray=$(printf '%s\n' "$symbols" | grep -v -E '^(memcached|libmemcached_)' | grep -v '^$')
if [ -z "$stray" ]; then
  echo "ok 2 - only memcached_* / libmemcached_* symbols are exported"
else
  echo "not ok 2 - only memcached_* / libmemcached_* symbols are exported"
  printf '%s\n' "$stray" | sed 's/^/#   stray: /'
fi
for name in memcached_create memcached_iset memcached_wait_all; do
  printf '%s\n' "$symbols" | grep -qx "$name" || missing="$missing $name"
done
if [ -z "$missing" ]; then
  echo "ok 3 - the blocking and non-blocking calls are exported"
else
  echo "not ok 3 - the blocking and non-blocking calls are exported (missing:$missing)"
fi
soname=$(objdump -p "$lib" | awk '$1 == "SONAME" {print $2}')
case "$soname" in
  libmemcached-rdma.so.[0-9]*) echo "ok 4 - versioned soname $soname" ;;
  *) echo "not ok 4 - versioned soname (got '$soname')" ;;
esac
