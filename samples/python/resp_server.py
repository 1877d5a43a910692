"""resp_server.py: a small Redis-protocol (RESP) server on asyncio streams, answering
GET, SET, PING, DEL, EXISTS and the CONFIG GET that redis-benchmark sends first.

Each connection is one asyncio task. Usage: resp_server.py [PORT] (default 6390); then
e.g. redis-benchmark -p 6390 -t get,set -n 20000 -c 20 -q

SIGINT and SIGTERM stop it gracefully, as real servers stop: the loop's own signal
handlers set an event, the server stops listening, open connections are closed, and
the program exits 0 after printing "resp_server: stopped". (A KeyboardInterrupt raised
inside the loop, asyncio's default, can strand a task on Python 3.10 so that
asyncio.run never returns.)
"""
import asyncio
import signal
import sys

from resp_commands import execute

clients = set()  # the writers of open connections, closed at shutdown


async def read_command(reader):
    """One command, as a list of bytes, or None at end of stream."""
    line = await reader.readline()
    if not line:
        return None
    if not line.startswith(b"*"):
        return line.split()  # inline command (telnet, PING)
    args = []
    for _ in range(int(line[1:])):
        size = int((await reader.readline())[1:])
        data = await reader.readexactly(size + 2)
        args.append(data[:-2])
    return args


async def serve_client(reader, writer):
    clients.add(writer)
    try:
        while True:
            args = await read_command(reader)
            if args is None:
                break
            writer.write(execute(args))
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError, ValueError):
        pass
    finally:
        clients.discard(writer)
        writer.close()


async def main(port):
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    server = await asyncio.start_server(serve_client, "127.0.0.1", port)
    print("listening on 127.0.0.1:%d" % port, flush=True)
    await stop.wait()
    server.close()
    for writer in list(clients):
        writer.close()  # its reader sees the end of stream; its task returns
    # since 3.12 wait_closed also waits for the connections, which are closing now
    await asyncio.wait_for(server.wait_closed(), 10)
    print("resp_server: stopped", flush=True)


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 6390))
