#!/usr/bin/env python3
"""Raw TCP round trip and stream rate between two emulated nodes (docs/emulated-cluster.md).

  tcp_probe.py serve [--port P]                       echo server: ping-pong and sink, forever
  tcp_probe.py rtt HOST [--port P] [--count N] [--size B]
      round trips of B-byte messages (TCP_NODELAY); prints min/median/p99 in us
  tcp_probe.py stream HOST [--port P] [--seconds S] [--streams K]
      K TCP streams of 1 MiB writes for S seconds; prints the rate in Gbit/s and MB/s

Run the server in one node and the client in another, e.g.
  ip netns exec dlsim-emu-2 tcp_probe.py serve &
  ip netns exec dlsim-emu-1 tcp_probe.py rtt 10.78.0.3
"""
import argparse
import socket
import socketserver
import statistics
import struct
import threading
import time

PORT = 5201
CHUNK = 1 << 20


class Handler(socketserver.BaseRequestHandler):
    # First byte says the mode: 'p' ping-pong (4-byte length, then echo), 's' sink.
    def handle(self):
        s = self.request
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        mode = s.recv(1)
        if mode == b"p":
            size = struct.unpack("!I", recv_exact(s, 4))[0]
            while True:
                msg = recv_exact(s, size)
                if not msg:
                    return
                s.sendall(msg)
        elif mode == b"s":
            buf = bytearray(CHUNK)
            while s.recv_into(buf):
                pass


def recv_exact(s, n):
    data = bytearray()
    while len(data) < n:
        part = s.recv(n - len(data))
        if not part:
            return b""
        data += part
    return bytes(data)


def serve(args):
    socketserver.ThreadingTCPServer.allow_reuse_address = True
    socketserver.ThreadingTCPServer.daemon_threads = True
    with socketserver.ThreadingTCPServer(("0.0.0.0", args.port), Handler) as server:
        server.serve_forever()


def rtt(args):
    s = socket.create_connection((args.host, args.port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.sendall(b"p" + struct.pack("!I", args.size))
    msg = b"x" * args.size
    times = []
    for i in range(args.count + 10):
        t0 = time.perf_counter()
        s.sendall(msg)
        recv_exact(s, args.size)
        if i >= 10:  # the first round trips warm the connection up
            times.append((time.perf_counter() - t0) * 1e6)
    s.close()
    times.sort()
    p99 = times[min(len(times) - 1, int(0.99 * len(times)))]
    print(f"rtt {args.size} B x {args.count}: min {times[0]:.0f} us, "
          f"median {statistics.median(times):.0f} us, p99 {p99:.0f} us")


def stream(args):
    total = [0] * args.streams
    deadline = time.perf_counter() + args.seconds

    def one(k):
        s = socket.create_connection((args.host, args.port))
        s.sendall(b"s")
        buf = b"\0" * CHUNK
        while time.perf_counter() < deadline:
            s.sendall(buf)
            total[k] += CHUNK
        s.close()

    t0 = time.perf_counter()
    threads = [threading.Thread(target=one, args=(k,)) for k in range(args.streams)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    secs = time.perf_counter() - t0
    rate = sum(total) / secs
    print(f"stream x{args.streams} {secs:.1f} s: {rate * 8 / 1e9:.3f} Gbit/s "
          f"({rate / 1e6:.1f} MB/s)")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("serve")
    a.add_argument("--port", type=int, default=PORT)
    a = sub.add_parser("rtt")
    a.add_argument("host")
    a.add_argument("--port", type=int, default=PORT)
    a.add_argument("--count", type=int, default=2000)
    a.add_argument("--size", type=int, default=8)
    a = sub.add_parser("stream")
    a.add_argument("host")
    a.add_argument("--port", type=int, default=PORT)
    a.add_argument("--seconds", type=float, default=5)
    a.add_argument("--streams", type=int, default=1)
    args = p.parse_args()
    {"serve": serve, "rtt": rtt, "stream": stream}[args.cmd](args)


if __name__ == "__main__":
    main()
