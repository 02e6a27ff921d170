#!/usr/bin/python3
# t/meta/ms.t: the meta set command as memcached 1.6.18 answers it: modes
# (M E A P R S), client flags (F), TTL (T), compare-and-swap (C), returned
# cas/key/opaque (c k O), invalidation (I), quiet mode (q), base64 keys (b),
# and the error replies with what happens to the data block after them.
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mcconn import Conn  # noqa: E402
from mctest import TAP, start_server  # noqa: E402

t = TAP()
srv = start_server(t, "-m", "64", "-I", "1m")
c = Conn(srv.port)


def mg(key, flags="v"):
    c.send("mg %s %s\r\n" % (key, flags))
    return c.reply()


t.is_(c.cmd("ms foo 3\r\nbar"), "HD", "ms: HD")
t.is_(mg("foo", "v f t"), ("VA 3 f0 t-1", b"bar"), "stored, flags 0, no expiry")
t.is_(c.cmd("ms foo 5 F123 T100\r\nhello"), "HD", "ms with F and T")
line, data = mg("foo", "v f t")
m = re.fullmatch(r"VA 5 f123 t(\d+)", line)
t.ok(m and 98 <= int(m.group(1)) <= 100 and data == b"hello", "F sets the flags, T the TTL")
t.is_(c.cmd("ms foo 1 F4294967295\r\nx"), "HD", "32-bit flags")
t.is_(mg("foo", "f"), ("HD f4294967295", None), "32-bit flags come back")
t.is_(c.cmd("ms empty 0\r\n"), "HD", "an empty value")
t.is_(mg("empty"), ("VA 0", b""), "the empty value")

m = re.fullmatch(r"HD c(\d+)", c.cmd("ms foo 3 c\r\nabc"))
t.ok(m is not None, "c returns the new cas")
cas = m.group(1) if m else "0"
t.is_(c.cmd("mg foo c"), "HD c" + cas, "the returned cas is the item's")
t.is_(c.cmd("ms foo 3 O42 k c T0\r\nabc").split(" ")[:3], ["HD", "O42", "kfoo"],
      "O and k come back in request order")

# modes
t.is_(c.cmd("ms foo 1 ME\r\nz"), "NS", "ME (add) on an existing key: NS")
t.is_(c.cmd("ms newkey 1 ME\r\nz"), "HD", "ME (add) on a new key: HD")
t.is_(c.cmd("ms newkey 2 MA\r\n12"), "HD", "MA (append)")
t.is_(c.cmd("ms newkey 2 MP\r\nxy"), "HD", "MP (prepend)")
t.is_(mg("newkey"), ("VA 5", b"xyz12"), "append and prepend joined the values")
t.is_(c.cmd("ms nokey 1 MA\r\nz"), "NS", "MA on a missing key: NS")
t.is_(c.cmd("ms nokey 1 MR\r\nz"), "NS", "MR (replace) on a missing key: NS")
t.is_(c.cmd("ms newkey 1 MR\r\nr"), "HD", "MR on an existing key: HD")
t.is_(c.cmd("ms newkey 1 MS\r\ns"), "HD", "MS (set)")
t.is_(mg("newkey"), ("VA 1", b"s"), "MS stored")
t.is_(c.cmd("ms foo 1 MX\r\nz"), "CLIENT_ERROR invalid mode for ms M token", "unknown mode")
t.is_(c.cmd("mn"), "MN", "the data block after a bad mode was swallowed")
t.is_(c.cmd("ms foo 1 MSS\r\nz"), "CLIENT_ERROR incorrect length for M token", "M token too long")
t.is_(c.cmd("mn"), "MN", "swallowed again")

# compare and swap
cas = c.cmd("mg foo c").split(" ")[1][1:]
t.is_(c.cmd("ms foo 3 C%d\r\nbad" % (int(cas) + 1000)), "EX", "C with a wrong cas: EX")
t.is_(c.cmd("ms foo 3 C%s\r\nnew" % cas), "HD", "C with the current cas: HD")
t.is_(mg("foo"), ("VA 3", b"new"), "the cas store took effect")
t.is_(c.cmd("ms foo 3 C%s\r\nold" % cas), "EX", "the old cas no longer matches")
t.is_(c.cmd("ms absent 3 C1\r\nabc"), "NF", "C on a missing key: NF")
cas = c.cmd("mg foo c").split(" ")[1][1:]
t.is_(c.cmd("ms foo 1 MA C%d\r\n!" % (int(cas) + 1)), "EX", "append with a wrong cas: EX")
t.is_(c.cmd("ms foo 1 MA C%s\r\n!" % cas), "HD", "append with the right cas: HD")
t.is_(mg("foo"), ("VA 4", b"new!"), "appended")

