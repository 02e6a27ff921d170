#!/usr/bin/python3
# t/udp/portfile.t: MEMCACHED_PORT_FILENAME with ports chosen by the
# system (-p -1 -U -1), as memcached 1.6.18 writes it: "TCP INET: <port>"
# then "UDP INET: <port>" lines, the file appearing complete (written as
# <name>.lck, then renamed); with -p 0 only the UDP line. Both ports serve.
# -U without -p: TCP listens on the UDP port, as in memcached.
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "meta"))
from mcconn import Conn, Udp  # noqa: E402
from mctest import TAP, free_port  # noqa: E402

t = TAP()
binary = os.environ.get("MC_SERVER", "/usr/bin/memcached")
tmpdir = tempfile.mkdtemp(prefix="mcport-")


def run(name, *args):
    """Starts the server with a port file; returns (process, file lines),
    the lines None when no file appeared."""
    portfile = os.path.join(tmpdir, name)
    env = dict(os.environ, MEMCACHED_PORT_FILENAME=portfile)
    cmd = [binary, "-l", "127.0.0.1", "-m", "64"] + list(args)
    if os.geteuid() == 0:
        cmd += ["-u", "root"]
    proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 10
    while time.time() < deadline and proc.poll() is None and not os.path.exists(portfile):
        time.sleep(0.02)
    lines = None
    if os.path.exists(portfile):
        with open(portfile) as f:
            lines = f.read().splitlines()
        os.unlink(portfile)
    return proc, lines


def stop(proc):
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


proc, lines = run("both", "-p", "-1", "-U", "-1")
try:
    lines = lines or []
    t.is_(len(lines), 2, "-p -1 -U -1: two lines in the port file")
    tcp = re.fullmatch(r"TCP INET: (\d+)", lines[0]) if lines else None
    udp = re.fullmatch(r"UDP INET: (\d+)", lines[1]) if len(lines) > 1 else None
    t.ok(tcp is not None, "first line: TCP INET: <port> (got %r)" % (lines[:1],))
    t.ok(udp is not None, "second line: UDP INET: <port> (got %r)" % (lines[1:2],))
    t.ok(tcp and int(tcp.group(1)) > 0 and udp and int(udp.group(1)) > 0, "both ports non-zero")
    if tcp and udp:
        c = Conn(int(tcp.group(1)))
        t.is_(c.cmd("set pf 0 0 2\r\nok"), "STORED", "the TCP port serves")
        u = Udp(int(udp.group(1)))
        u.send(5, "get pf\r\n")
        t.is_(u.datagrams(), [((5, 0, 1, 0), b"VALUE pf 0 2\r\nok\r\nEND\r\n")], "the UDP port serves")
        c.close()
    else:
        t.ok(False, "the TCP port serves")
        t.ok(False, "the UDP port serves")
    t.ok(not os.path.exists(os.path.join(tmpdir, "both.lck")), "no .lck file left behind")
finally:
    stop(proc)

proc, lines = run("udponly", "-p", "0", "-U", "-1")
try:
    lines = lines or []
    t.is_(len(lines), 1, "-p 0 -U -1: one line")
    udp = re.fullmatch(r"UDP INET: (\d+)", lines[0]) if lines else None
    t.ok(udp is not None and int(udp.group(1)) > 0, "it is UDP INET: <port> (got %r)" % lines)
    if udp:
        u = Udp(int(udp.group(1)))
        u.send(6, "version\r\n")
        got = u.datagrams()
        t.ok(len(got) == 1 and got[0][1].startswith(b"VERSION "), "the UDP port serves")
    else:
        t.ok(False, "the UDP port serves")
finally:
    stop(proc)

# nothing to listen on (-p 0 -U 0): the port file still appears, empty
proc, lines = run("nothing", "-p", "0", "-U", "0")
try:
    t.is_(lines, [], "-p 0 -U 0: an empty port file")
finally:
    stop(proc)

# -U without -p: memcached listens for TCP on the UDP port (issue 67)
proc, lines = run("udpport", "-U", "-1")
try:
    lines = lines or []
    t.is_(len(lines), 2, "-U -1 without -p: TCP and UDP lines")
    tcp = re.fullmatch(r"TCP INET: (\d+)", lines[0]) if lines else None
    t.ok(tcp is not None and int(tcp.group(1)) != 11211,
         "TCP on a port the system chose, not 11211 (got %r)" % lines)
finally:
    stop(proc)
for attempt in range(3):
    port = free_port()
    proc, lines = run("udpfixed", "-U", str(port))
    if lines:
        break
    stop(proc)
try:
    t.is_(lines, ["TCP INET: %d" % port, "UDP INET: %d" % port],
          "-U <port> without -p: TCP listens on the UDP port")
    if lines:
        c = Conn(port)
        t.is_(c.cmd("version")[:8], "VERSION ", "the TCP port serves")
        c.close()
    else:
        t.ok(False, "the TCP port serves")
finally:
    stop(proc)

os.rmdir(tmpdir)
t.done()
