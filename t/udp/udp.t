#!/usr/bin/python3
# t/udp/udp.t: the UDP transport (-U) as memcached 1.6.18 serves it, over a
# raw UDP socket: the 8-byte frame header (request id echoed, sequence
# number, datagram count, reserved 0), text and meta commands, a reply
# spread over several datagrams of at most 1400 bytes, one reply message
# per command, requests from several ids interleaved, binary requests, and
# datagrams the server ignores (too short, announcing several datagrams,
# incomplete).
import struct

from mctest import TAP
from udp_fixture import start_udp_server

t = TAP()
srv, c, u, uport = start_udp_server(t)

t.is_(c.stats("settings")["udpport"], str(uport), "stats settings shows the UDP port")

u.send(1, "set k 0 0 5\r\nhello\r\n")
got = u.datagrams()
t.is_(got, [((1, 0, 1, 0), b"STORED\r\n")], "set over UDP: STORED in one datagram, id 1")
u.send(40000, "get k\r\n")
t.is_(u.datagrams(), [((40000, 0, 1, 0), b"VALUE k 0 5\r\nhello\r\nEND\r\n")],
      "get over UDP: the value, request id 40000 echoed")
u.send(65535, "get nothing\r\n")
t.is_(u.datagrams(), [((65535, 0, 1, 0), b"END\r\n")], "a miss; id 65535")
u.send(0, "mg k v c\r\nmn\r\n")
got = u.datagrams()
t.is_(len(got), 2, "two commands in one datagram: two reply messages")
t.ok(len(got) == 2 and got[0][0] == (0, 0, 1, 0) and got[0][1].startswith(b"VA 5 c")
     and got[0][1].endswith(b"\r\nhello\r\n"), "meta get over UDP")
t.ok(len(got) == 2 and got[1] == ((0, 0, 1, 0), b"MN\r\n"), "mn over UDP, its own message")
t.is_(c.cmd("get k"), "VALUE k 0 5", "the UDP set is visible over TCP")
c.lines_until("END")

# a value larger than one datagram
value = bytes((i * 7) % 26 + 97 for i in range(5000))
c.send(b"set big 3 0 5000\r\n" + value + b"\r\n")
t.is_(c.line(), "STORED", "store 5000 bytes over TCP")
u.send(777, "get big\r\n")
got = u.datagrams()
expect = b"VALUE big 3 5000\r\n" + value + b"\r\nEND\r\n"
n = (len(expect) + 1391) // 1392
t.is_(len(got), n, "the reply is spread over %d datagrams" % n)
t.ok(all(h[0] == 777 and h[2] == n and h[3] == 0 for h, _ in got),
     "every datagram: id 777, count %d, reserved 0" % n)
t.is_(sorted(h[1] for h, _ in got), list(range(n)), "sequence numbers 0..%d" % (n - 1))
t.ok(all(8 + len(p) <= 1400 for _, p in got), "no datagram exceeds 1400 bytes")
t.ok(all(8 + len(p) == 1400 for h, p in got if h[1] < n - 1), "all but the last are full")
t.is_(b"".join(p for _, p in sorted(got, key=lambda d: d[0][1])), expect,
      "reassembled by sequence number: the whole reply")

u.send(9, "get big k\r\n")
got = u.datagrams()
first = [d for d in got if d[0][2] == n]
second = [d for d in got if d[0][2] == 1]
t.ok(len(first) == n and len(second) == 1, "multi-get: one message per hit (%d + 1 datagrams)" % n)
t.is_(second[0][1] if second else None, b"VALUE k 0 5\r\nhello\r\nEND\r\n",
      "the second hit's message carries the END")

# many request ids in flight
for i in range(20):
    c.send("set key%d 0 0 %d\r\n%s\r\n" % (i, len(str(i * i)), i * i))
    t.is_(c.line(), "STORED", "set key%d over TCP" % i)
for i in range(20):
    u.send(1000 + i, "get key%d\r\n" % i)
got = u.datagrams()
answers = {h[0]: p for h, p in got}
t.is_(len(got), 20, "20 requests, 20 replies")
t.ok(all(answers.get(1000 + i) == ("VALUE key%d 0 %d\r\n%d\r\nEND\r\n" % (i, len(str(i * i)), i * i)).encode()
         for i in range(20)), "each reply carries its request's id and value")

# datagrams the server ignores
u.send(0, b"", raw=b"\x00\x05\x00")
t.is_(u.datagrams(wait=0.5), [], "a datagram shorter than the header: no reply")
u.send(0, b"", raw=b"\x00\x05\x00\x00\x00\x01\x00\x00")
t.is_(u.datagrams(wait=0.5), [], "a header without a command: no reply")
u.send(6, "get k\r\n", total=2)
t.is_(u.datagrams(wait=0.5), [], "a request announcing 2 datagrams: no reply")
u.send(7, "get k")
t.is_(u.datagrams(wait=0.5), [], "a command without its newline: no reply")
u.send(8, "get k\r\n")
t.is_(u.datagrams(), [((8, 0, 1, 0), b"VALUE k 0 5\r\nhello\r\nEND\r\n")],
      "the next datagram is answered on its own")
u.send(9, "get k\r\n", seq=3)
t.is_(u.datagrams(), [((9, 0, 1, 0), b"VALUE k 0 5\r\nhello\r\nEND\r\n")],
      "a lone datagram's sequence number is not looked at (only its count)")

# binary requests over UDP: each datagram picks its protocol by its first byte
getk = struct.pack("!BBHBBHIIQ", 0x80, 0x0c, 1, 0, 0, 0, 1, 0xabcd, 0) + b"k"
u.send(30, getk)
got = u.datagrams()
ok = len(got) == 1 and got[0][0] == (30, 0, 1, 0) and len(got[0][1]) >= 24
if ok:
    magic, op, keylen, extlen, _, status, bodylen, opaque, _ = struct.unpack("!BBHBBHIIQ", got[0][1][:24])
    body = got[0][1][24:]
    ok = (magic, op, status, opaque, keylen, extlen) == (0x81, 0x0c, 0, 0xabcd, 1, 4) and body[5:] == b"hello"
t.ok(ok, "binary GETK over UDP: the value, key and opaque come back")
u.send(31, "get k\r\n")
t.is_(u.datagrams(), [((31, 0, 1, 0), b"VALUE k 0 5\r\nhello\r\nEND\r\n")],
      "a text request after a binary one")

# requests that would end a stream connection leave UDP service running
for rid, req in ((20, "quit\r\n"), (21, "GET / HTTP/1.1\r\n"), (22, "x" * 3000)):
    u.send(rid, req)
    u.datagrams(wait=0.3)
    u.send(rid + 100, "get k\r\n")
    t.is_(u.datagrams(), [((rid + 100, 0, 1, 0), b"VALUE k 0 5\r\nhello\r\nEND\r\n")],
          "UDP still served after %r" % req[:20])

u.send(10, "stats\r\n")
payload, got = u.message(10)
t.ok(len(got) >= 2 and payload.startswith(b"STAT pid ") and payload.endswith(b"END\r\n"),
     "stats over UDP: one message over several datagrams")
t.ok(c.cmd("version").startswith("VERSION "), "TCP still served")
u.close()
c.close()
srv.stop()
t.done()
