# yappi's README, "Profile an asyncio application", with `import coprof as yappi` and
# the sleeps a tenth as long.
import asyncio
import coprof as yappi


async def foo():
    await asyncio.sleep(0.1)
    await baz()
    await asyncio.sleep(0.05)


async def bar():
    await asyncio.sleep(0.2)


async def baz():
    await asyncio.sleep(0.1)


yappi.set_clock_type("WALL")
with yappi.run():
    asyncio.run(foo())
    asyncio.run(bar())
yappi.get_func_stats().print_all()
