#!/usr/bin/env python3
"""What one open connection costs routerd, by the connection's state.

Starts routerd on loopback with a fresh data directory, registers N
devices, then opens N connections and moves them through four states,
reading routerd's anonymous memory (/proc/PID/smaps_rollup) after each
has settled:

  silent      accepted, nothing sent yet;
  kept alive  one lease answered, the connection left open;
  held        each holding a long poll (wait_s 30, no work to grant);
  closed      every connection closed again (what the allocator kept).

Prints one line per state: bytes per connection above the registered
population's baseline (docs/router.md, "The small box"). The client is
this process, so its own buffers are not counted.

usage: ci/conn-census.py [--routerd PATH] [--connections N]
                         [--settle-s S] [-- ROUTERD ARGS...]
  defaults: target/release/routerd, 2,000 connections, 3 s.
Exit 1 if routerd does not start or a request is refused.
"""

import argparse
import json
import re
import socket
import subprocess
import sys
import tempfile
import time

TOKEN = "census-token"


def anonymous_kib(pid):
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Anonymous:"):
                return int(line.split()[1])
    raise RuntimeError("no Anonymous line in smaps_rollup")


def post(sock, path, body):
    data = json.dumps(body).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nhost: routerd\r\n"
        f"content-type: application/json\r\ncontent-length: {len(data)}\r\n\r\n"
    )
    sock.sendall(head.encode() + data)


def answer(sock):
    """One answer's status and JSON body."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise RuntimeError("routerd closed the connection")
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    length = int(re.search(rb"content-length: (\d+)", head, re.I).group(1))
    while len(body) < length:
        body += sock.recv(65536)
    status = int(head.split(b" ", 2)[1])
    return status, json.loads(body)


def start(routerd, n, extra):
    data = tempfile.mkdtemp(prefix="conn-census-")
    args = [
        routerd, "--data", data, "--listen", "127.0.0.1:0",
        "--registration-token", TOKEN, "--operator-key", "census-operator",
        # Room for every connection and poll, and no timeout while counting.
        "--max-connections", str(n + 64), "--max-held-polls", str(n),
        "--idle-s", "600", "--keep-alive-s", "600", "--request-s", "700",
        "--device-rate", "1000,1000", "--purge-delay-ms", "0",
        "--registration-address-rate", f"{n + 1000},1000",
    ] + extra
    proc = subprocess.Popen(args, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    for line in proc.stdout:
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
        if m:
            return proc, int(m.group(1))
    raise RuntimeError(f"routerd did not start (exit {proc.wait()})")


def main():
    extra = []
    argv = sys.argv[1:]
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--routerd", default="target/release/routerd")
    ap.add_argument("--connections", type=int, default=2000)
    ap.add_argument("--settle-s", type=float, default=3.0)
    a = ap.parse_args(argv)
    n = a.connections
    if not 1 <= n <= 20000:
        ap.error("--connections takes 1..=20000")
    proc, port = start(a.routerd, n, extra)
    try:
        secrets = []
        with socket.create_connection(("127.0.0.1", port)) as c:
            for i in range(n):
                post(c, "/v1/register", {
                    "device_id": f"census-{i}", "archetype": "browser",
                    "capabilities": ["render"], "adapter_version": "1",
                    "registration_token": TOKEN})
                status, body = answer(c)
                if status != 200:
                    raise RuntimeError(f"registration refused: {body}")
                secrets.append(body["device_secret"])

        def settled():
            time.sleep(a.settle_s)
            return anonymous_kib(proc.pid)

        def lease(i, wait_s):
            body = {"device_id": f"census-{i}", "device_secret": secrets[i],
                    "max_items": 8}
            if wait_s:
                body["wait_s"] = wait_s
            return body

        base = settled()
        print(f"routerd with {n} registered devices: {base} KiB anonymous")
        rows = []
        socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(n)]
        rows.append(("silent", settled()))
        for i, s in enumerate(socks):
            post(s, "/v1/lease", lease(i, 0))
        for s in socks:
            status, body = answer(s)
            if status != 200:
                raise RuntimeError(f"lease refused: {body}")
        rows.append(("kept alive", settled()))
        for i, s in enumerate(socks):
            post(s, "/v1/lease", lease(i, 30))
        rows.append(("held", settled()))
        for s in socks:
            s.close()
        rows.append(("closed", settled()))
        print(f"{'state':<12}{'bytes per connection':>22}")
        for state, kib in rows:
            print(f"{state:<12}{(kib - base) * 1024 / n:>22,.0f}")
    finally:
        proc.kill()
        proc.wait()


if __name__ == "__main__":
    try:
        main()
    except (RuntimeError, OSError) as e:
        print(f"conn-census: {e}", file=sys.stderr)
        sys.exit(1)
