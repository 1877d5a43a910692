# yappi's README, "Profile a greenlet application", with `import coprof as yappi` and
# the sleep a tenth as long.
import coprof as yappi
from greenlet import greenlet
import time


class GreenletA(greenlet):
    def run(self):
        time.sleep(0.1)


yappi.set_context_backend("greenlet")
yappi.set_clock_type("wall")

yappi.start(builtins=True)
a = GreenletA()
a.switch()
yappi.stop()

yappi.get_func_stats().print_all()
yappi.get_thread_stats().print_all()
