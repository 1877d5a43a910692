"""aioserver.py: an aiohttp server, the target of tests/attach's python-aiohttp case and
of bench/attach/throughput.py. It listens on 127.0.0.1 at a port of the system's
choosing and says `ready port N`; each GET / runs `handle_hello` (aiohttp runs it in a
task of its own), which sleeps 1 ms and then hashes a little, so that every request
has a task that suspends and resumes. On SIGTERM it stops serving, says `served N` (the
requests it answered) and exits 0. It prints nothing else."""
import asyncio
import hashlib
import signal

from aiohttp import web

served = 0


def digest(text):
    h = text.encode()
    for _ in range(200):
        h = hashlib.sha256(h).digest()
    return h.hex()


async def handle_hello(request):
    global served
    await asyncio.sleep(0.001)
    body = digest(request.path)
    served += 1
    return web.Response(text=body)


async def main():
    app = web.Application()
    app.router.add_get("/", handle_hello)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    print("ready port %d" % port, flush=True)
    await stop.wait()
    await runner.cleanup()
    print("served %d" % served, flush=True)


asyncio.run(main())
