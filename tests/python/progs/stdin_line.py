"""stdin_line.py: for the programs here that run until told to stop: an awaitable that
completes when a line (or the end) comes on stdin, read by the running loop."""
import asyncio
import sys


async def line_on_stdin():
    loop = asyncio.get_running_loop()
    got = loop.create_future()
    loop.add_reader(sys.stdin.fileno(), lambda: got.done() or got.set_result(None))
    await got
    loop.remove_reader(sys.stdin.fileno())
