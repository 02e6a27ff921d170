"""udp_fixture.py: the UDP suites' common start: a server with TCP and UDP
on a free port (two workers, 64 MB), a TCP connection and a UDP client."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "meta"))
from mcconn import Conn, Udp, free_udp_port  # noqa: E402,F401 (Conn, Udp: for the suites)
from mctest import start_server  # noqa: E402


def start_udp_server(t, *extra):
    """Returns (server, tcp connection, udp client, udp port)."""
    uport = free_udp_port()
    srv = start_server(t, "-m", "64", "-U", str(uport), "-t", "2", *extra)
    return srv, Conn(srv.port), Udp(uport), uport
