"""chained_slot.py MODE: a PEP 523 user (chain523, at $CHAIN523) that puts its own
frame-evaluation function in the slot, chaining to the one it found there (coprof's),
and puts that one back later, as a debugger does. Window 1 is on from the start; each
toggle() sends coprof's toggle signal to this process. MODE plain: the user never
comes; chain: it comes in window 1 and is gone before window 2; held: it comes in
window 1 and stays. Window 2 runs work() 100 times, so leaf() 1000 times. Prints what
the slot held at each step."""
import importlib.util
import os
import signal
import sys
import time

spec = importlib.util.spec_from_file_location("chain523", os.environ["CHAIN523"])
chain523 = importlib.util.module_from_spec(spec)
spec.loader.exec_module(chain523)
MODE = sys.argv[1]
slots = []


def leaf(i):
    return i * 2


def work():
    for i in range(10):
        leaf(i)


def toggle():
    os.kill(os.getpid(), signal.SIGUSR2)
    time.sleep(0.5)  # the control thread takes the GIL meanwhile


work()
if MODE != "plain":
    chain523.install()
toggle()  # window 1 off
slots.append(chain523.slot())
if MODE == "chain":
    chain523.uninstall()
toggle()  # window 2 on
slots.append(chain523.slot())
for _ in range(100):
    work()
toggle()  # window 2 off
slots.append(chain523.slot())
print(" ".join(slots))
