"""mcconn.py: a small line-oriented client for the meta, UDP and Unix-socket
suites (t/meta, t/udp, t/unix). Servers are started with t/lib/mctest.py;
this only talks to them: TCP or Unix stream connections with bounded waits,
and memcached's UDP frame header. It asserts nothing itself.
"""
import os
import socket
import struct
import time

DEFAULT_TIMEOUT = 5.0


class Conn:
    """A stream connection with a read buffer; every wait is bounded."""

    def __init__(self, port=None, path=None, timeout=DEFAULT_TIMEOUT):
        if path is not None:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.settimeout(timeout)
            self.sock.connect(path)
        else:
            self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.timeout = timeout
        self.buf = b""

    def close(self):
        self.sock.close()

    def send(self, data):
        if isinstance(data, str):
            data = data.encode("latin-1")
        self.sock.sendall(data)

    def _fill(self, deadline):
        left = deadline - time.time()
        if left <= 0:
            raise TimeoutError("no reply within %.1f s (have %r)" % (self.timeout, self.buf))
        self.sock.settimeout(left)
        try:
            data = self.sock.recv(65536)
        except socket.timeout:
            raise TimeoutError("no reply within %.1f s (have %r)" % (self.timeout, self.buf))
        if not data:
            raise EOFError("connection closed (have %r)" % (self.buf,))
        self.buf += data

    def line(self):
        """The next line, without its \\r\\n."""
        deadline = time.time() + self.timeout
        while b"\r\n" not in self.buf:
            self._fill(deadline)
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line.decode("latin-1")

    def read(self, n):
        deadline = time.time() + self.timeout
        while len(self.buf) < n:
            self._fill(deadline)
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def cmd(self, text):
        """Sends text + \\r\\n and returns the first reply line."""
        self.send(text + "\r\n")
        return self.line()

    def reply(self):
        """One reply: (line, value) where value is the data block of a
        VA/VALUE line (None otherwise)."""
        line = self.line()
        parts = line.split(" ")
        if parts[0] == "VA":
            data = self.read(int(parts[1]) + 2)
            return line, data[:-2]
        return line, None

    def lines_until(self, last, limit=10000):
        """Lines up to and including one equal to `last`."""
        out = []
        for _ in range(limit):
            out.append(self.line())
            if out[-1] == last:
                return out
        raise RuntimeError("no %r within %d lines" % (last, limit))

    def silent(self, wait=0.3):
        """Bytes that arrive within `wait` seconds (b"" when none)."""
        deadline = time.time() + wait
        got = self.buf
        self.buf = b""
        while True:
            left = deadline - time.time()
            if left <= 0:
                return got
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                return got
            if not data:
                return got
            got += data

    def stats(self, group=""):
        self.send(("stats %s" % group).strip() + "\r\n")
        out = {}
        for line in self.lines_until("END")[:-1]:
            _, name, value = line.split(" ", 2)
            out[name] = value
        return out


def free_udp_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Udp:
    """memcached's UDP framing: 8-byte header (request id, sequence number,
    datagram count, reserved), big-endian."""

    HEADER = struct.Struct("!HHHH")

    def __init__(self, port, timeout=2.0):
        self.addr = ("127.0.0.1", port)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.settimeout(timeout)
        self.timeout = timeout

    def close(self):
        self.sock.close()

    def send(self, request_id, payload, seq=0, total=1, raw=None):
        if isinstance(payload, str):
            payload = payload.encode("latin-1")
        data = raw if raw is not None else self.HEADER.pack(request_id, seq, total, 0) + payload
        self.sock.sendto(data, self.addr)

    def datagrams(self, wait=None, gap=0.3, limit=1000):
        """Datagrams until none arrives for `gap` seconds after the last one
        (the first may take `wait` seconds, default: the timeout): a list of
        (header tuple, payload)."""
        out = []
        wait = self.timeout if wait is None else wait
        deadline = time.time() + 30
        while len(out) < limit and time.time() < deadline:
            self.sock.settimeout(gap if out else wait)
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                break
            except ConnectionRefusedError:
                break
            out.append((self.HEADER.unpack(data[:8]), data[8:]))
        return out

    def message(self, request_id, count_hint=None):
        """Collects one reply message: datagrams with this request id and
        sequence numbers 0..n-1; returns (payload, datagrams)."""
        got = []
        deadline = time.time() + 10
        while time.time() < deadline:
            self.sock.settimeout(self.timeout)
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                break
            hdr = self.HEADER.unpack(data[:8])
            got.append((hdr, data[8:]))
            if hdr[0] == request_id and len(got) == hdr[2]:
                break
        parts = sorted((h[1], p) for h, p in got if h[0] == request_id)
        return b"".join(p for _, p in parts), got


def tmp_path(name):
    base = os.environ.get("TMPDIR", "/tmp")
    return os.path.join(base, "%s-%d-%d" % (name, os.getpid(), int(time.time() * 1000) % 100000))
