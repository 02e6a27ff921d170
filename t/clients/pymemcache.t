#!/usr/bin/python3
# t/clients/pymemcache.t: the real Python client pymemcache (Debian's
# python3-pymemcache) against the server: set/get, get_many, gets/cas,
# incr/decr, delete, add/replace/append/prepend, touch, expiry, flush_all,
# stats, and non-ASCII and binary values.
import time

from pymemcache.client.base import Client

from mctest import TAP, start_server

t = TAP()
srv = start_server(t, "-m", "64")
c = Client(("127.0.0.1", srv.port), connect_timeout=5, timeout=5, default_noreply=False)

t.ok(c.set("greeting", b"hello"), "set returns True")
t.is_(c.get("greeting"), b"hello", "get returns the value")
t.is_(c.get("missing"), None, "get of a missing key returns None")


class FlagsSerde:
    """Stores (bytes, flags) pairs as they are, so the flags can be seen."""

    def serialize(self, key, value):
        return value

    def deserialize(self, key, value, flags):
        return (value, flags)


cf = Client(("127.0.0.1", srv.port), connect_timeout=5, timeout=5, default_noreply=False, serde=FlagsSerde())
t.ok(cf.set("flagged", (b"v", 12345)), "set with flags 12345")
t.is_(cf.get("flagged"), (b"v", 12345), "the flags come back with the value")
t.ok(cf.set("flagged32", (b"w", 4294967295)), "set with 32-bit flags")
t.is_(cf.get("flagged32"), (b"w", 4294967295), "32-bit flags come back")
cf.close()

many = {"k%d" % i: ("value %d" % i).encode() for i in range(50)}
t.is_(c.set_many(many), [], "set_many of 50 keys fails none")
got = c.get_many(list(many) + ["nope1", "nope2"])
t.is_({k.decode() if isinstance(k, bytes) else k: v for k, v in got.items()}, many, "get_many returns the 50 values and leaves out misses")

value, cas = c.gets("greeting")
t.is_(value, b"hello", "gets returns the value")
t.ok(cas is not None and int(cas) > 0, "gets returns a cas token")
t.is_(c.cas("greeting", b"hi", cas), True, "cas with the current token stores")
t.is_(c.get("greeting"), b"hi", "cas stored the new value")
t.is_(c.cas("greeting", b"stale", cas), False, "cas with a stale token is refused (EXISTS)")
t.is_(c.get("greeting"), b"hi", "refused cas left the value alone")
t.is_(c.cas("nosuch", b"x", b"1"), None, "cas on a missing key returns None (NOT_FOUND)")

t.ok(c.set("counter", b"10"), "set a counter")
t.is_(c.incr("counter", 5), 15, "incr returns the new value")
t.is_(c.decr("counter", 3), 12, "decr returns the new value")
t.is_(c.decr("counter", 100), 0, "decr below zero stops at 0")
t.ok(c.set("counter", b"18446744073709551615"), "set 2^64-1")
t.is_(c.incr("counter", 1), 0, "incr wraps at 2^64")
t.is_(c.incr("nosuch", 1), None, "incr of a missing key returns None")
t.ok(c.set("text", b"abc"), "set a non-numeric value")
try:
    c.incr("text", 1)
    t.ok(False, "incr of a non-numeric value raises")
except Exception as e:
    t.ok("non-numeric" in str(e), "incr of a non-numeric value raises the server's CLIENT_ERROR (%s)" % type(e).__name__)

t.is_(c.add("greeting", b"x"), False, "add of an existing key returns False")
t.is_(c.add("fresh", b"new"), True, "add of a new key returns True")
t.is_(c.replace("nosuch", b"x"), False, "replace of a missing key returns False")
t.is_(c.replace("fresh", b"newer"), True, "replace of an existing key returns True")
t.is_(c.append("fresh", b"-tail"), True, "append")
t.is_(c.prepend("fresh", b"head-"), True, "prepend")
t.is_(c.get("fresh"), b"head-newer-tail", "append and prepend joined the data")

t.is_(c.delete("fresh"), True, "delete of an existing key returns True")
t.is_(c.delete("fresh"), False, "delete of a missing key returns False")
t.is_(c.get("fresh"), None, "deleted key is gone")

utf8 = "héllo wörld ✓ 日本語".encode("utf-8")
t.ok(c.set("utf8", utf8), "set a non-ASCII (UTF-8) value")
t.is_(c.get("utf8"), utf8, "non-ASCII value comes back byte for byte")
binary = bytes(range(256)) * 4 + b"\r\nEND\r\n\x00"
t.ok(c.set("binary", binary), "set a binary value with every byte, CR LF and END")
t.is_(c.get("binary"), binary, "binary value comes back byte for byte")
big = bytes((i * 7) % 251 for i in range(900 * 1024))
t.ok(c.set("big", big), "set a 900 KiB value")
t.is_(c.get("big"), big, "900 KiB value comes back whole")

t0 = time.time()
t.ok(c.set("short", b"s", expire=2), "set with a 2 s expiry")
t.ok(c.set("touched", b"t", expire=100), "set with a 100 s expiry")
t.is_(c.touch("touched", 2), True, "touch to 2 s")
t.is_(c.touch("nosuch", 2), False, "touch of a missing key returns False")
t.ok(c.set("long", b"l", expire=100), "set with a 100 s expiry")
if time.time() - t0 > 1.0:  # the server clock ticks in whole seconds
    t.skip(1, "host too slow: %.1f s passed since the 2 s items were stored" % (time.time() - t0))
else:
    t.is_(c.get_many(["short", "touched", "long"]), {"short": b"s", "touched": b"t", "long": b"l"}, "all present before expiry")
time.sleep(3.2)
t.is_(c.get_many(["short", "touched", "long"]), {"long": b"l"}, "after 3 s the 2 s items expired, the other remains")

stats = c.stats()
t.ok(stats.get(b"curr_items", 0) > 0, "stats returns curr_items")
t.ok(stats.get(b"get_hits", 0) > 0 and stats.get(b"cmd_set", 0) > 0, "stats returns counters that moved")
t.ok(len(c.version()) > 0, "version returns a version string")
t.ok(c.flush_all(noreply=False), "flush_all")
t.is_(c.get("long"), None, "flush_all removed everything")

c.close()
srv.stop()
t.done()
