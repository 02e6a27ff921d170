#!/usr/bin/python3
# t/udp/stream_only.t: commands that only make sense on a stream connection
# (watch, lru_crawler metadump all|hash|<classes>) are accepted over UDP
# and answered with nothing, as memcached 1.6.18 does: the rest of their
# datagram is dropped, no UDP worker becomes a log watcher, and other UDP
# clients keep getting their own replies (no log lines). Their errors
# (a bad watch kind, a bad class list) are answered as over TCP. No single
# datagram of these commands yields more reply bytes than memcached's
# (none), so a forged source address cannot be flooded with the key list.
from mctest import TAP
from udp_fixture import Conn, Udp, start_udp_server

t = TAP()
srv, c, u, uport = start_udp_server(t)
other = Udp(uport)

for i in range(300):
    c.send(b"set key%d 0 0 5\r\nhello\r\n" % i)
    c.line()
t.is_(c.cmd("get key1"), "VALUE key1 0 5", "300 keys stored over TCP")
c.lines_until("END")

# -t 2: each worker has its own UDP connection; enough datagrams reach both
def header_only(got):
    """memcached at times sends one empty datagram (the 8-byte header, count
    0) once such a command is over; never any payload."""
    return all(p == b"" and h[2] == 0 for h, p in got)


def quiet_metadump(got):
    """As header_only(), or memcached's BUSY line: a crawl asked for by an
    earlier datagram may still run (its output goes nowhere), and the
    next metadump is then refused as over TCP. Never key data."""
    busy = b"BUSY currently processing crawler request\r\n"
    return all(h[2] == 0 and p == b"" or p == busy for h, p in got)


def replies(got):
    """got without such empty datagrams, which may arrive late."""
    return [d for d in got if not (d[1] == b"" and d[0][2] == 0)]


rid = 1
for cmd in ("watch", "watch fetchers mutations", "watch evictions connevents"):
    silent = True
    for _ in range(6):
        u.send(rid, cmd + "\r\n")
        got = u.datagrams(wait=0.2, gap=0.1)
        if not header_only(got):
            silent = False
            t.diag("request %d: %r" % (rid, got))
        rid += 1
    t.ok(silent, "'%s' over UDP (6 datagrams): no reply" % cmd)

watchers = c.stats().get("log_watchers")
t.ok(watchers in (None, "0"), "no log watcher was added (log_watchers %s)" % watchers)

# TCP and UDP traffic meanwhile; every UDP reply is the request's own
c.send(b"get key2\r\nset key3 0 0 5\r\nworld\r\n")
c.lines_until("END")
t.is_(c.line(), "STORED", "TCP set after the watches")
replies_ok = True
for i in range(8):
    other.send(1000 + i, "get key%d\r\n" % (10 + i))
    got = other.datagrams(wait=1.0, gap=0.1)
    want = [((1000 + i, 0, 1, 0), b"VALUE key%d 0 5\r\nhello\r\nEND\r\n" % (10 + i))]
    if got != want:
        replies_ok = False
        t.diag("request %d: %r" % (1000 + i, got))
t.ok(replies_ok, "another UDP client gets only its own replies, never log lines")
u.send(rid, "get key3\r\n")
t.is_(replies(u.datagrams(wait=1.0, gap=0.2)),
      [((rid, 0, 1, 0), b"VALUE key3 0 5\r\nworld\r\nEND\r\n")],
      "the client that sent watch is served too")
rid += 1

for cmd in ("lru_crawler metadump all", "lru_crawler metadump hash", "lru_crawler metadump 1",
            "lru_crawler metadump 1,2,3"):
    quiet = True
    for _ in range(4):
        u.send(rid, cmd + "\r\n")
        got = u.datagrams(wait=0.3, gap=0.1)
        if not quiet_metadump(got):
            quiet = False
            t.diag("request %d: %d datagrams, %d payload bytes: %r"
                   % (rid, len(got), sum(len(p) for _, p in got), got[:2]))
        rid += 1
    t.ok(quiet, "'%s' over UDP (4 datagrams): no payload back but a BUSY line" % cmd)

# errors are answered as over TCP
u.send(rid, "lru_crawler metadump 99\r\n")
t.is_(replies(u.datagrams(wait=1.0, gap=0.2)), [((rid, 0, 1, 0), b"BADCLASS invalid class id\r\n")],
      "metadump of a bad class list: BADCLASS")
rid += 1
u.send(rid, "watch bogus\r\n")
t.is_(replies(u.datagrams(wait=1.0, gap=0.2)), [((rid, 0, 1, 0), b"ERROR\r\n")],
      "watch of a bad kind: ERROR")
rid += 1

# in a datagram of several commands: earlier replies go out, the rest is dropped
for cmd in ("watch", "lru_crawler metadump all"):
    u.send(rid, "get key1\r\n%s\r\nget key2\r\n" % cmd)
    t.is_(replies(u.datagrams(wait=1.0, gap=0.2)),
          [((rid, 0, 1, 0), b"VALUE key1 0 5\r\nhello\r\nEND\r\n")],
          "get, %s, get in one datagram: only the first get is answered" % cmd)
    rid += 1

# replies that are streamed over TCP are one message over UDP, as memcached's
for cmd, first in (("stats conns", b"STAT "), ("stats detail dump", b""), ("stats cachedump 1 5", b"ITEM key")):
    u.send(rid, cmd + "\r\n")
    payload, got = u.message(rid)
    got = [d for d in replies(got) if d[0][0] == rid]
    t.ok(payload.endswith(b"END\r\n") and payload.startswith(first)
         and all(h[0] == rid and h[2] == len(got) for h, _ in got),
         "'%s' over UDP: one reply message (%d datagrams, %d bytes)" % (cmd, len(got), len(payload)))
    rid += 1

# the TCP connection still can watch: UDP changed nothing for streams
w = Conn(srv.port)
t.is_(w.cmd("watch mutations"), "OK", "watch over TCP is still served")
w.close()

srv.stop()
t.done()
