#!/usr/bin/python3
# t/meta/md_ma.t: meta delete (md: C, I with T, q, k, O) and meta arithmetic
# (ma: modes, D delta, N auto-create with J, C, v, t, c, T, q) as memcached
# 1.6.18 answers them, with their error replies.
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mcconn import Conn  # noqa: E402
from mctest import TAP, start_server  # noqa: E402

t = TAP()
srv = start_server(t, "-m", "64")
c = Conn(srv.port)


def mg(key, flags="v"):
    c.send("mg %s %s\r\n" % (key, flags))
    return c.reply()


def cas_of(key):
    return int(c.cmd("mg %s c" % key).split(" ")[1][1:])


# ---- md
t.is_(c.cmd("ms d1 1\r\nx"), "HD", "store d1")
t.is_(c.cmd("md d1"), "HD", "md: HD")
t.is_(c.cmd("mg d1"), "EN", "deleted")
t.is_(c.cmd("md d1"), "NF", "md of a missing key: NF")
t.is_(c.cmd("md d1 O5 k"), "NF O5 kd1", "NF echoes O and k")
t.is_(c.cmd("ms d2 1\r\nx"), "HD", "store d2")
cas = cas_of("d2")
t.is_(c.cmd("md d2 C%d k" % (cas + 1)), "EX kd2", "C with a wrong cas: EX")
t.is_(c.cmd("md d2 C%d O1" % cas), "HD O1", "C with the right cas: HD")
c.send("ms d3 1\r\nx\r\nmd d3 q\r\nmd d3 q\r\nmn\r\n")
t.is_(c.line(), "HD", "store d3")
t.is_(c.line(), "NF", "q: HD hidden, NF still sent")
t.is_(c.line(), "MN", "mn ends the quiet batch")

t.is_(c.cmd("ms st 3 T100\r\nabc"), "HD", "store st with TTL 100")
cas = cas_of("st")
t.is_(c.cmd("md st I T30"), "HD", "md I: invalidate instead of delete")
line, data = mg("st", "v c t")
m = re.fullmatch(r"VA 3 c(\d+) t(\d+) X W", line)
t.ok(m and int(m.group(1)) != cas and 28 <= int(m.group(2)) <= 30 and data == b"abc",
     "stale item: value kept, new cas, TTL from T, X and W for the first fetch")
t.is_(mg("st", "s")[0], "HD s3 Z X", "second fetch: Z X")
t.is_(c.cmd("md st I C1"), "EX", "md I with a wrong cas: EX")
t.is_(c.cmd("md nothere I"), "NF", "md I of a missing key: NF")
t.is_(c.cmd("md st"), "HD", "md removes a stale item")
t.is_(c.cmd("mg st"), "EN", "gone")

t.is_(c.cmd("md"), "ERROR", "md without a key: ERROR")
t.is_(c.cmd("md d1 x"), "CLIENT_ERROR invalid or duplicate flag", "unknown flag")
t.is_(c.cmd("md d1 q q"), "CLIENT_ERROR invalid or duplicate flag", "repeated flag")
t.is_(c.cmd("md d1 O" + "1" * 40), "CLIENT_ERROR opaque token too long", "opaque too long")
t.is_(c.cmd("md d1 " + " ".join("abcdefghijklmnopqrstuvwxy")),
      "CLIENT_ERROR options flags too long", "more than 20 tokens")

# ---- ma
t.is_(c.cmd("ma n"), "NF", "ma of a missing key: NF")
t.is_(c.cmd("ma n O7 k"), "NF O7 kn", "NF echoes O and k")
c.send("ma n N0 J10 v\r\n")
t.is_(c.reply(), ("VA 2", b"10"), "N with J: created with the initial value")
c.send("ma n v\r\n")
t.is_(c.reply(), ("VA 2", b"11"), "default: increment by 1")
c.send("ma n D9 v\r\n")
t.is_(c.reply(), ("VA 2", b"20"), "D9")
c.send("ma n MD D5 v\r\n")
t.is_(c.reply(), ("VA 2", b"15"), "MD: decrement")
c.send("ma n M- D100 v\r\n")
t.is_(c.reply(), ("VA 1", b"0"), "M-: decrement stops at 0")
c.send("ma n M+ D18446744073709551615 v\r\n")
t.is_(c.reply(), ("VA 20", b"18446744073709551615"), "M+: 2^64-1")
c.send("ma n MI v\r\n")
t.is_(c.reply(), ("VA 1", b"0"), "MI: increment wraps at 2^64")
t.is_(c.cmd("ma n"), "HD", "without v: HD")
# memcached 1.6.18 rewrites a shrinking number in place, padded with
# spaces to the old length; only the digits are compared here
line, data = mg("n")
t.is_(data.rstrip(b" "), b"1", "the stored value is the number")

