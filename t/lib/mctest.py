"""mctest.py: Python side of the test helpers (the Perl side is MCTest.pm).

Owns starting and stopping a server from MC_SERVER on a free loopback port and
a minimal TAP emitter, so Python .t files can run under prove. It knows nothing
about what a particular test expects.

    from mctest import TAP, start_server, target
    t = TAP()
    srv = start_server(t, "-m", "64")     # 127.0.0.1, free port, -U 0, + args
    srv.port, srv.pid, srv.log_text()
    t.ok(cond, "name"); t.is_(got, want, "name")
    srv.stop()      # SIGTERM, wait; TAP: exited, status 0, no sanitizer report
    t.done()        # prints the plan, exits non-zero if anything failed

Raw protocol access (every read has a timeout; nothing blocks forever):

    c = srv.connect()                     # a Conn
    c.send(b"set k 0 0 1\r\nx\r\n")
    c.line()            # one line incl. CRLF; b"" on timeout or EOF
    c.read_bytes(n)     # exactly n bytes, fewer on timeout or EOF
    c.until(b"END\r\n") # up to and including the marker
    c.is_reply(t, request, expected, "name")   # send + compare, one assertion
    c.stats("settings") # dict of str -> str

Servers still running when the interpreter exits are killed (atexit and
SIGTERM/SIGINT handlers), also when a test dies with an exception, which is
reported as a failed assertion.
"""
import atexit
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback

_running = []


def target():
    return os.environ.get("MC_TARGET", "memcached")


def free_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class TAP:
    """Counts assertions and prints TAP lines."""

    def __init__(self):
        self.n = 0
        self.failed = 0
        sys.excepthook = self._excepthook

    def ok(self, cond, name):
        self.n += 1
        if not cond:
            self.failed += 1
        print("%s %d - %s" % ("ok" if cond else "not ok", self.n, name.replace("#", "")), flush=True)
        return bool(cond)

    def is_(self, got, want, name):
        if not self.ok(got == want, name):
            self.diag("     got: %r" % (got,))
            self.diag("expected: %r" % (want,))
            return False
        return True

    def diag(self, text):
        for line in str(text).splitlines():
            print("# " + line, file=sys.stderr, flush=True)

    def skip(self, count, why):
        for _ in range(count):
            self.n += 1
            print("ok %d # skip %s" % (self.n, why), flush=True)

    def done(self):
        print("1..%d" % self.n, flush=True)
        _kill_all()
        sys.exit(1 if self.failed or self.n == 0 else 0)

    def _excepthook(self, etype, value, tb):
        self.ok(False, "test script died: %s: %s" % (etype.__name__, value))
        self.diag("".join(traceback.format_exception(etype, value, tb)))
        print("1..%d" % self.n, flush=True)
        _kill_all()
        sys.exit(255)