# invalidation: an older cas with I stores the value but marks it stale
cas = int(c.cmd("mg foo c").split(" ")[1][1:])
t.is_(c.cmd("ms foo 3 C%d I\r\nold" % (cas + 5)), "EX", "I with a newer cas: EX")
t.is_(c.cmd("ms foo 3 C%d I\r\nold" % (cas - 1)), "HD", "I with an older cas: stored")
line, data = mg("foo", "v")
t.is_((line, data), ("VA 3 X W", b"old"), "the stale item: X, and the first fetch wins (W)")
t.is_(mg("foo", "v")[0], "VA 3 Z X", "next fetch: Z X")
t.is_(c.cmd("ms foo 3\r\nnew"), "HD", "a plain set replaces the stale item")
t.is_(mg("foo", "v"), ("VA 3", b"new"), "no longer stale")

# quiet mode
c.send("ms q1 1 q\r\na\r\nms q2 1 q\r\nb\r\nms q2 1 q ME\r\nc\r\nmn\r\n")
t.is_(c.line(), "NS", "q: NS is still sent")
t.is_(c.line(), "MN", "q: HD is not; mn ends the batch")
t.is_(mg("q1"), ("VA 1", b"a"), "the quiet set stored")

# base64 keys
t.is_(c.cmd("ms Zm9v 2 b k\r\nhi"), "HD kZm9v b", "b k: the key comes back encoded")
t.is_(mg("foo"), ("VA 2", b"hi"), "b stored under the decoded key")
t.is_(c.cmd("ms !!!! 2 b\r\nhi"), "CLIENT_ERROR error decoding key", "undecodable key")
t.is_(c.cmd("mn"), "MN", "its data block was swallowed")

# errors
t.is_(c.cmd("ms foo"), "CLIENT_ERROR bad command line format", "ms without a length")
t.is_(c.cmd("ms"), "ERROR", "ms without a key")
t.is_(c.cmd("ms foo abc\r\nxx"), "CLIENT_ERROR bad command line format", "length not a number")
t.is_(c.line(), "ERROR", "... and the data line is read as a command")
t.is_(c.cmd("ms foo -1"), "CLIENT_ERROR bad command line format", "negative length")
t.is_(c.cmd("ms foo 2 Fx\r\nxx"), "CLIENT_ERROR bad command line format", "bad F")
t.is_(c.cmd("mn"), "MN", "the data block after a bad flag was swallowed")
t.is_(c.cmd("ms foo 2 zz\r\nxx"), "CLIENT_ERROR invalid flag", "unknown flag")
t.is_(c.cmd("mn"), "MN", "swallowed")
t.is_(c.cmd("ms foo 2 O%s\r\nxx" % ("9" * 40)), "CLIENT_ERROR opaque token too long",
      "opaque too long")
t.is_(c.cmd("mn"), "MN", "swallowed")
t.is_(c.cmd("ms foo 3\r\nbazzz"), "CLIENT_ERROR bad data chunk", "data longer than announced")
t.is_(c.line(), "ERROR", "the bytes after the block are read as a command")
t.is_(c.cmd("ms foo 3 q\r\nbazzz"), "CLIENT_ERROR bad data chunk", "bad data chunk despite q")
t.is_(c.line(), "ERROR", "again ERROR")

# numbers read as memcached reads them: any blank may end one, and a
# length or TTL read as a long is kept in 32 bits without a range check
t.is_(c.cmd("ms foo 2\t\r\nhi"), "HD", "a tab after the length")
t.is_(c.cmd("mg foo T30\tv"), "HD", "a tab after T's number (v is then part of that token)")
t.is_(c.cmd("ms foo 4294967298\r\nhi"), "HD", "length 2^32 + 2 is kept as 2, as memcached does")
t.is_(mg("foo"), ("VA 2", b"hi"), "... and 2 bytes were stored")
t.is_(c.cmd("ms foo 2 F4294967297\r\nhi"), "HD", "flags 2^32 + 1")
t.is_(mg("foo", "f v"), ("VA 2 f1", b"hi"), "... kept as 1")

t.is_(c.cmd("ms big 1\r\nx"), "HD", "a small value under big")
c.send("ms big 2000000 T0\r\n")
c.send(b"v" * 2000000 + b"\r\n")
t.is_(c.line(), "SERVER_ERROR object too large for cache", "over -I: too large")
t.is_(c.cmd("mn"), "MN", "the large block was swallowed")
t.is_(c.cmd("mg big"), "EN", "the failed store removed the old value")

st = c.stats()
t.ok(int(st["cmd_set"]) >= 30, "ms counts in cmd_set")
c.close()
srv.stop()
t.done()
