# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark of the mock IMDS server (roles/mock_imds/files/mock_imds.py), loopback only.

In one run:
  1. throughput: a bare stdlib HTTP server (TCP_NODELAY, one send, a fixed document) and the mock
     (rate limit off), each hit by --clients concurrent keep-alive clients for --seconds;
  2. latency: one keep-alive client against the mock, median and p99;
  3. fleet: --fleet-vms VMs each polling scheduledevents once per second for --fleet-seconds with
     the rate limit on: requests, errors and 429s.
Clients run in separate processes (raw sockets, so the client is not the bottleneck). Prints
figures and the targets; asserts nothing timed. `--quick` for a short run.
"""

import argparse
import multiprocessing
import os
import socket
import statistics
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "roles", "mock_imds", "files"))

import mock_imds  # noqa: E402  pylint: disable=wrong-import-position,import-error

PATH = "/metadata/scheduledevents?api-version=2020-07-01"


def request_bytes(path):
    return ("GET %s HTTP/1.1\r\nHost: 169.254.169.254\r\nMetadata: true\r\n\r\n" % path).encode("ascii")


def exchange(sock, request):
    """One keep-alive request/response on a raw socket; returns the status code."""
    sock.sendall(request)
    data = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("connection closed by the server")
        data += chunk
        end = data.find(b"\r\n\r\n")
        if end >= 0:
            break
    head = data[:end].lower()
    start = head.find(b"content-length:") + len(b"content-length:")
    length = int(head[start:head.find(b"\r\n", start) if head.find(b"\r\n", start) >= 0 else len(head)])
    received = len(data) - end - 4
    while received < length:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("connection closed mid-body")
        received += len(chunk)
    return int(data[9:12])


def connect(port):
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


# -- the baseline server ------------------------------------------------------------------------

class BaselineHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    document = b"{}"

    def setup(self):
        BaseHTTPRequestHandler.setup(self)
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_GET(self):  # noqa: N802 - stdlib naming
        body = self.document
        self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json; charset=utf-8\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (len(body), body))

    def log_message(self, *args):
        pass


class BaselineServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024


def start_baseline(document):
    BaselineHandler.document = document
    server = BaselineServer(("127.0.0.1", 0), BaselineHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


# -- client processes ---------------------------------------------------------------------------

def load_process(port, request, threads, start_at, seconds, results):
    """threads keep-alive clients sending as fast as they can from start_at for seconds."""
    counts = []

    def worker():
        done = errors = 0
        try:
            sock = connect(port)
        except OSError:
            counts.append((0, 1))
            return
        while time.time() < start_at:
            time.sleep(0.001)
        stop = start_at + seconds
        while time.time() < stop:
            try:
                if exchange(sock, request) == 200:
                    done += 1
                else:
                    errors += 1
            except OSError:
                errors += 1
                sock.close()
                sock = connect(port)
        sock.close()
        counts.append((done, errors))

    pool = [threading.Thread(target=worker) for _attempt in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    results.put((sum(c[0] for c in counts), sum(c[1] for c in counts)))


def latency_process(port, request, count, results):
    sock = connect(port)
    for _attempt in range(200):  # warm-up
        exchange(sock, request)
    samples = []
    for _attempt in range(count):
        began = time.perf_counter()
        exchange(sock, request)
        samples.append(time.perf_counter() - began)
    sock.close()
    results.put(samples)


def fleet_process(port, vm_numbers, vm_count, threads, start_at, seconds, results):
    """Each VM polls once per second at its own offset (vm / vm_count of a second)."""
    totals = []

    def worker(numbers):
        requests = dict((n, request_bytes("/vm/vm%04d%s" % (n, PATH))) for n in numbers)
        schedule = sorted((tick + float(n) / vm_count, n) for tick in range(int(seconds)) for n in numbers)
        sock = connect(port)
        ok = errors = limited = 0
        lag = 0.0
        for offset, number in schedule:
            due = start_at + offset
            wait = due - time.time()
            if wait > 0:
                time.sleep(wait)
            else:
                lag = max(lag, -wait)
            try:
                status = exchange(sock, requests[number])
            except OSError:
                errors += 1
                sock.close()
                sock = connect(port)
                continue
            if status == 200:
                ok += 1
            elif status == 429:
                limited += 1
            else:
                errors += 1
        sock.close()
        totals.append((ok, errors, limited, lag))

    shares = [vm_numbers[i::threads] for i in range(threads)]
    pool = [threading.Thread(target=worker, args=(share,)) for share in shares if share]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    results.put((sum(t[0] for t in totals), sum(t[1] for t in totals), sum(t[2] for t in totals),
                 max(t[3] for t in totals)))


def run_processes(ctx, target, arg_sets):
    results = ctx.Queue()
    procs = [ctx.Process(target=target, args=args + (results,)) for args in arg_sets]
    for proc in procs:
        proc.start()
    collected = [results.get() for _attempt in procs]
    for proc in procs:
        proc.join()
    return collected


# -- the three measurements ---------------------------------------------------------------------

def throughput(ctx, port, request, clients, processes, seconds):
    start_at = time.time() + 1.0 + 0.2 * processes  # every client connected before the clock starts
    share = [clients // processes + (1 if i < clients % processes else 0) for i in range(processes)]
    out = run_processes(ctx, load_process, [(port, request, n, start_at, seconds) for n in share if n])
    done = sum(o[0] for o in out)
    errors = sum(o[1] for o in out)
    return done / seconds, done, errors


def percentile(samples, fraction):
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="short run: 3 s throughput, 10 s fleet")
    parser.add_argument("--seconds", type=float, help="throughput run length per server (default 10)")
    parser.add_argument("--clients", type=int, default=50, help="concurrent keep-alive clients (default 50)")
    parser.add_argument("--processes", type=int, default=2, help="client processes (default 2)")
    parser.add_argument("--latency-requests", type=int, help="single-client requests (default 5000)")
    parser.add_argument("--fleet-vms", type=int, default=1000, help="simulated VMs (default 1000)")
    parser.add_argument("--fleet-seconds", type=float, help="fleet run length (default 60)")
    args = parser.parse_args(argv)
    seconds = args.seconds or (3.0 if args.quick else 10.0)
    fleet_seconds = args.fleet_seconds or (10.0 if args.quick else 60.0)
    latency_requests = args.latency_requests or (1000 if args.quick else 5000)
    ctx = multiprocessing.get_context("spawn")
    print("mock_imds bench: %d cores, Python %s, %d clients in %d processes"
          % (os.cpu_count() or 0, sys.version.split()[0], args.clients, args.processes))

    mock = mock_imds.MockImds(rate_limit=False)
    mock.add_event(event_type="Freeze", notice=10 ** 7, duration_in_seconds=5)
    mock.start()
    request = request_bytes(PATH)
    sock = connect(mock.port)
    sock.sendall(request)
    document = sock.recv(65536).split(b"\r\n\r\n", 1)[1]
    sock.close()

    baseline = start_baseline(document)
    base_rate, base_done, base_errors = throughput(ctx, baseline.server_address[1], request, args.clients,
                                                   args.processes, seconds)
    baseline.shutdown()
    baseline.server_close()
    print("baseline stdlib server: %8.0f req/s  (%d requests in %.0f s, %d errors)"
          % (base_rate, base_done, seconds, base_errors))
    mock_rate, mock_done, mock_errors = throughput(ctx, mock.port, request, args.clients, args.processes, seconds)
    print("mock (rate limit off):  %8.0f req/s  (%d requests in %.0f s, %d errors)"
          % (mock_rate, mock_done, seconds, mock_errors))
    print("ratio mock/baseline:    %8.2f        (target >= 0.80)" % (mock_rate / base_rate if base_rate else 0))

    (samples,) = run_processes(ctx, latency_process, [(mock.port, request, latency_requests)])
    print("latency, 1 client:      median %.3f ms, p99 %.3f ms over %d requests (target median < 1 ms)"
          % (statistics.median(samples) * 1000, percentile(samples, 0.99) * 1000, len(samples)))
    mock.stop()

    groups = [{"name": "avset%02d" % g, "kind": "availability_set",
               "vms": ["vm%04d" % n for n in range(g * 50, min(args.fleet_vms, (g + 1) * 50))]}
              for g in range((args.fleet_vms + 49) // 50)]
    fleet_mock = mock_imds.MockImds(rate_limit=True, fleet={"default_vm": "vm0000", "groups": groups}).start()
    start_at = time.time() + 1.5
    numbers = list(range(args.fleet_vms))
    out = run_processes(ctx, fleet_process, [(fleet_mock.port, numbers[i::args.processes], args.fleet_vms, 10,
                                              start_at, fleet_seconds) for i in range(args.processes)])
    fleet_mock.stop()
    ok, errors, limited = sum(o[0] for o in out), sum(o[1] for o in out), sum(o[2] for o in out)
    print("fleet: %d VMs x %.0f s polling 1/s, rate limit on: %d requests, %d errors, %d x 429, "
          "worst client lag %.3f s (target 0 errors, 0 x 429)"
          % (args.fleet_vms, fleet_seconds, ok + errors + limited, errors, limited, max(o[3] for o in out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
