#!/usr/bin/env python3
# t/proto/curr_items_moves.t: curr_items (and "stats items" number summed
# over the classes) counts every stored item exactly once, also while the
# LRU maintainer moves items between the HOT, WARM and COLD segments, and
# it follows every store, delete, expiry, flush, eviction and chunked item:
# after each, it equals the number of keys that read back; so with values
# moved to flash (-o ext_path) and read back into RAM. memcached sums
# "stats items" number over its LRU lists, so there an item being moved
# may count twice or not at all for a moment (doc/compatibility.md): its
# per-class sums are only compared once they hold still.
import os
import tempfile
import threading
import time

from mctest import TAP, start_server, target

t = TAP()
PER_CLASS_EXACT = target() != "memcached"
ITEMS = 60000
CHURN_SECONDS = 6.0  # bounded: reads and stats loops stop after this
BATCH = 200


def key_of(i, prefix="k"):
    return "%s%06d" % (prefix, i)


def store(c, keys, value, ttl=0):
    for at in range(0, len(keys), BATCH):
        c.send("".join("set %s 0 %d %d noreply\r\n%s\r\n" % (k, ttl, len(value), value)
                       for k in keys[at:at + BATCH]))
    c.send("mn\r\n")
    return c.line(60) == b"MN\r\n"


def readable(c, keys, batch=BATCH):
    """How many of keys a get returns (a get also unlinks an expired or
    flushed item it meets, in both servers)."""
    found = 0
    for at in range(0, len(keys), batch):
        c.send("get %s\r\n" % " ".join(keys[at:at + batch]))
        found += c.until(b"END\r\n", 30).count(b"VALUE ")
    return found


def counted(c):
    """curr_items of "stats" and "stats items" number summed over classes."""
    items = c.stats("items")
    per_class = sum(int(v) for k, v in items.items() if k.endswith(":number"))
    return int(c.stats().get("curr_items", -1)), per_class


def moves(c):
    st = c.stats()
    return sum(int(st.get(k, 0)) for k in ("moves_to_cold", "moves_to_warm", "moves_within_lru"))


def check_count(c, want, what):
    total, per_class = counted(c)
    end = time.time() + 5
    while not PER_CLASS_EXACT and per_class != want and time.time() < end:
        time.sleep(0.1)
        per_class = counted(c)[1]
    t.is_(total, want, "%s: curr_items" % what)
    t.is_(per_class, want, "%s: stats items number summed over the classes" % what)


# ---- curr_items while the maintainer moves items ------------------------------
srv = start_server(t, "-m", "64")
c = srv.connect(60)
keys = [key_of(i) for i in range(ITEMS)]
t.ok(store(c, keys, "v" * 20), "%d items stored" % ITEMS)

# another client reads every key, again and again: each read twice becomes
# active, so COLD items move to WARM and WARM's overflow to COLD meanwhile
stop = threading.Event()
reads = [0]


def churn():
    r = srv.connect(30)
    end = time.time() + CHURN_SECONDS
    while not stop.is_set() and time.time() < end:
        for at in range(0, ITEMS, BATCH):
            if stop.is_set() or time.time() >= end:
                break
            r.send("get %s\r\n" % " ".join(keys[at:at + BATCH]))
            reads[0] += r.until(b"END\r\n", 30).count(b"VALUE ")
    r.close()


moves_before = moves(c)
reader = threading.Thread(target=churn)
reader.start()
samples, wrong_total, wrong_class, seen = 0, 0, 0, set()
end = time.time() + CHURN_SECONDS
while time.time() < end and samples < 20000:
    total, per_class = counted(c)
    samples += 1
    wrong_total += total != ITEMS
    wrong_class += per_class != ITEMS
    if total != ITEMS or per_class != ITEMS:
        seen.add((total, per_class))
stop.set()
reader.join(CHURN_SECONDS + 30)
t.ok(not reader.is_alive(), "the reading client finished")
moved = moves(c) - moves_before
t.ok(moved > 0, "the maintainer moved items meanwhile (%d moves, %d reads)" % (moved, reads[0]))
t.ok(samples > 50, "stats read %d times meanwhile" % samples)
t.is_(wrong_total, 0, "curr_items was %d every time" % ITEMS)
if PER_CLASS_EXACT:
    t.is_(wrong_class, 0, "stats items number summed to %d every time" % ITEMS)
else:
    t.diag("stats items number summed to another count in %d of %d reads" % (wrong_class, samples))
if seen:
    t.diag("counts seen (curr_items, summed number): %s" % sorted(seen)[:10])

# ---- every store and removal ------------------------------------------------------
n = ITEMS
c.is_reply(t, "add k000001 0 0 1\r\nx\r\n", "NOT_STORED\r\n", "add over an existing key")
c.is_reply(t, "replace k000002 0 0 3\r\nrep\r\n", "STORED\r\n", "replace")
c.is_reply(t, "append k000003 0 0 4\r\nmore\r\n", "STORED\r\n", "append")
c.is_reply(t, "prepend k000004 0 0 4\r\nmore\r\n", "STORED\r\n", "prepend")
c.send("gets k000005\r\n")
cas = c.until(b"END\r\n").split(b"\r\n")[0].split(b" ")[-1].decode()
c.is_reply(t, "cas k000005 0 0 3 %s\r\ncas\r\n" % cas, "STORED\r\n", "cas")
c.is_reply(t, "set num 0 0 1\r\n9\r\nincr num 1\r\n", "STORED\r\n10\r\n", "a new number, incr growing it")
n += 1
c.is_reply(t, "touch k000006 100\r\n", "TOUCHED\r\n", "touch")
check_count(c, n, "after add, replace, append, prepend, cas, incr, touch")

