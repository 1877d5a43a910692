"""resp.py: the throughput of a RESP server sample, for bench/native/run.py and
runtimes.py."""
import subprocess


def rps(prefix, prog, port_of, cwd):
    """Requests per second of `prog` (a RESP server taking port 0) started under `prefix`
    in `cwd`, by redis-benchmark's GET and SET: {"GET": rps, "SET": rps}. `port_of` reads
    the port from the server's first line."""
    p = subprocess.Popen(prefix + [prog, "0"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         text=True, cwd=cwd)
    port = port_of(p.stdout.readline())
    out = subprocess.run(["redis-benchmark", "-h", "127.0.0.1", "-p", port, "-t", "get,set",
                          "-n", "50000", "-c", "20", "-q", "--csv"],
                         capture_output=True, text=True, timeout=300).stdout
    p.terminate()
    p.wait(timeout=30)
    got = {}
    for line in out.splitlines():
        f = [x.strip('"') for x in line.split(",")]
        if f[0] in ("SET", "GET"):
            got[f[0]] = float(f[1])
    return got
