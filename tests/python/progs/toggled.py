"""An asyncio server under load, toggled from outside: 50 client tasks send requests
to a streams server in the same loop for argv[1] seconds (or, for "-", until a line
comes on stdin), while SIGUSR2 starts and stops profiling. Prints "ready" once every
client has had an answer."""
import asyncio
import sys

from stdin_line import line_on_stdin


async def handle(reader, writer):
    while True:
        line = await reader.readline()
        if not line:
            break
        writer.write(line.upper())
        await writer.drain()
    writer.close()


async def client(port, stop, answered):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    n = 0
    while not stop.is_set():
        writer.write(b"ping %d\n" % n)
        await reader.readline()
        if n == 0:
            answered.release()
        n += 1
    writer.close()
    return n


async def main(seconds):
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    stop = asyncio.Event()
    answered = asyncio.Semaphore(0)
    clients = [asyncio.create_task(client(port, stop, answered)) for _ in range(50)]
    for _ in clients:
        await answered.acquire()
    print("ready", flush=True)
    await (line_on_stdin() if seconds is None else asyncio.sleep(seconds))
    stop.set()
    done = await asyncio.gather(*clients)
    server.close()
    print("requests", sum(done), flush=True)


asyncio.run(main(None if sys.argv[1] == "-" else float(sys.argv[1])))
