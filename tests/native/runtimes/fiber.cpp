// fiber.cpp: Boost.Context fibers (boost::context::fiber, switching through
// jump_fcontext/ontop_fcontext of libboost_context.so): a heavy and a light fiber take
// turns with main, which resumes each in turn. Built with -finstrument-functions.
#include <boost/context/fiber.hpp>
#include <cstdio>
#include <utility>

#include "work.h"

namespace ctx = boost::context;

static rt_args args;

ctx::fiber task_yield(ctx::fiber &&main_fiber);
ctx::fiber task_yield(ctx::fiber &&main_fiber)
{
	return std::move(main_fiber).resume();
}

void heavy_work(double ms);
void heavy_work(double ms)
{
	rt_burn(ms, RT_HEAVY);
}

void light_work(double ms);
void light_work(double ms)
{
	rt_burn(ms, RT_LIGHT);
}

ctx::fiber heavy_task(ctx::fiber &&main_fiber);
ctx::fiber heavy_task(ctx::fiber &&main_fiber)
{
	for (int i = 0; i < args.rounds; i++) {
		heavy_work(args.heavy_ms);
		main_fiber = task_yield(std::move(main_fiber));
	}
	return std::move(main_fiber);
}

ctx::fiber light_task(ctx::fiber &&main_fiber);
ctx::fiber light_task(ctx::fiber &&main_fiber)
{
	for (int i = 0; i < args.rounds; i++) {
		light_work(args.light_ms);
		main_fiber = task_yield(std::move(main_fiber));
	}
	return std::move(main_fiber);
}

int main(int argc, char **argv)
{
	args = rt_parse(argc, argv);
	ctx::fiber heavy{heavy_task};
	ctx::fiber light{light_task};
	while (heavy || light) {
		if (heavy)
			heavy = std::move(heavy).resume();
		if (light)
			light = std::move(light).resume();
	}
	rt_report("fiber", args.rounds);
	return 0;
}
