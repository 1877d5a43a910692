#!/usr/bin/env python3
"""shapes.py: seed 002's five shapes of one trivial addition, as pyperf benchmarks, so
bench/python/pyperf.py runs them with pyperf's runner beside pyperformance's: a plain
call, awaiting a coroutine, awaiting a Task, `await asyncio.sleep(0)`, and a gather of
1000 coroutines. Each value is the time of `loops` operations (for gather, of `loops`
gathers).

usage: python shapes.py --shape {plain,await,task,sleep0,gather} [pyperf options]
"""
import asyncio

import pyperf


def add(a, b):
    return a + b


async def add_coro(a, b):
    return a + b


def plain(loops):
    t0 = pyperf.perf_counter()
    s = 0
    for _ in range(loops):
        s = add(s, 1)
    return pyperf.perf_counter() - t0


async def await_coro(loops):
    t0 = pyperf.perf_counter()
    s = 0
    for _ in range(loops):
        s = await add_coro(s, 1)
    return pyperf.perf_counter() - t0


async def await_task(loops):
    t0 = pyperf.perf_counter()
    s = 0
    for _ in range(loops):
        s = await asyncio.ensure_future(add_coro(s, 1))
    return pyperf.perf_counter() - t0


async def sleep0(loops):
    t0 = pyperf.perf_counter()
    for _ in range(loops):
        await asyncio.sleep(0)
    return pyperf.perf_counter() - t0


async def gather(loops):
    t0 = pyperf.perf_counter()
    for _ in range(loops):
        await asyncio.gather(*(add_coro(i, 1) for i in range(1000)))
    return pyperf.perf_counter() - t0


SHAPES = {"plain": plain, "await": await_coro, "task": await_task, "sleep0": sleep0,
          "gather": gather}


def timed(loops, shape):
    fn = SHAPES[shape]
    if fn is plain:
        return fn(loops)
    return asyncio.run(fn(loops))


def add_cmdline_args(cmd, args):
    cmd.extend(("--shape", args.shape))


if __name__ == "__main__":
    runner = pyperf.Runner(add_cmdline_args=add_cmdline_args)
    runner.argparser.add_argument("--shape", choices=sorted(SHAPES), required=True)
    args = runner.parse_args()
    runner.bench_time_func("shape_" + args.shape, timed, args.shape)
