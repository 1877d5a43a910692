"""resp_commands.py: the commands both Python RESP samples answer (resp_server.py on
asyncio, gevent_resp_server.py on gevent): GET, SET, PING, DEL, EXISTS and the CONFIG
GET that redis-benchmark sends first, on one in-memory dict."""

store = {}


def bulk(value):
    if value is None:
        return b"$-1\r\n"
    return b"$%d\r\n%s\r\n" % (len(value), value)


def execute(args):
    cmd = args[0].upper() if args else b""
    if cmd == b"GET" and len(args) == 2:
        return bulk(store.get(args[1]))
    if cmd == b"SET" and len(args) >= 3:
        store[args[1]] = args[2]
        return b"+OK\r\n"
    if cmd == b"PING":
        return b"+PONG\r\n" if len(args) < 2 else bulk(args[1])
    if cmd == b"DEL":
        return b":%d\r\n" % sum(store.pop(k, None) is not None for k in args[1:])
    if cmd == b"EXISTS":
        return b":%d\r\n" % sum(k in store for k in args[1:])
    if cmd == b"CONFIG":
        return b"*0\r\n"
    return b"-ERR unknown command\r\n"
