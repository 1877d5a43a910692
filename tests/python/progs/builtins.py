"""C builtins between Python functions: key() is called 200 times by sorted()."""


def key(x):
    return -x


def use_sorted():
    return sorted(range(200), key=key)


def use_len():
    return len([1, 2, 3])


def use_append():
    items = []
    items.append(1)
    return items


use_sorted()
use_len()
use_append()
