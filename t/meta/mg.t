#!/usr/bin/python3
# t/meta/mg.t: the meta get command as memcached 1.6.18 answers it: hit and
# miss codes, every return flag (v s c f t k h l O b), q, T (touch), N
# (vivify: W then Z), R (recache win), and the documented error replies.
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mcconn import Conn  # noqa: E402
from mctest import TAP, start_server  # noqa: E402

t = TAP()
srv = start_server(t, "-m", "64")
c = Conn(srv.port)

t.is_(c.cmd("set foo 7 0 3\r\nbar"), "STORED", "set foo with flags 7")
c.send("mg foo v\r\n")
t.is_(c.reply(), ("VA 3", b"bar"), "mg v: VA <size> and the value")
t.is_(c.cmd("mg foo"), "HD", "mg without v: HD")
t.is_(c.cmd("mg missing"), "EN", "miss: EN")
t.is_(c.cmd("mg missing v"), "EN", "miss with v: EN")
t.is_(c.cmd("mg missing O77 k v"), "EN O77 kmissing", "miss echoes O and k")

c.send("gets foo\r\n")
cas = c.lines_until("END")[0].split(" ")[4]
t.is_(c.cmd("mg foo s c f k O123"), "HD s3 c%s f7 kfoo O123" % cas,
      "s c f k O come back in request order")
t.is_(c.cmd("mg foo O9 f c s"), "HD O9 f7 c%s s3" % cas, "another order, same values")
t.is_(c.cmd("mg foo t"), "HD t-1", "t: -1 without expiry")

t.is_(c.cmd("set ttl 0 100 1\r\nx"), "STORED", "set with a 100 s TTL")
m = re.fullmatch(r"HD t(\d+)", c.cmd("mg ttl t"))
t.ok(m and 98 <= int(m.group(1)) <= 100, "t: remaining TTL near 100")
m = re.fullmatch(r"HD t(\d+)", c.cmd("mg ttl T500 t"))
t.ok(m and 498 <= int(m.group(1)) <= 500, "T500 then t: the new TTL")
m = re.fullmatch(r"HD t(\d+)", c.cmd("mg ttl t"))
t.ok(m and 498 <= int(m.group(1)) <= 500, "the touched TTL stays")
t.is_(c.cmd("mg nosuch T10"), "EN", "T on a miss: EN")

# hit-before and last access: as before this command
t.is_(c.cmd("set fresh 0 0 1\r\nx"), "STORED", "set fresh")
t.is_(c.cmd("mg fresh h"), "HD h0", "h0 on the first fetch")
t.is_(c.cmd("mg fresh h"), "HD h1", "h1 once fetched before")
m = re.fullmatch(r"HD l(\d+)", c.cmd("mg fresh l"))
t.ok(m and int(m.group(1)) <= 2, "l: seconds since last access, small")

# q: a miss says nothing; mn ends the batch
c.send("mg missing v q\r\nmg foo v q\r\nmg missing2 q k\r\nmn\r\n")
t.is_(c.reply(), ("VA 3", b"bar"), "q: a hit still answers")
t.is_(c.line(), "MN", "q: misses are silent, mn answers MN")
c.send("mg a q\r\nmg b q\r\nmg c q\r\nmn\r\n")
t.is_(c.line(), "MN", "three quiet misses then MN: nothing in between")

# base64 keys
t.is_(c.cmd("ms Zm9vYg== 2 b\r\nhi"), "HD", "ms with a base64 key (b)")
c.send("mg foob v\r\n")
t.is_(c.reply(), ("VA 2", b"hi"), "the decoded key holds the value")
c.send("mg Zm9vYg== b k v\r\n")
t.is_(c.reply(), ("VA 2 kZm9vYg== b", b"hi"), "b k: the key comes back encoded, with b")
t.is_(c.cmd("mg foob k"), "HD kZm9vYg== b", "k of an item stored with b is encoded")
t.is_(c.cmd("mg bm9uZQ== b k"), "EN kbm9uZQ== b", "miss with b k")
t.is_(c.cmd("mg foo b"), "CLIENT_ERROR error decoding key", "undecodable key")
# memcached's decoder skips what is not base64 and stops after the first
# group that ends in '='
t.is_(c.cmd("ms YmF6\x11 3 b\r\nbar"), "HD", "a character outside base64 in a b key is skipped")
c.send("mg YmF6 b v k\r\n")
t.is_(c.reply(), ("VA 3 kYmF6 b", b"bar"), "... the item is under the decoded key")
c.send("mg Zm9vYg==Zm9v b v\r\n")
t.is_(c.reply(), ("VA 2", b"hi"), "decoding ends after a group with '='")
t.is_(c.cmd("mg Zm=v b v"), "EN", "'=' inside a group shortens it: a miss, not an error")
t.is_(c.cmd("mg Z*m*9*v b"), "HD", "'*' between the digits is skipped")
t.is_(c.cmd("mg Zm9vY b"), "CLIENT_ERROR error decoding key", "digits not in groups of four")
t.is_(c.cmd("mg Z=== b"), "CLIENT_ERROR error decoding key", "three '=' in a group")