cas = cas_of("n")
t.is_(c.cmd("ma n C%d" % (cas + 1)), "EX", "C with a wrong cas: EX")
m = re.fullmatch(r"HD c(\d+)", c.cmd("ma n C%d c" % cas))
t.ok(m and int(m.group(1)) != cas, "C with the right cas: HD and a new cas (c)")
c.send("ms empty 0\r\n\r\n")
t.is_(c.line(), "HD", "an empty value")
ecas = cas_of("empty")
t.is_(c.cmd("ma empty C%d" % (ecas + 1)),
      "CLIENT_ERROR cannot increment or decrement non-numeric value",
      "C with a wrong cas on an empty value: non-numeric first, as memcached")
t.is_(c.cmd("ma empty C%d" % ecas),
      "CLIENT_ERROR cannot increment or decrement non-numeric value",
      "C with the right cas on an empty value: non-numeric")
# arithmetic on a stale item: memcached rewrites a number that is no longer
# than before in place, keeping the markers; a longer one is a new item
# without them. (key, start, command, its reply, marks after, value after)
for key, start, cmd, answer, marks, after in (
        ("sn", b"5", "ma sn", "HD", " X W", b"6"),
        ("si", b"5", "incr si 1", "6", " X W", b"6"),
        ("sl", b"9", "ma sl", "HD", "", b"10")):
    c.send("ms %s %d\r\n%s\r\n" % (key, len(start), start.decode()))
    t.is_(c.line(), "HD", "%s: a number to invalidate" % key)
    t.is_(c.cmd("md %s I" % key), "HD", "%s: md I marks it stale" % key)
    t.is_(c.cmd(cmd), answer, "%s on the stale number" % cmd)
    c.send("mg %s v\r\n" % key)
    t.is_(c.reply(), ("VA %d%s" % (len(after), marks), after),
          "%s: %s" % (cmd, "in place: still stale, nobody told (X W)" if marks
                      else "a longer number is a new item: no markers"))
t.is_(c.cmd("ma n t"), "HD t-1", "t: no expiry")
m = re.fullmatch(r"HD t(\d+)", c.cmd("ma n T100 t"))
t.ok(m and 98 <= int(m.group(1)) <= 100, "T then t: the new TTL")
m = re.fullmatch(r"HD t(\d+)", c.cmd("mg n t"))
t.ok(m and 98 <= int(m.group(1)) <= 100, "T updated the item's TTL")

c.send("ma m N50 J5 D3 v t\r\n")
line, data = c.reply()
m = re.fullmatch(r"VA 1 t(\d+)", line)
t.ok(m and 48 <= int(m.group(1)) <= 50 and data == b"5",
     "auto-create: initial value J (delta not applied), TTL from N")
m = re.fullmatch(r"HD t(\d+)", c.cmd("ma m2 T0 N50 t"))
t.ok(m and 48 <= int(m.group(1)) <= 50, "auto-create: T then N, the later one sets the TTL")
t.is_(c.cmd("ma m3 t N50"), "HD t-1", "auto-create: t before N shows no TTL yet")
c.send("ma m N50 J5 D3 v\r\n")
t.is_(c.reply(), ("VA 1", b"8"), "existing: delta applied, J ignored")

c.send("ma n q\r\nma q1 q\r\nma q2 q N0 J1\r\nmn\r\n")
t.is_(c.line(), "NF", "q: NF is sent")
t.is_(c.line(), "HD", "q: an auto-created item still answers HD")
t.is_(c.line(), "MN", "q: a plain success is hidden")

t.is_(c.cmd("ms text 3\r\nabc"), "HD", "a non-numeric value")
t.is_(c.cmd("ma text"), "CLIENT_ERROR cannot increment or decrement non-numeric value",
      "ma on a non-numeric value")
t.is_(c.cmd("ma n MX"), "CLIENT_ERROR invalid mode for ma M token", "unknown mode")
t.is_(c.cmd("ma n Dx"), "CLIENT_ERROR invalid or duplicate flag", "bad delta")
t.is_(c.cmd("ma n D"), "CLIENT_ERROR invalid or duplicate flag", "empty delta")
t.is_(c.cmd("ma n Jx N0"), "CLIENT_ERROR invalid or duplicate flag", "bad initial value")
t.is_(c.cmd("ma n v v"), "CLIENT_ERROR invalid or duplicate flag", "repeated flag")
t.is_(c.cmd("ma"), "ERROR", "ma without a key: ERROR")

st = c.stats()
t.ok(int(st["incr_hits"]) > 0 and int(st["decr_hits"]) > 0 and int(st["incr_misses"]) > 0,
     "ma counts in incr_hits, decr_hits and incr_misses")
t.ok(int(st["delete_hits"]) > 0 and int(st["delete_misses"]) > 0,
     "md counts in delete_hits and delete_misses")
c.close()
srv.stop()
t.done()
