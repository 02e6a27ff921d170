#!/usr/bin/python3
# t/proto/warm_restart.t: warm restart (-e <file>). A server holding
# 1,000,000 small items is stopped with "shutdown graceful" and started
# again with the same settings: every item is there with its value, CAS,
# flags and remaining TTL. Also: SIGUSR1 saves the same way, SIGTERM does
# not; an item whose TTL ends while the server is stopped is gone; a changed
# -m starts empty and says why; a truncated or garbled metadata file starts
# empty (no crash); an empty one refuses to start (as memcached 1.6.18 does);
# ours: a damaged memory file starts empty. Runs against both servers.
import atexit
import os
import re
import shutil
import signal
import tempfile
import time

from mctest import TAP, start_server, target

t = TAP()
ITEMS = 1000000
BATCH = 5000
work = tempfile.mkdtemp(prefix="warm-restart-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
mem = os.path.join(work, "cache")
meta = mem + ".meta"
atexit.register(shutil.rmtree, work, True)


def key_of(i, prefix="wr"):
    return "%s:%07d" % (prefix, i)


def value_of(i):
    return "v%d" % (i * 7919)


def flags_of(i):
    return (i * 2654435761) % 4294967296


def fill(c, count, now, prefix="wr"):
    """Pipelined sets: varied flags; every 10th item has a relative TTL,
    every 7th an absolute one; then waits until all are processed."""
    abs_exp = int(now) + 50000
    out = []
    for i in range(count):
        value = value_of(i)
        exp = 0
        if i % 10 == 3:
            exp = 3000 + i % 500
        elif i % 7 == 5:
            exp = abs_exp + i % 100
        out.append("set %s %d %d %d noreply\r\n%s\r\n" % (key_of(i, prefix), flags_of(i), exp, len(value), value))
        if len(out) == 20000:
            c.send("".join(out))
            out = []
    out.append("mn\r\n")
    c.send("".join(out))
    return c.until(b"MN\r\n", 60) .endswith(b"MN\r\n")


def read_all(c, count, prefix="wr"):
    """{key: (value, flags, cas, ttl)} for keys 0..count-1, mg pipelined in
    batches; a miss is absent from the result."""
    got = {}
    for start in range(0, count, BATCH):
        end = min(count, start + BATCH)
        c.send("".join("mg %s k v f c t\r\n" % key_of(i, prefix) for i in range(start, end)) + "mn\r\n")
        data = c.until(b"MN\r\n", 30)
        lines = data.split(b"\r\n")
        j = 0
        while j < len(lines):
            head = lines[j].split(b" ")
            if head[0] == b"VA" and j + 1 < len(lines):
                fl = {tok[:1]: tok[1:] for tok in head[2:]}
                got[fl[b"k"].decode()] = (lines[j + 1], int(fl[b"f"]), int(fl[b"c"]), int(fl[b"t"]))
                j += 2
            else:
                j += 1
    return got


# a restart loads every saved item before it listens: a loaded machine (or a
# sanitizer build) needs far longer than the usual 10 s for 1,200,000 items
RESTART_WAIT = 120


def server_args(*extra):
    return ("-m", "256", "-A", "-e", mem) + extra


def restart_log_line(srv):
    return [ln for ln in srv.log_text().splitlines() if "[restart]" in ln]


def wait_gone(srv, what):
    if not t.ok(srv.wait_exit(120), "%s: the server exits" % what):
        srv.diag_hung()
        srv.proc.kill()
        srv.wait_exit(5)
    t.is_(srv.proc.returncode, 0, "%s: exit status 0" % what)
    srv.check_log(what)


# ---- 1,000,000 items across "shutdown graceful" -------------------------------
srv = start_server(t, *server_args(), start_timeout=RESTART_WAIT)
c = srv.connect(120)  # a loaded sanitizer build takes its time
t0 = time.time()
t.ok(fill(c, ITEMS, time.time()), "1,000,000 sets processed")
before = read_all(c, ITEMS)
t.is_(len(before), ITEMS, "every item reads back before the restart")
t.is_(c.stats().get("curr_items"), str(ITEMS), "curr_items before the restart")
# more items stored just before the stop, while the server still sorts the
# new ones into its LRU segments: every one must be saved too
LATE = 200000
t.ok(fill(c, LATE, time.time(), "late"), "200,000 more sets processed")
c.send("shutdown graceful\r\n")
wait_gone(srv, "shutdown graceful")
t.ok(os.path.exists(meta), "the metadata file exists after the graceful stop")
time.sleep(1.1)  # memcached only trusts a stop at least one second old
stopped = time.time()
srv = start_server(t, *server_args(), start_timeout=RESTART_WAIT)
c = srv.connect(120)  # a loaded sanitizer build takes its time
after = read_all(c, ITEMS)
elapsed = time.time() - t0
t.is_(len(after), ITEMS, "every item is there after the restart")
bad = {"value": 0, "flags": 0, "cas": 0, "ttl": 0}
for k, (v, f, cas, ttl) in before.items():
    a = after.get(k)
    if a is None:
        continue
    bad["value"] += a[0] != v
    bad["flags"] += a[1] != f
    bad["cas"] += a[2] != cas
    # remaining TTL: unchanged for none (-1), otherwise it went down by the
    # time that passed, no more
    bad["ttl"] += (a[3] != -1) if ttl == -1 else not (ttl - elapsed - 2 <= a[3] <= ttl)
for what, n in bad.items():
    t.is_(n, 0, "%s of every item unchanged across the restart" % what)
t.ok(sum(1 for x in after.values() if x[3] != -1) > ITEMS // 10, "items with a TTL kept it")
late = read_all(c, LATE, "late")
t.is_(len(late), LATE, "every item stored just before the stop is there")
t.is_(sum(1 for i in range(LATE) if late.get(key_of(i, "late"), (b"", 0))[:2] != (value_of(i).encode(), flags_of(i))), 0,
      "with its value and flags")
# curr_items is one counter changed at link and unlink: right at once,
# also while the maintainer sorts the 1,200,000 restored items
st = c.stats()
if not t.is_(st.get("curr_items"), str(ITEMS + LATE), "curr_items after the restart"):
    for ln in restart_log_line(srv):  # what the restart saved and loaded
        t.diag(ln)
    t.diag("curr_connections %s, total_items %s" % (st.get("curr_connections"), st.get("total_items")))
t.ok(not os.path.exists(meta), "the metadata file is used once (removed at start)")
# a new store continues above the restored CAS uniques
c.send("ms wr:new 1 c\r\nx\r\n")
line = c.line()
m = re.match(rb"HD c(\d+)", line)
t.ok(m and int(m.group(1)) > max(x[2] for x in before.values()), "a new CAS is above every restored one")
before = after = None

# ---- SIGUSR1; expiry while stopped; SIGTERM does not save ----------------------
c.send("flush_all\r\n")
c.line()
c.send("set short 5 2 2\r\nsh\r\nset long 6 100 2\r\nlo\r\nset forever 7 0 4\r\nfour\r\n")
big = bytes((i * 31) % 251 for i in range(700000))  # chunked: above slab_chunk_max
mid = bytes((i * 17) % 253 for i in range(100000))
c.send(b"set big 8 0 %d\r\n%s\r\nset mid 9 0 %d\r\n%s\r\n" % (len(big), big, len(mid), mid))
for _ in range(5):
    c.line()
os.kill(srv.pid, signal.SIGUSR1)
wait_gone(srv, "SIGUSR1")
time.sleep(3.1)
srv = start_server(t, *server_args(), start_timeout=RESTART_WAIT)
c = srv.connect()
c.is_reply(t, "get short\r\n", "END\r\n", "an item whose TTL ended while stopped is gone")
c.is_reply(t, "get long forever\r\n", "VALUE long 6 2\r\nlo\r\nVALUE forever 7 4\r\nfour\r\nEND\r\n",
           "SIGUSR1 saved the items (flags kept)")
c.is_reply(t, "get big mid\r\n", b"VALUE big 8 %d\r\n%s\r\nVALUE mid 9 %d\r\n%s\r\nEND\r\n" % (len(big), big, len(mid), mid),
           "a chunked 700,000-byte value and a 100,000-byte one, byte-exact")
srv.stop()  # SIGTERM: no save
srv = start_server(t, *server_args(), start_timeout=RESTART_WAIT)
c = srv.connect()
c.is_reply(t, "get forever\r\n", "END\r\n", "after SIGTERM the cache starts empty")
t.ok(any("no metadata" in ln for ln in restart_log_line(srv)), "and the log says there was no metadata")


def stop_saved(srv, c):
    c.send("set kept 0 0 4\r\nkept\r\n")
    t.is_(c.line(), b"STORED\r\n", "stored before a graceful stop")
    os.kill(srv.pid, signal.SIGUSR1)
    wait_gone(srv, "SIGUSR1")
    time.sleep(1.1)


# ---- a changed -m ---------------------------------------------------------------
stop_saved(srv, c)
srv = start_server(t, *server_args("-m", "200"), start_timeout=RESTART_WAIT)
c = srv.connect()
c.is_reply(t, "get kept\r\n", "END\r\n", "a restart with another -m starts empty")
t.ok(any(re.search(r"restart incompatible due to setting for \[maxbytes\]", ln) for ln in restart_log_line(srv)),
     "and logs that maxbytes changed")
srv.stop()

# ---- damaged metadata ------------------------------------------------------------
def saved_then(edit, name):
    """Saves one item, edits the metadata text, starts again: (server, conn)."""
    s = start_server(t, *server_args(), start_timeout=RESTART_WAIT)
    stop_saved(s, s.connect())
    with open(meta) as f:
        text = f.read()
    with open(meta, "w") as f:
        f.write(edit(text))
    s = start_server(t, *server_args(), start_timeout=RESTART_WAIT)
    cc = s.connect()
    cc.is_reply(t, "get kept\r\n", "END\r\n", "%s: starts empty" % name)
    t.ok(restart_log_line(s), "%s: a [restart] line in the log" % name)
    t.ok(s.alive(), "%s: still running" % name)
    cc.is_reply(t, "set x 0 0 1\r\ny\r\nget x\r\n", "STORED\r\nVALUE x 0 1\r\ny\r\nEND\r\n", "%s: serves" % name)
    s.stop()


saved_then(lambda text: "\n".join(text.splitlines()[:3]) + "\n", "truncated metadata")
saved_then(lambda text: re.sub(r"(\w*time\w*) (\d+)", r"\1 x\2z", text, count=1), "garbled metadata value")

# an empty metadata file: memcached 1.6.18 refuses to start (its t/restart.t)
open(meta, "w").close()
srv2 = None
try:
    srv2 = start_server(t, *server_args(), start_timeout=RESTART_WAIT)
except RuntimeError:
    pass
t.ok(srv2 is None, "an empty metadata file: the server does not start")
if srv2 is not None:
    srv2.stop()
os.unlink(meta)

# a memory file that cannot be created: no start (memcached aborts, we exit 1)
srv2 = None
try:
    srv2 = start_server(t, "-m", "64", "-e", os.path.join(work, "no-such-dir", "cache"))
except RuntimeError as e:
    if target() == "ours":
        t.ok("cannot open the memory file" in str(e), "an unusable memory file: the reason is logged")
t.ok(srv2 is None, "an unusable memory file: the server does not start")
if srv2 is not None:
    srv2.stop()

# ---- ours: a damaged memory file ------------------------------------------------------
if target() == "ours":
    srv = start_server(t, *server_args(), start_timeout=RESTART_WAIT)
    stop_saved(srv, srv.connect())
    with open(mem, "r+b") as f:
        f.seek(40)
        b = f.read(1)
        f.seek(40)
        f.write(bytes([b[0] ^ 0x55]))
    srv = start_server(t, *server_args(), start_timeout=RESTART_WAIT)
    c = srv.connect()
    c.is_reply(t, "get kept\r\n", "END\r\n", "a damaged memory file: starts empty")
    t.ok(any("damaged" in ln for ln in restart_log_line(srv)), "and the log says it is damaged")
    srv.stop()
    # empty metadata: a clean exit with a message, not a crash
    open(meta, "w").close()
    srv = None
    try:
        srv = start_server(t, *server_args(), start_timeout=RESTART_WAIT)
    except RuntimeError as e:
        t.ok("corrupt metadata file" in str(e), "empty metadata: the reason is logged")
    if srv is not None:
        srv.stop()

shutil.rmtree(work, ignore_errors=True)
t.done()