# vivify on miss (N) and recache (R)
c.send("mg viv N30 s c v t\r\n")
line, data = c.reply()
m = re.fullmatch(r"VA 0 s0 c(\d+) t(\d+) W", line)
t.ok(m and 28 <= int(m.group(2)) <= 30, "N on a miss: empty item, TTL from N, W (won)")
t.is_(data, b"", "the vivified item is empty")
t.is_(c.cmd("mg viv N30"), "HD Z", "next N: Z (a token was already sent), no W")
t.is_(c.cmd("mg viv"), "HD Z", "plain mg of a vivified item: Z")
t.is_(c.cmd("ms viv 3\r\nnew"), "HD", "recache with ms")
t.is_(c.cmd("mg viv N30"), "HD", "after the recache: no W, no Z")

# flags that change the TTL apply in token order
t.is_(c.cmd("mg viv2 t N30"), "HD t-1 W", "t before N: the new item has no TTL yet")
m = re.fullmatch(r"HD t(\d+) Z", c.cmd("mg viv2 t"))
t.ok(m and 28 <= int(m.group(1)) <= 30, "then N gave it 30 s (and Z: the win was sent)")
t.is_(c.cmd("set tt 0 100 1\r\nx"), "STORED", "set with TTL 100")
m = re.fullmatch(r"HD t(\d+) t?", c.cmd("mg tt t T500") + " ")
t.ok(m and 98 <= int(m.group(1)) <= 100, "t before T shows the old TTL")
m = re.fullmatch(r"HD t(\d+)", c.cmd("mg tt t"))
t.ok(m and 498 <= int(m.group(1)) <= 500, "and T set the new one")

t.is_(c.cmd("set rc 0 100 1\r\nx"), "STORED", "set with TTL 100")
t.is_(c.cmd("mg rc R30"), "HD", "R30 with 100 s left: no win")
t.is_(c.cmd("mg rc R200"), "HD W", "R200 with 100 s left: W")
t.is_(c.cmd("mg rc R200"), "HD Z", "again: Z, the win went to someone else")
t.is_(c.cmd("mg foo R200"), "HD", "R never wins for an item without expiry")

# errors
t.is_(c.cmd("mg"), "ERROR", "mg without a key: ERROR")
t.is_(c.cmd("mg foo x"), "CLIENT_ERROR invalid flag", "unknown flag")
t.is_(c.cmd("mg foo v v"), "CLIENT_ERROR duplicate flag", "repeated flag")
t.is_(c.cmd("mg foo O" + "1" * 32), "CLIENT_ERROR opaque token too long", "O with 32 digits")
t.is_(c.cmd("mg foo O" + "1" * 31), "HD O" + "1" * 31, "O with 31 digits is fine")
t.is_(c.cmd("mg foo N"), "CLIENT_ERROR bad token in command line format", "N without a number")
t.is_(c.cmd("mg foo Tx"), "CLIENT_ERROR bad token in command line format", "T not a number")
t.is_(c.cmd("mg " + "k" * 251 + " v"), "CLIENT_ERROR bad command line format", "key over 250 bytes")
t.is_(c.cmd("mg foo " + " ".join("s" * 18)), "CLIENT_ERROR options flags are too long",
      "more than 20 tokens")
c.send("mg foo c q\r\nmg missing q\r\nmg foo x q\r\nmn\r\n")
t.is_(c.line(), "HD c%s" % cas, "q batch: the hit")
t.is_(c.line(), "CLIENT_ERROR invalid flag", "q batch: errors are always sent")
t.is_(c.line(), "MN", "q batch: MN")
t.is_(c.cmd("mg  foo   s"), "HD s3", "extra spaces between tokens")

st = c.stats()
t.ok(int(st["cmd_get"]) > 0 and int(st["get_hits"]) > 0 and int(st["get_misses"]) > 0,
     "mg counts in cmd_get, get_hits and get_misses")
c.close()
srv.stop()
t.done()
