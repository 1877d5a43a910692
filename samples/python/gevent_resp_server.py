"""gevent_resp_server.py: the RESP server of resp_server.py on gevent instead of asyncio:
a gevent.server.StreamServer, one greenlet per connection, answering GET, SET, PING,
DEL, EXISTS and the CONFIG GET that redis-benchmark sends first.

Usage: gevent_resp_server.py [PORT] (default 6391); then
e.g. redis-benchmark -p 6391 -t get,set -n 20000 -c 20 -q

SIGINT and SIGTERM stop it gracefully: gevent's signal handler (run in the hub) stops
the server, which closes the open connections, and the program exits 0 after printing
"gevent_resp_server: stopped".
"""
import signal
import sys

import gevent
from gevent.server import StreamServer

from resp_commands import execute


def read_command(f):
    """One command, as a list of bytes, or None at end of stream."""
    line = f.readline()
    if not line:
        return None
    if not line.startswith(b"*"):
        return line.split()  # inline command (telnet, PING)
    args = []
    for _ in range(int(line[1:])):
        size = int(f.readline()[1:])
        data = f.read(size + 2)
        if len(data) < size + 2:
            return None
        args.append(data[:-2])
    return args


def serve_client(sock, address):
    f = sock.makefile("rb")
    try:
        while True:
            args = read_command(f)
            if args is None:
                break
            sock.sendall(execute(args))
    except (ConnectionError, ValueError, OSError):
        pass
    finally:
        f.close()
        sock.close()


def main(port):
    server = StreamServer(("127.0.0.1", port), serve_client)
    server.start()
    print("listening on 127.0.0.1:%d" % port, flush=True)
    for sig in (signal.SIGINT, signal.SIGTERM):
        gevent.signal_handler(sig, server.close)
    server.serve_forever()  # returns once closed
    print("gevent_resp_server: stopped", flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 6391)
