#!/usr/bin/python3
# t/proto/sighup.t: SIGHUP does not stop the server (memcached ignores it
# but for reloading its -Y auth file). With -Y, the file is read again:
# new credentials work, removed ones are refused, a connection already
# authenticated keeps serving; a file that cannot be read or has a bad
# line leaves the credentials as they were; an empty one lets nobody in.
import os
import signal
import time

import tempfile

from mctest import TAP, start_server

t = TAP()


def login(srv, user, password):
    """A new connection authenticating as user: (first reply line, conn)."""
    c = srv.connect()
    token = ("%s %s" % (user, password)).encode()
    c.send(b"set auth 0 0 %d\r\n%s\r\n" % (len(token), token))
    return c.line(), c


def becomes(srv, user, password, want, secs=4.0):
    """Polls until a login of user gives `want` (memcached reloads on its
    next clock tick); returns the last reply."""
    deadline = time.time() + secs
    while True:
        got, c = login(srv, user, password)
        c.close()
        if got == want or time.time() > deadline:
            return got
        time.sleep(0.1)


# without -Y: SIGHUP changes nothing
srv = start_server(t, "-m", "64")
c = srv.connect()
c.is_reply(t, b"set k 0 0 2\r\nhi\r\n", b"STORED\r\n", "set before SIGHUP")
for _ in range(3):
    os.kill(srv.pid, signal.SIGHUP)
    time.sleep(0.2)
time.sleep(0.5)
t.ok(srv.alive(), "three SIGHUPs: the server is still running")
c.is_reply(t, b"get k\r\n", b"VALUE k 0 2\r\nhi\r\nEND\r\n", "the same connection is served")
c2 = srv.connect()
c2.is_reply(t, b"get k\r\n", b"VALUE k 0 2\r\nhi\r\nEND\r\n", "a new connection is served")
c.close()
c2.close()
srv.stop()

# with -Y: SIGHUP reloads the file
fd, auth = tempfile.mkstemp(prefix="sighup-auth-")
os.close(fd)
with open(auth, "w") as f:
    f.write("alice:one\n")
srv = start_server(t, "-m", "64", "-Y", auth)
got, kept = login(srv, "alice", "one")
t.is_(got, b"STORED\r\n", "alice authenticates with the first file")
with open(auth, "w") as f:
    f.write("bob:two\n")
os.kill(srv.pid, signal.SIGHUP)
t.is_(becomes(srv, "bob", "two", b"STORED\r\n"), b"STORED\r\n",
      "after the file changed and SIGHUP: bob authenticates")
t.ok(srv.alive(), "the server is still running")
got, c = login(srv, "alice", "one")
t.ok(got.startswith(b"CLIENT_ERROR"), "alice, no longer in the file, is refused (%r)" % got)
c.send(b"get k\r\n")
t.ok(c.line().startswith(b"CLIENT_ERROR"), "and her connection stays unauthenticated")
c.close()
kept.is_reply(t, b"set k 0 0 2\r\nhi\r\n", b"STORED\r\n",
              "a connection that authenticated before the reload keeps serving")

os.unlink(auth)
os.kill(srv.pid, signal.SIGHUP)
time.sleep(1.5)
t.ok(srv.alive(), "SIGHUP with the file gone: still running")
got, c = login(srv, "bob", "two")
t.is_(got, b"STORED\r\n", "the credentials loaded before stay (file gone)")
c.close()

with open(auth, "w") as f:
    f.write("no colon on this line\n")
os.kill(srv.pid, signal.SIGHUP)
time.sleep(1.5)
got, c = login(srv, "bob", "two")
t.is_(got, b"STORED\r\n", "the credentials loaded before stay (a malformed file)")
c.close()

with open(auth, "w") as f:
    f.write("")
os.kill(srv.pid, signal.SIGHUP)
got = becomes(srv, "bob", "two", b"no such reply")
t.ok(got.startswith(b"CLIENT_ERROR"), "an empty file: nobody authenticates (%r)" % got)
kept.is_reply(t, b"get k\r\n", b"VALUE k 0 2\r\nhi\r\nEND\r\n",
              "the connection authenticated earlier still serves")
kept.close()
srv.stop()
os.unlink(auth)
t.done()