class Conn:
    """A client socket with buffered, time-bounded reads."""

    def __init__(self, port, timeout=5.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.timeout = timeout
        self.buf = b""

    def send(self, data):
        if isinstance(data, str):
            data = data.encode("latin-1")
        # reads leave the socket with their own short timeout; a send gets
        # the connection's whole timeout again
        self.sock.settimeout(self.timeout)
        self.sock.sendall(data)

    def _read_until(self, done, timeout):
        deadline = time.time() + (self.timeout if timeout is None else timeout)
        while True:
            n = done(self.buf)
            if n is not None:
                out, self.buf = self.buf[:n], self.buf[n:]
                return out
            left = deadline - time.time()
            if left <= 0:
                break
            self.sock.settimeout(min(left, 0.5))
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                break
            if not chunk:
                break
            self.buf += chunk
        out, self.buf = self.buf, b""
        return out

    def line(self, timeout=None):
        return self._read_until(lambda b: b.index(b"\n") + 1 if b"\n" in b else None, timeout)

    def read_bytes(self, n, timeout=None):
        return self._read_until(lambda b: n if len(b) >= n else None, timeout)

    def until(self, marker, timeout=None):
        return self._read_until(lambda b: b.index(marker) + len(marker) if marker in b else None, timeout)

    def is_reply(self, tap, request, expected, name):
        if request:
            self.send(request)
        if isinstance(expected, str):
            expected = expected.encode("latin-1")
        return tap.is_(self.read_bytes(len(expected)), expected, name)

    def wait_lru_settled(self, limit=30.0):
        """Waits (at most limit seconds) until the LRU maintainer's moves
        (the moves_* counters of 'stats items') stop changing."""
        def moves():
            st = self.stats("items")
            return sum(int(v) for k, v in st.items() if k.rsplit(":", 1)[-1].startswith("moves_"))

        seen, end = moves(), time.time() + limit
        while time.time() < end:
            time.sleep(0.5)
            now = moves()
            if now == seen:
                return
            seen = now

    def stats(self, group=None):
        self.send("stats %s\r\n" % group if group else "stats\r\n")
        out = {}
        for line in self.until(b"END\r\n").decode("latin-1").split("\r\n"):
            parts = line.split(" ", 2)
            if len(parts) >= 2 and parts[0] == "STAT":
                out[parts[1]] = parts[2] if len(parts) > 2 else ""
        return out

    def close(self):
        self.sock.close()


class Server:
    def __init__(self, tap, proc, port, log, cmd):
        self.tap, self.proc, self.port, self.log, self.cmd = tap, proc, port, log, cmd
        self.pid = proc.pid

    def connect(self, timeout=5.0):
        return Conn(self.port, timeout)

    def log_text(self):
        try:
            with open(self.log, "rb") as f:
                return f.read().decode("latin-1")
        except OSError:
            return ""

    def alive(self):
        return self.proc.poll() is None

    def wait_exit(self, secs):
        try:
            self.proc.wait(timeout=secs)
            return True
        except subprocess.TimeoutExpired:
            return False

    def diag_hung(self):
        """For a server that did not exit when asked: its log's tail, each
        thread's state and kernel wait, and (where gdb is installed) each
        thread's stack, as TAP comments."""
        self.tap.diag("server log (tail):\n" + self.log_text()[-2000:])
        task_dir = "/proc/%d/task" % self.pid
        try:
            tids = sorted(os.listdir(task_dir), key=int)
        except OSError:
            tids = []
        for tid in tids:
            def read(name):
                try:
                    with open(os.path.join(task_dir, tid, name)) as f:
                        return f.read().strip()
                except OSError:
                    return "?"
            stat = read("stat")
            state = stat.rsplit(")", 1)[-1].split()[0] if ")" in stat else "?"
            self.tap.diag("thread %s %s state %s wchan %s" % (tid, read("comm"), state, read("wchan")))
        gdb = shutil.which("gdb")
        if gdb:
            out = subprocess.run([gdb, "-batch", "-nx", "-p", str(self.pid), "-ex", "thread apply all bt"],
                                 stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 timeout=60, check=False)
            self.tap.diag(out.stdout.decode("latin-1")[-12000:])

    def check_log(self, what):
        text = self.log_text()
        found = [w for w in ("AddressSanitizer", "LeakSanitizer", "runtime error") if w in text]
        if not self.tap.ok(not found, "%s: no sanitizer report in the server log" % what):
            self.tap.diag(text)

    def stop(self):
        t = self.tap
        was_alive = self.alive()
        if not t.ok(was_alive, "server was still running before SIGTERM"):
            t.diag("exit status %s\n%s" % (self.proc.returncode, self.log_text()))
        if was_alive:
            self.proc.send_signal(signal.SIGTERM)
        exited = self.wait_exit(10)
        t.ok(exited, "server exited within 10 s of SIGTERM")
        if exited:
            t.is_(self.proc.returncode, 0, "server exit status after SIGTERM is 0")
        else:
            self.diag_hung()
            self.proc.kill()
            self.wait_exit(5)
        self.check_log("after stop")
        if self in _running:
            _running.remove(self)
        try:
            os.unlink(self.log)
        except OSError:
            pass


def start_server(tap, *args, start_timeout=10):
    """Starts MC_SERVER with args; waits up to start_timeout seconds for it to
    accept a connection (a warm restart loads its items first)."""
    binary = os.environ.get("MC_SERVER", "/usr/bin/memcached")
    if not os.access(binary, os.X_OK):
        raise RuntimeError("MC_SERVER %s is not executable" % binary)
    for attempt in range(3):
        port = free_port()
        fd, log = tempfile.mkstemp(prefix="mctest-")
        cmd = [binary, "-l", "127.0.0.1", "-p", str(port), "-U", "0"]
        if os.geteuid() == 0:
            cmd += ["-u", "root"]  # memcached refuses to run as root without -u
        cmd += [str(a) for a in args]
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=fd, stderr=fd)
        os.close(fd)
        srv = Server(tap, proc, port, log, cmd)
        _running.append(srv)
        deadline = time.time() + start_timeout
        while time.time() < deadline and srv.alive():
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return srv
            except OSError:
                time.sleep(0.02)
        text = srv.log_text()
        _kill(srv)
        if "Address already in use" in text and attempt < 2:
            continue
        raise RuntimeError("server did not start: %s\n%s" % (" ".join(cmd), text))
    raise RuntimeError("server did not start after 3 attempts")


def _kill(srv):
    if srv.alive():
        srv.proc.kill()
        try:
            srv.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
    if srv in _running:
        _running.remove(srv)
    try:
        os.unlink(srv.log)
    except OSError:
        pass


def _kill_all():
    for srv in list(_running):
        _kill(srv)


def _on_signal(signum, frame):
    _kill_all()
    sys.exit(128 + signum)


atexit.register(_kill_all)
signal.signal(signal.SIGTERM, _on_signal)
signal.signal(signal.SIGINT, _on_signal)
