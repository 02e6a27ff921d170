#!/usr/bin/python3
# t/meta/stats_detail.t: "stats detail on|off|dump" as memcached 1.6.18
# answers it: per-prefix get/hit/set/del counts of the classic text
# commands, the prefix delimiter (-D, default ':'), keys without a
# delimiter not counted, recording switched on and off at run time, and
# the usage error. The order of PREFIX lines is not specified, so lines are
# compared as a set.
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mcconn import Conn  # noqa: E402
from mctest import TAP, start_server  # noqa: E402

t = TAP()


def dump(c):
    c.send("stats detail dump\r\n")
    lines = c.lines_until("END")[:-1]
    for line in lines:
        if not re.fullmatch(r"PREFIX \S+ get \d+ hit \d+ set \d+ del \d+", line):
            t.ok(False, "PREFIX line format: %r" % line)
    return set(lines)


srv = start_server(t, "-m", "64")
c = Conn(srv.port)
t.is_(c.stats("settings")["detail_enabled"], "no", "detail stats start off without -D")
t.is_(c.cmd("set a:1 0 0 1\r\nx"), "STORED", "set while off")
t.is_(dump(c), set(), "nothing recorded while off")
t.is_(c.cmd("stats detail on"), "OK", "stats detail on: OK")
t.is_(c.stats("settings")["detail_enabled"], "yes", "stats settings shows it on")
t.is_(c.cmd("set a:1 0 0 1\r\nx"), "STORED", "set a:1")
t.is_(c.cmd("set a:2 0 0 1\r\nx"), "STORED", "set a:2")
c.send("get a:1 a:3 b:1 plain\r\n")
t.is_(c.lines_until("END"), ["VALUE a:1 0 1", "x", "END"], "get of four keys")
t.is_(c.cmd("delete a:2"), "DELETED", "delete a:2")
t.is_(c.cmd("delete zz:9"), "NOT_FOUND", "delete of a missing key")
t.is_(c.cmd("set plain 0 0 1\r\nx"), "STORED", "a key without the delimiter")
t.is_(dump(c), {"PREFIX a get 2 hit 1 set 2 del 1",
                "PREFIX b get 1 hit 0 set 0 del 0",
                "PREFIX zz get 0 hit 0 set 0 del 1"},
      "per-prefix counts; keys without ':' are not counted")
t.is_(c.cmd("stats detail off"), "OK", "stats detail off: OK")
t.is_(c.cmd("get a:1"), "VALUE a:1 0 1", "get while off")
c.lines_until("END")
t.is_(dump(c), {"PREFIX a get 2 hit 1 set 2 del 1",
                "PREFIX b get 1 hit 0 set 0 del 0",
                "PREFIX zz get 0 hit 0 set 0 del 1"},
      "off: counts kept, nothing more recorded")
t.is_(c.cmd("stats detail"), "CLIENT_ERROR usage: stats detail on|off|dump", "no argument")
t.is_(c.cmd("stats detail maybe"), "CLIENT_ERROR usage: stats detail on|off|dump", "bad argument")
t.is_(c.cmd("stats reset"), "RESET", "stats reset")
t.is_(dump(c), set(), "stats reset forgets every prefix")
c.close()
srv.stop()

# -D sets the delimiter and turns recording on from the start
srv = start_server(t, "-m", "64", "-D", "/")
c = Conn(srv.port)
st = c.stats("settings")
t.is_((st["detail_enabled"], st["stat_key_prefix"]), ("yes", "/"), "-D /: on, delimiter /")
t.is_(c.cmd("set x/1 0 0 1\r\nx"), "STORED", "set x/1")
t.is_(c.cmd("set y:1 0 0 1\r\nx"), "STORED", "set y:1 (no '/')")
c.send("get x/1 x/2\r\n")
c.lines_until("END")
t.is_(dump(c), {"PREFIX x get 2 hit 1 set 1 del 0"}, "prefixes split at '/' only")
c.close()
srv.stop()
t.done()
