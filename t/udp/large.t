#!/usr/bin/python3
# t/udp/large.t: requests in large datagrams, read whole as memcached 1.6.18
# reads them (up to 64 KiB): a set carrying a 40000-byte value, a get line
# longer than 16 KiB, and a value cut short by the end of its datagram (not
# stored; what becomes of the next datagram differs: memcached may read it
# as the rest of the value, so it is not tested).
from mctest import TAP
from udp_fixture import start_udp_server

t = TAP()
srv, c, u, _ = start_udp_server(t)

value = bytes((i * 11) % 26 + 97 for i in range(40000))
u.send(1, b"set big 0 0 40000\r\n" + value + b"\r\n")
t.is_(u.datagrams(), [((1, 0, 1, 0), b"STORED\r\n")], "a 40000-byte value in one datagram: STORED")
c.send("get big\r\n")
t.is_(c.line(), "VALUE big 0 40000", "the value is there over TCP")
t.is_(c.read(40002), value + b"\r\n", "all of it")
t.is_(c.line(), "END", "END")

keys = " ".join("key%05d" % i for i in range(3000))  # a 26000-byte line
t.is_(c.cmd("set key02999 0 0 2\r\nhi"), "STORED", "set the last key of the line")
u.send(2, "get %s\r\n" % keys)
got = u.datagrams()
t.is_(b"".join(p for _, p in sorted(got, key=lambda d: d[0][1])),
      b"VALUE key02999 0 2\r\nhi\r\nEND\r\n", "a get line of 26000 bytes over UDP: its last key found")

u.send(3, b"set cut 0 0 50000\r\n" + value + b"\r\n")
t.is_(u.datagrams(wait=0.5), [], "a value longer than its datagram: no reply")
t.is_(c.cmd("get cut"), "END", "nothing stored for the cut value")

srv.stop()
t.done()
