#!/usr/bin/python3
# t/unix/unix.t: Unix-domain sockets as memcached 1.6.18 serves them: -s
# path, the socket file's permissions from -a (default 0700), TCP and UDP
# off when -s is given (even with -p/-U), text, meta and binary-free traffic
# over the socket, several clients, a stale socket file replaced at start,
# and a start-up failure when the path holds a regular file.
import os
import socket
import stat
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "meta"))
import mctest  # noqa: E402
from mcconn import Conn, free_udp_port  # noqa: E402
from mctest import TAP  # noqa: E402

t = TAP()
workdir = tempfile.mkdtemp(prefix="mc-unix-")
binary = os.environ.get("MC_SERVER", "/usr/bin/memcached")


def spawn(path, *args):
    """Starts the server on a Unix socket; returns (Server, connected) where
    connected says whether a client could connect within 10 s."""
    fd, log = tempfile.mkstemp(prefix="mctest-", dir=workdir)
    cmd = [binary, "-s", path] + (["-u", "root"] if os.geteuid() == 0 else []) + list(args)
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=fd, stderr=fd)
    os.close(fd)
    srv = mctest.Server(t, proc, None, log, cmd)
    mctest._running.append(srv)
    deadline = time.time() + 10
    while time.time() < deadline and srv.alive():
        try:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(1)
            s.connect(path)
            s.close()
            return srv, True
        except OSError:
            s.close()
            time.sleep(0.02)
    return srv, False


def refused_tcp(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return False
    except OSError:
        return True


path = os.path.join(workdir, "mc.sock")
port = mctest.free_port()
uport = free_udp_port()
srv, up = spawn(path, "-p", str(port), "-U", str(uport))
t.ok(up, "server accepts on the Unix socket")
st = os.lstat(path)
t.ok(stat.S_ISSOCK(st.st_mode), "the path is a socket")
t.is_(oct(stat.S_IMODE(st.st_mode)), oct(0o700), "default permissions 0700")
t.ok(refused_tcp(port), "-s turns TCP off even with -p")
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.settimeout(0.5)
u.sendto(b"\x00\x01\x00\x00\x00\x01\x00\x00version\r\n", ("127.0.0.1", uport))
try:
    reply = u.recv(100)
except OSError:
    reply = None
u.close()
t.is_(reply, None, "-s turns UDP off even with -U")

c = Conn(path=path)
t.is_(c.cmd("set k 5 0 5\r\nhello"), "STORED", "set over the Unix socket")
c.send("get k\r\n")
t.is_(c.lines_until("END"), ["VALUE k 5 5", "hello", "END"], "get over the Unix socket")
c.send("mg k v f\r\n")
t.is_(c.reply(), ("VA 5 f5", b"hello"), "meta get over the Unix socket")
big = b"z" * 300000
c.send(b"set big 0 0 300000\r\n" + big + b"\r\n")
t.is_(c.line(), "STORED", "a 300 kB value over the Unix socket")
c.send("get big\r\n")
t.is_(c.line(), "VALUE big 0 300000", "its header")
t.ok(c.read(300002) == big + b"\r\n" and c.line() == "END", "the whole value comes back")
others = [Conn(path=path) for _ in range(5)]
for i, o in enumerate(others):
    o.send("incr nope %d\r\n" % i)
t.ok(all(o.line() == "NOT_FOUND" for o in others), "five more clients served")
for o in others:
    o.close()
st = c.stats()
t.ok(int(st["pid"]) == srv.pid, "stats over the Unix socket (pid)")
t.is_(c.stats("settings")["domain_socket"], path, "stats settings shows the socket path")
c.close()
srv.stop()

for mode in ("0766", "0600"):
    p = os.path.join(workdir, "mode%s.sock" % mode)
    srv, up = spawn(p, "-a", mode)
    t.ok(up, "-a %s: server accepts" % mode)
    t.is_(oct(stat.S_IMODE(os.lstat(p).st_mode)), oct(int(mode, 8)), "-a %s: socket mode" % mode)
    srv.stop()

# a socket file left behind by an earlier server is replaced
stale = os.path.join(workdir, "stale.sock")
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(stale)
s.close()
t.ok(stat.S_ISSOCK(os.lstat(stale).st_mode), "a stale socket file exists")
srv, up = spawn(stale)
t.ok(up, "the server starts over a stale socket file")
if up:
    c = Conn(path=stale)
    t.ok(c.cmd("version").startswith("VERSION "), "and serves it")
    c.close()
srv.stop()

# a regular file at the path is not removed: start-up fails
regular = os.path.join(workdir, "regular")
with open(regular, "w") as f:
    f.write("keep me\n")
srv, up = spawn(regular)
t.ok(not up, "no server on a path that holds a regular file")
t.ok(srv.wait_exit(10) and srv.proc.returncode == 71, "the server exits with status 71 (EX_OSERR), as memcached")
with open(regular) as f:
    t.is_(f.read(), "keep me\n", "the regular file is untouched")
mctest._kill(srv)

for name in os.listdir(workdir):
    os.unlink(os.path.join(workdir, name))
os.rmdir(workdir)
t.done()