big = "B" * 700000  # above slab_chunk_max: a chunked item
c.is_reply(t, "set big1 0 0 %d\r\n%s\r\n" % (len(big), big), "STORED\r\n", "a chunked item")
c.is_reply(t, "set big2 0 0 %d\r\n%s\r\n" % (len(big), big), "STORED\r\n", "another")
c.is_reply(t, "set big1 0 0 3\r\nsml\r\n", "STORED\r\n", "a small value over a chunked one")
c.is_reply(t, "set k000007 0 0 %d\r\n%s\r\n" % (len(big), big), "STORED\r\n",
           "a chunked value over a small one")
c.is_reply(t, "append big2 0 0 5\r\nextra\r\n", "STORED\r\n", "append to a chunked item")
n += 2
check_count(c, n, "after chunked stores")
c.is_reply(t, "delete big2\r\n", "DELETED\r\n", "a chunked item deleted")
n -= 1
deleted = keys[:1000]
c.send("".join("delete %s noreply\r\n" % k for k in deleted) + "mn\r\n")
t.is_(c.line(), b"MN\r\n", "1,000 keys deleted")
n -= len(deleted)
check_count(c, n, "after deletes")
t.is_(readable(c, keys + ["num", "big1"]), n, "as many keys read back")

# expiry: the items whose TTL ended are unlinked as they are met (a get
# here, or the crawler) and stop counting
# (3 s: the servers' clock ticks once a second, so a 1 s TTL could end
# within milliseconds of the store, before the count)
short = [key_of(i, "x") for i in range(2000)]
t.ok(store(c, short, "e" * 20, ttl=3), "2,000 items with a 3 s TTL stored")
check_count(c, n + len(short), "with the short-lived items")
time.sleep(4.5)
t.is_(readable(c, short), 0, "none reads back once their TTL ended")
check_count(c, n, "after their expiry")

c.is_reply(t, "flush_all\r\n", "OK\r\n", "flush_all")
t.is_(readable(c, keys + ["num", "big1"]), 0, "nothing reads back after flush_all")
check_count(c, 0, "after flush_all, every key read")
c.close()
srv.stop()

# ---- values moved to flash and back into RAM ------------------------------------
def settled_count(c, keys, what):
    """curr_items against the keys that read back, in a pass with no
    eviction meanwhile (a flash read allocates and may evict)."""
    for _ in range(3):
        before = c.stats().get("evictions")
        found = readable(c, keys, 20)
        if c.stats().get("evictions") == before:
            check_count(c, found, what)
            return found
    t.ok(False, "%s: three read passes, each with evictions" % what)
    return 0


flash_dir = tempfile.mkdtemp(prefix="curr-items-flash.")
flash_file = os.path.join(flash_dir, "flash")
srv = start_server(t, "-m", "32", "-o", "ext_page_size=8,ext_wbuf_size=2,ext_path=%s:256m,"
                   "ext_item_age=0,ext_recache_rate=0" % flash_file)
c = srv.connect(60)
fkeys = [key_of(i, "f") for i in range(5000)]
big_value = "f" * 8000
filled = True
for at in range(0, len(fkeys), 100):  # paced, for the flash writer to keep up
    filled &= store(c, fkeys[at:at + 100], big_value)
    time.sleep(0.02)
t.ok(filled, "5,000 values of 8,000 bytes stored into -m 32")
end = time.time() + 20
while time.time() < end and int(c.stats().get("extstore_objects_written", 0)) < len(fkeys) // 2:
    time.sleep(0.2)
t.ok(int(c.stats().get("extstore_objects_written", 0)) >= len(fkeys) // 2, "most went to flash")
found = settled_count(c, fkeys, "values on flash")
t.ok(found >= len(fkeys) // 2, "%d of them read back" % found)
c.is_reply(t, "extstore recache_rate 1\r\n", "OK\r\n", "extstore recache_rate 1")
recached0 = int(c.stats().get("recache_from_extstore", 0))
for _ in range(4):  # read twice (fetched, then active): back into RAM
    readable(c, fkeys[:300], 20)
    time.sleep(0.1)
c.is_reply(t, "extstore recache_rate 0\r\n", "OK\r\n", "extstore recache_rate 0")
recached = int(c.stats().get("recache_from_extstore", 0)) - recached0
t.ok(recached > 0, "values read twice went back into RAM (%d)" % recached)
settled_count(c, fkeys, "values read back into RAM")
c.close()
srv.stop()
os.unlink(flash_file)
os.rmdir(flash_dir)

# ---- eviction -----------------------------------------------------------------------
srv = start_server(t, "-m", "8")
c = srv.connect(60)
many = [key_of(i, "e") for i in range(16000)]
t.ok(store(c, many, "z" * 1000), "16 MB stored in 8 MB")
st = c.stats()
t.ok(int(st.get("evictions", 0)) > 0, "items were evicted (%s)" % st.get("evictions"))
found = readable(c, many)
t.ok(0 < found < len(many), "%d of %d read back" % (found, len(many)))
check_count(c, found, "after evictions")
c.close()
srv.stop()
t.done()
