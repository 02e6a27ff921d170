#!/usr/bin/python3
# t/meta/me_mn.t: meta debug (me) and meta no-op (mn) as memcached 1.6.18
# answers them, pipelines of meta and classic commands answered in order,
# meta lines split across TCP segments, and cmd_meta counting.
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

t.is_(c.cmd("mn"), "MN", "mn: MN")
t.is_(c.cmd("mn extra tokens"), "MN", "mn ignores anything after it")
t.is_(c.cmd("mx foo"), "ERROR", "an unknown two-letter m command: ERROR")

before = int(c.stats()["cmd_meta"])
t.is_(c.cmd("me nope"), "EN", "me of a missing key: EN")
t.is_(c.cmd("set dbg 0 0 5\r\nhello"), "STORED", "set dbg")
line = c.cmd("me dbg")
m = re.match(r"ME dbg exp=-1 la=(\d+) cas=(\d+) fetch=(yes|no)( |$)", line)
t.ok(m is not None, "me: ME <key> exp= la= cas= fetch= (got %r)" % line)
t.ok(m and m.group(3) == "no", "fetch=no before any fetch")
cas = c.cmd("mg dbg c").split(" ")[1][1:]
m = re.match(r"ME dbg exp=-1 la=\d+ cas=(\d+) fetch=(yes|no)", c.cmd("me dbg"))
t.ok(m and m.group(1) == cas, "me shows the item's cas")
t.ok(m and m.group(2) == "yes", "fetch=yes after a fetch")
t.is_(c.cmd("set ttl 0 100 1\r\nx"), "STORED", "set ttl with TTL 100")
m = re.match(r"ME ttl exp=(-?\d+) ", c.cmd("me ttl"))
t.ok(m and -100 <= int(m.group(1)) <= -98, "exp is now minus the expiry time (negative)")
t.is_(c.cmd("set Zm9v 0 0 1\r\nx"), "STORED", "set a key that is valid base64")
t.ok(c.cmd("me Zm9v b").startswith("EN"), "me b decodes the key (no item 'foo')")
t.is_(c.cmd("set foo 0 0 1\r\ny"), "STORED", "set foo")
t.ok(c.cmd("me Zm9v b").startswith("ME foo "), "me b finds foo and prints the key as stored")
t.is_(c.cmd("ms YmluYXJ5 1 b\r\nz"), "HD", "ms with a base64 key")
t.ok(c.cmd("me YmluYXJ5 b").startswith("ME YmluYXJ5 "), "a key stored base64-encoded prints encoded")
t.ok(c.cmd("me Ym*luYXJ5 b").startswith("ME YmluYXJ5 "), "a character outside base64 is skipped")
t.is_(c.cmd("me Zm=v b"), "EN", "'=' inside a group: a miss, not an error")
t.is_(c.cmd("me"), "CLIENT_ERROR bad command line format", "me without a key")
after = int(c.stats()["cmd_meta"])
t.is_(after - before, 9, "cmd_meta counts me commands with a key (9 sent)")

# a pipeline of meta and classic commands is answered in order
c.send("mg dbg v\r\nget dbg\r\nms p 1\r\nz\r\nmn\r\nmg p s\r\nincr nope 1\r\nmn\r\n")
t.is_(c.reply(), ("VA 5", b"hello"), "pipeline 1: mg")
t.is_(c.lines_until("END"), ["VALUE dbg 0 5", "hello", "END"], "pipeline 2: get")
t.is_(c.line(), "HD", "pipeline 3: ms")
t.is_(c.line(), "MN", "pipeline 4: mn")
t.is_(c.line(), "HD s1", "pipeline 5: mg")
t.is_(c.line(), "NOT_FOUND", "pipeline 6: incr")
t.is_(c.line(), "MN", "pipeline 7: mn")

# a meta command and its data block split into small pieces
for piece in (b"m", b"s sp", b"lit 1", b"0 T0 c", b"\r", b"\n0123", b"45678", b"9\r", b"\n"):
    c.send(piece)
    time.sleep(0.02)
t.ok(re.fullmatch(r"HD c\d+", c.line()) is not None, "ms split over nine writes")
c.send("mg split v\r\n")
t.is_(c.reply(), ("VA 10", b"0123456789"), "the split value arrived whole")

# many quiet misses then mn: nothing but MN
c.send("".join("mg miss%d v q\r\n" % i for i in range(200)) + "mn\r\n")
t.is_(c.line(), "MN", "200 quiet misses answer nothing before MN")
c.close()
srv.stop()
t.done()
