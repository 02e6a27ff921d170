#!/usr/bin/python3
# t/meta/fetched.t: which meta commands count as a fetch, as memcached
# 1.6.18 decides it: me, mg u, ma (t and T), md I and ms I over a newer cas
# leave the item unfetched; mg h and l report the item as it was before the
# lookup. me ends with cls= and size= (memcached's item size), the same
# values lru_crawler metadump prints.
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mcconn import Conn  # noqa: E402
from mctest import TAP, start_server  # noqa: E402

t = TAP()
srv = start_server(t, "-m", "64")
c = Conn(srv.port)


def me(key):
    m = re.match(r"ME (\S+) exp=(-?\d+) la=(\d+) cas=(\d+) fetch=(yes|no) cls=(\d+) size=(\d+)$",
                 c.cmd("me " + key))
    return m.groups() if m else None


t.is_(c.cmd("set k 0 0 5\r\nhello"), "STORED", "set k")
first = me("k")
t.ok(first is not None, "me: ... fetch= cls=<n> size=<n> at the end of the line")
t.is_(first and first[4], "no", "me: unfetched after a set")
t.is_(first and first[6], "65", "size= is memcached's item size (48 + cas 8 + key 2 + value 7)")
t.is_(me("k")[4], "no", "a second me: still unfetched (me is no fetch)")
t.is_(c.cmd("mg k h"), "HD h0", "mg h after me: h0")
t.is_(c.cmd("mg k h"), "HD h1", "mg h after mg: h1")
t.is_(me("k")[4], "yes", "me after mg: fetch=yes")

t.is_(c.cmd("set f 5 0 10\r\n0123456789"), "STORED", "set f with flags 5")
dump = {}
raw = b""
# metadump lines end in "\n" only; BUSY while a crawl runs; memcached's
# crawler can miss an item moving between its LRUs: then dump again
for _ in range(50):
    c.send("lru_crawler metadump all\r\n")
    raw = b""
    deadline = time.time() + 5
    while not raw.endswith(b"END\r\n") and not raw.startswith(b"BUSY") and time.time() < deadline:
        raw += c.silent(0.1)
    if not raw.startswith(b"BUSY") and re.search(rb"^key=f ", raw, re.M):
        break
    time.sleep(0.1)
for line in raw.decode("latin-1").split("\n"):
    m = re.match(r"key=(\S+) .* cls=(\d+) size=(\d+)", line)
    if m:
        dump[m.group(1)] = (m.group(2), m.group(3))
mf = me("f")
t.is_(dump.get("f"), (mf[5], mf[6]) if mf else None, "metadump's cls= and size= match me's")
t.is_(mf and mf[6], "74", "non-zero flags count in the size (48 + 8 + 2 + 12 + 4 bytes)")

# mg u: no fetch, no LRU bump
t.is_(c.cmd("set u 0 0 1\r\nx"), "STORED", "set u")
c.send("mg u u v h\r\n")
t.is_(c.reply(), ("VA 1 h0", b"x"), "mg u v h: the value, h0")
t.is_(c.cmd("mg u u h"), "HD h0", "mg u after mg u: still h0")
t.is_(me("u")[4], "no", "me after mg u: fetch=no")
m = re.match(r"HD t(\d+)$", c.cmd("mg u u T100 t"))
t.ok(m and 99 <= int(m.group(1)) <= 100, "mg u T100 t: the new TTL")
mu = me("u")
t.ok(mu and mu[4] == "no" and -100 <= int(mu[1]) <= -99, "mg u T: TTL set, still unfetched")
t.is_(c.cmd("mg u h"), "HD h0", "mg without u: h0 (the state before it)")
t.is_(me("u")[4], "yes", "then fetched")

# ma: no fetch, with t and T too
t.is_(c.cmd("set n 0 0 1\r\n5"), "STORED", "set n")
t.is_(c.cmd("ma n"), "HD", "ma n")
t.is_(c.cmd("ma n t"), "HD t-1", "ma n t")
m = re.match(r"HD t(\d+)$", c.cmd("ma n T100 t"))
t.ok(m and 99 <= int(m.group(1)) <= 100, "ma n T100 t")
mn = me("n")
t.ok(mn and mn[4] == "no" and -100 <= int(mn[1]) <= -99, "after ma, ma t, ma T: unfetched, TTL 100")
t.is_(c.cmd("mg n v h"), "VA 1 h0", "mg after ma: h0")
c.line()

# ms I with an older cas stores a stale item with the old TTL, unfetched
t.is_(c.cmd("set s 0 100 1\r\na"), "STORED", "set s with TTL 100")
old_cas = me("s")[3]
t.is_(c.cmd("set s 0 100 1\r\nb"), "STORED", "set s again (newer cas)")
t.is_(c.cmd("ms s 1 I C%s T0\r\nc" % old_cas), "HD", "ms I with the older cas: stored stale")
ms_ = me("s")
t.ok(ms_ and ms_[4] == "no" and -100 <= int(ms_[1]) <= -98,
     "the stale item keeps the old TTL and is unfetched")
t.is_(c.cmd("mg s h"), "HD h0 X W", "mg h on it: h0, stale, wins")

# md I keeps the item's fetched state unchanged by its lookup
t.is_(c.cmd("set d 0 0 1\r\nd"), "STORED", "set d")
t.is_(c.cmd("md d I"), "HD", "md d I")
t.is_(me("d")[4], "no", "md I is no fetch")
t.is_(c.cmd("set df 0 0 1\r\nd"), "STORED", "set df")
t.is_(c.cmd("mg df"), "HD", "fetch df")
t.is_(c.cmd("md df I T30"), "HD", "md df I on a fetched item")
t.is_(c.cmd("mg df h"), "HD h1 X W", "its fetched mark survives md I (h1), stale, wins")

# md I marks the item in place: its access time stays, and it counts as no
# store in its class's counters
t.is_(c.cmd("set dl 0 0 1\r\nd"), "STORED", "set dl")
time.sleep(2.5)
before = c.stats("slabs")
cls = me("dl")[5]
t.is_(c.cmd("md dl I"), "HD", "md dl I two seconds later")
after = c.stats("slabs")
m = re.fullmatch(r"HD l(\d+) X W", c.cmd("mg dl l"))
t.ok(m and 1 <= int(m.group(1)) <= 5, "md I keeps the access time (not l0)")
for name in ("cmd_set", "cas_hits"):
    key = "%s:%s" % (cls, name)
    t.is_(after.get(key), before.get(key), "md I moves no %s in stats slabs" % name)

# mg l: seconds since the last access, before this lookup's own bump. The
# bounds follow the time that really passed (a loaded host may stretch the
# sleep), one second either side for the clocks' whole-second steps.
t.is_(c.cmd("set l 0 0 1\r\nl"), "STORED", "set l")
set_at = time.time()
time.sleep(2.2)


def idle_ok(reply):
    m = re.match(r"HD l(\d+)$", reply)
    passed = time.time() - set_at
    return m and max(1, int(passed) - 1) <= int(m.group(1)) <= int(passed) + 1, passed


got = c.cmd("mg l l")
ok, passed = idle_ok(got)
t.ok(ok, "mg l after 2 s idle: l2 (got %r, %.1f s passed)" % (got, passed))
got = c.cmd("mg l l")
ok, passed = idle_ok(got)
t.ok(ok, "again: a first fetch only marks the item fetched, the access time stays "
     "(got %r, %.1f s passed)" % (got, passed))

srv.stop()
t.done()
