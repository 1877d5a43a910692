# work.py: the viewer tests' Python workload, with known counts: leaf is called 50
# times, fib(12) makes 465 calls (464 recursive), and builtins.sum has the most own time.
def leaf(n):
    return sum(range(n * 20))


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def work():
    for i in range(50):
        leaf(1000)
    fib(12)


work()
