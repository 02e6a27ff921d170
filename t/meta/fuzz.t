#!/usr/bin/python3
# t/meta/fuzz.t: a short, seeded fuzz run of the meta command parser: random
# mg/ms/md/ma/me lines built from valid and invalid flags and arguments
# (repeated flags, bad numbers, long opaques, base64 and non-base64 keys,
# bad modes), each followed by mn. Every reply must be one of the meta reply
# codes or an error line and end with MN, and the server must stay up.
# MC_FUZZ_SEED picks another sequence.
import os
import random
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mcconn import Conn  # noqa: E402
from mctest import TAP, start_server  # noqa: E402

t = TAP()
seed = int(os.environ.get("MC_FUZZ_SEED", "20261121"))
rng = random.Random(seed)
t.diag("seed %d" % seed)
srv = start_server(t, "-m", "16")
c = Conn(srv.port)

KEYS = ["a", "b", "n", "Zm9v", "YWJj", "x" * 250, "k:1", "!!"]
FLAGS = {
    "mg": "bcfhklOqstuvNRTEx",
    "ms": "bcCFIkOqTMEx",
    "md": "bCIkOqTx",
    "ma": "bCNJDTMqtcvkOx",
}
NUMBERS = ["0", "1", "30", "-1", "x", "", "99999999999999999999", "18446744073709551615"]


def flag(f):
    if f == "O":
        return "O" + "7" * rng.choice([1, 5, 31, 32, 40])
    if f in "NRTFCJD":
        return f + rng.choice(NUMBERS)
    if f == "M":
        return "M" + rng.choice(["E", "A", "P", "R", "S", "I", "+", "D", "-", "X", "SS", ""])
    return f


def request():
    cmd = rng.choice(["mg", "mg", "ms", "ms", "md", "ma", "me"])
    key = rng.choice(KEYS)
    if cmd == "me":
        return ("me %s%s\r\n" % (key, rng.choice(["", " b"]))).encode()
    flags = [flag(f) for f in rng.sample(FLAGS[cmd], rng.randint(0, 5))]
    if flags and rng.random() < 0.1:
        flags.append(flags[0])
    if cmd == "ms":
        value = rng.choice([b"", b"7", b"abc", b"12345", b"\r\n\x00\xff"])
        line = "ms %s %d %s" % (key, len(value), " ".join(flags))
        return line.encode() + b"\r\n" + value + b"\r\n"
    return ("%s %s %s\r\n" % (cmd, key, " ".join(flags))).encode()


REPLY = re.compile(r"(HD|VA \d+|EN|NF|NS|EX|ME \S+)( \S+)*|CLIENT_ERROR .+|SERVER_ERROR .+|ERROR")
bad = None
count = 0
for i in range(1500):
    req = request()
    c.send(req + b"mn\r\n")
    try:
        while True:
            line = c.line()
            if line == "MN":
                break
            if not REPLY.fullmatch(line):
                bad = (req, line)
                break
            if line.startswith("VA "):
                c.read(int(line.split(" ")[1]) + 2)
    except (TimeoutError, EOFError) as e:
        bad = (req, str(e))
    if bad:
        break
    count += 1
t.ok(bad is None, "1500 random meta requests answered with meta replies, each batch ending in MN")
if bad:
    t.diag("request %r: %r" % bad)
t.is_(count, 1500, "every request answered")
t.ok(c.cmd("version").startswith("VERSION "), "the connection still works")
c.close()
srv.stop()
t.done()
