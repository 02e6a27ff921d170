# benchmarks/bench-lib.sh: shell functions shared by the compare-* scripts
# (sourced, not run): free loopback ports, starting and stopping servers,
# reading stats and RSS, locating programs in build trees. Nothing here
# measures anything.

bench_top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bench_pids=()

bench_die() {
  echo "$(basename "$0"): $*" >&2
  exit 1
}

# A TCP port on 127.0.0.1 that was free a moment ago.
bench_free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# bench_wait_port PORT [PID]: waits up to 10 s for a listener (giving up early
# when process PID has exited).
bench_wait_port() {
  local port=$1 pid=${2:-} i
  for i in $(seq 1 100); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      return 0
    fi
    if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
      return 1
    fi
    sleep 0.1
  done
  return 1
}

# bench_start_server BINARY ARGS...: starts a memcached-compatible server on a
# free 127.0.0.1 port (UDP off); sets bench_server_pid and bench_server_port.
# If the port was taken between probing and binding (the server exits), it
# tries again on another port.
bench_start_server() {
  local bin=$1 attempt port pid
  shift
  local user_args=()
  [ "$(id -u)" = 0 ] && user_args=(-u root)
  for attempt in 1 2 3 4 5; do
    port=$(bench_free_port)
    "$bin" "${user_args[@]}" -l 127.0.0.1 -p "$port" -U 0 "$@" >/dev/null 2>&1 &
    pid=$!
    bench_pids+=("$pid")
    if bench_wait_port "$port" "$pid" && sleep 0.2 && kill -0 "$pid" 2>/dev/null; then
      bench_server_pid=$pid bench_server_port=$port
      return 0
    fi
    bench_stop_server "$pid"
  done
  bench_die "$bin did not start listening on 127.0.0.1"
}

# bench_stop_server PID
bench_stop_server() {
  local pid=$1
  kill "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  local keep=() p
  for p in "${bench_pids[@]}"; do [ "$p" != "$pid" ] && keep+=("$p"); done
  bench_pids=("${keep[@]}")
}

bench_cleanup() {
  local p
  for p in "${bench_pids[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${bench_pids[@]}"; do wait "$p" 2>/dev/null; done
  bench_pids=()
  [ -n "${bench_tmp:-}" ] && rm -rf "$bench_tmp"
}

# bench_stat PORT NAME: one value of "stats".
bench_stat() {
  local port=$1 name=$2 fd
  exec {fd}<>"/dev/tcp/127.0.0.1/$port" || return 1
  printf 'stats\r\nquit\r\n' >&"$fd"
  timeout 5 cat <&"$fd" | tr -d '\r' | awk -v n="$name" '$1 == "STAT" && $2 == n { print $3 }'
  exec {fd}>&-
}

# bench_rss_kb PID: resident set size in KiB.
bench_rss_kb() {
  awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"
}

# bench_cpu_ns PID: processor time process PID has run so far, in ns (the
# sum over its threads of /proc/PID/task/*/schedstat's first field; threads
# that have exited are not counted).
bench_cpu_ns() {
  cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ t += $1 } END { printf "%.0f\n", t }'
}

# bench_runq_ns PID: time process PID's threads have spent so far waiting on
# a run queue for a processor, in ns (schedstat's second field).
bench_runq_ns() {
  cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ t += $2 } END { printf "%.0f\n", t }'
}

# bench_host_busy_ns: processor time the whole host has spent so far outside
# idle and I/O wait, all CPUs and all processes, in ns (/proc/stat).
bench_host_busy_ns() {
  awk -v hz="$(getconf CLK_TCK)" '$1 == "cpu" {
    printf "%.0f\n", ($2 + $3 + $4 + $7 + $8 + $9) * 1e9 / hz; exit }' /proc/stat
}

# bench_ctxsw PID: context switches process PID's threads have made so far,
# voluntary (it waited) and involuntary (it was preempted), as "VOL INVOL"
# (the sums of /proc/PID/task/*/status; exited threads are not counted).
bench_ctxsw() {
  cat /proc/"$1"/task/*/status 2>/dev/null |
    awk '/^voluntary_ctxt_switches/ { v += $2 } /^nonvoluntary_ctxt_switches/ { n += $2 }
      END { printf "%.0f %.0f\n", v, n }'
}

# bench_find_built RELPATH: the newest build/*/RELPATH under the source tree,
# leaving out sanitizer builds (they measure the sanitizers).
bench_find_built() {
  local rel=$1 candidate dir
  for candidate in $(ls -t "$bench_top"/build/*/"$rel" 2>/dev/null); do
    dir=${candidate%/"$rel"}
    if ! grep -q '^#define HAVE_SANITIZERS 1' "$dir/config.h" 2>/dev/null; then
      echo "$candidate"
      return 0
    fi
  done
}

# bench_ratio A B: A/B with two decimals ("-" when B is zero or empty).
bench_ratio() {
  awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 == 0) print "-"; else printf "%.2f\n", a / b }'
}

# bench_drop_cache FILE...: writes back and drops FILE's pages from the page
# cache (fdatasync, then posix_fadvise DONTNEED), so the next reads of it
# go to the device.
bench_drop_cache() {
  python3 -c 'import os, sys
for path in sys.argv[1:]:
    fd = os.open(path, os.O_RDONLY)
    os.fdatasync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)' "$@"
}

# bench_drop_cache_loop SECONDS FILE...: does bench_drop_cache every SECONDS
# in the background until stopped with bench_stop_server; sets
# bench_dropper_pid.
bench_drop_cache_loop() {
  local interval=$1
  shift
  python3 -c 'import os, sys, time
interval, paths = float(sys.argv[1]), sys.argv[2:]
fds = [os.open(p, os.O_RDONLY) for p in paths]
while True:
    for fd in fds:
        os.fdatasync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    time.sleep(interval)' "$interval" "$@" &
  bench_dropper_pid=$!
  bench_pids+=("$bench_dropper_pid")
}

# bench_read_bytes PID: bytes process PID has had read from storage devices
# (read_bytes of /proc/PID/io: page-cache hits do not count).
bench_read_bytes() {
  awk '/^read_bytes:/ { print $2 }' "/proc/$1/io"
}

# bench_fs_type PATH: the file system type holding PATH (tmpfs, ext4, ...).
bench_fs_type() {
  stat -f -c %T "$1"
}
