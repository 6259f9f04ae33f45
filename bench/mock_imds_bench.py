# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark of the mock IMDS server (roles/mock_imds/files/mock_imds/), loopback only.

In one run:
  1. throughput: a bare stdlib HTTP server (TCP_NODELAY, one send, a fixed document) and the mock
     (rate limit off), each hit by --clients concurrent keep-alive clients for --seconds;
  2. latency: one keep-alive client against the mock, median and p99;
  3. fleet: the mock as its own process (as the role runs it) with --fleet-vms VMs in availability
     sets of 50, each VM on its own connection polling scheduledevents once per second for
     --fleet-seconds with the rate limit on, while a driver adds an event every second (seen by the
     whole set) and cancels some, and each event's leader approves it: answers, errors, 429s, the
     worst lag from a poll's due time to its answer, and the mock's CPU.
Clients run in separate processes (raw sockets, so the client is not the bottleneck). Prints the
figures and the targets and exits 1 when a target fails. `--quick` for a short run.
"""

import argparse
import json
import multiprocessing
import os
import random
import shutil
import socket
import statistics
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

try:
    from ansible_collections.azure_imds.scheduled_events.roles.mock_imds.files import mock_imds
    from ansible_collections.azure_imds.scheduled_events.roles.mock_imds.files.mock_imds.testing import MockControlError, spawn_mock
except ModuleNotFoundError as missing:
    sys.exit("mock_imds_bench.py: %s: run it with `make bench` (tests/harness/loopback-only puts this checkout on the import path)" % missing)

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


class FleetClient(object):
    """One simulated VM: its own keep-alive connection, one poll per second at its own offset,
    and, when it leads an event (first name in Resources), one approval of it."""

    def __init__(self, port, name):
        self.name = name
        self.sock = connect(port)
        self.sock.setblocking(False)
        self.get = request_bytes("/vm/%s%s" % (name, PATH))
        self.buffer = b""
        self.busy_since = None   # due time of the request in flight
        self.queued = []         # due times of polls that found the connection busy
        self.to_approve = []     # approvals waiting for the connection
        self.approved = set()
        self.last_incarnation = None
        self.doc_changes = 0

    def send(self, request, due):
        self.busy_since = due
        self.buffer = b""
        self.sock.sendall(request)

    def approval(self, event_ids):
        body = ('{"StartRequests":[%s]}' % ",".join('{"EventId":"%s"}' % e for e in event_ids)).encode("ascii")
        return (("POST /vm/%s%s HTTP/1.1\r\nHost: 169.254.169.254\r\nMetadata: true\r\n"
                 "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n") % (self.name, PATH, len(body))
                ).encode("ascii") + body

    def response(self):
        """(status, body) once a whole response is in the buffer, else None."""
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0:
            return None
        head = self.buffer[:end].lower()
        start = head.find(b"content-length:")
        length = int(head[start + 15:].split(b"\r\n", 1)[0]) if start >= 0 else 0
        if len(self.buffer) < end + 4 + length:
            return None
        return int(self.buffer[9:12]), self.buffer[end + 4:end + 4 + length]


def fleet_process(port, names, vm_count, start_at, seconds, results):
    """Every VM of names polls once per second for seconds; leaders approve what they lead.
    Reports requests, errors, 429s, approvals, document changes seen and the worst lag (from the
    moment a poll was due to its complete answer)."""
    import json  # pylint: disable=import-outside-toplevel
    import selectors  # pylint: disable=import-outside-toplevel
    import heapq  # pylint: disable=import-outside-toplevel

    selector = selectors.DefaultSelector()
    clients = []
    for name in names:
        client = FleetClient(port, name)
        selector.register(client.sock, selectors.EVENT_READ, client)
        clients.append(client)
    schedule = [(start_at + tick + float(index % vm_count) / vm_count, i)
                for i, index in enumerate(int(c.name[2:]) for c in clients) for tick in range(int(seconds))]
    heapq.heapify(schedule)
    stats = {"ok": 0, "errors": 0, "limited": 0, "approvals": 0, "lag": 0.0, "lags": [], "changes": 0}
    while schedule or any(c.busy_since is not None or c.queued for c in clients):
        now = time.time()
        while schedule and schedule[0][0] <= now:
            due, i = heapq.heappop(schedule)
            client = clients[i]
            if client.busy_since is None:
                client.send(client.get, due)
            else:
                client.queued.append(due)
        timeout = max(0.0, min(0.05, schedule[0][0] - time.time())) if schedule else 0.05
        for key, _mask in selector.select(timeout):
            client = key.data
            try:
                chunk = client.sock.recv(65536)
            except OSError:
                chunk = b""
            if not chunk:
                stats["errors"] += 1
                selector.unregister(client.sock)
                client.sock.close()
                client.busy_since = None
                client.queued = []
                continue
            client.buffer += chunk
            answer = client.response()
            if answer is None:
                continue
            status, body = answer
            done = time.time()
            lag = done - client.busy_since
            stats["lags"].append(lag)
            stats["lag"] = max(stats["lag"], lag)
            client.busy_since = None
            if status == 429:
                stats["limited"] += 1
            elif status != 200:
                stats["errors"] += 1
            elif body:
                stats["ok"] += 1
                doc = json.loads(body.decode("utf-8"))
                if doc["DocumentIncarnation"] != client.last_incarnation:
                    client.last_incarnation = doc["DocumentIncarnation"]
                    client.doc_changes += 1
                lead = [e["EventId"] for e in doc["Events"] if e["EventStatus"] == "Scheduled"
                        and e["Resources"][0] == client.name and e["EventId"] not in client.approved]
                if lead:
                    client.approved.update(lead)
                    client.to_approve.append(lead)
            else:
                stats["ok"] += 1  # an approval's empty 200
            if client.queued:
                client.send(client.get, client.queued.pop(0))
            elif client.to_approve and schedule:
                stats["approvals"] += 1
                client.send(client.approval(client.to_approve.pop(0)), done)
    for client in clients:
        stats["changes"] += client.doc_changes
        client.sock.close()
    lags = sorted(stats.pop("lags")) or [0.0]
    stats["p99"] = lags[min(len(lags) - 1, int(len(lags) * 0.99))]
    results.put(stats)


def fleet_driver(control, groups, seconds, stop):
    """Keeps events present and changing: every second a new event for one VM of a group (seen by
    the whole set), now and then a cancellation; leaders approve them, the clock removes them."""
    rng = random.Random(7)
    created = 0
    began = time.time()
    while not stop.is_set() and time.time() - began < seconds:
        group = rng.choice(groups)
        vms = sorted(rng.sample(group["vms"], 2))
        # Generous timeouts: the mock serves the whole fleet meanwhile, on a machine that may be busy.
        event = control("POST", "events", {"event_type": rng.choice(["Freeze", "Reboot", "Redeploy"]),
                                           "resources": vms, "notice": 20, "duration": 15}, timeout=60)
        created += 1
        if created % 10 == 0:
            try:
                control("POST", "events/%s/cancel" % event["event_id"], None, timeout=60)
            except MockControlError as exc:
                # A leader may have approved it (and so started it) since it was created.
                if exc.status != 400:
                    raise
        stop.wait(1.0)
    return created


def process_cpu_seconds(pid):
    """User + system CPU seconds of a process, from /proc (Linux)."""
    with open("/proc/%d/stat" % pid) as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / float(os.sysconf("SC_CLK_TCK"))


def fleet_run(ctx, args, seconds):
    """The mock as its own process (python3 DIR, as the role runs it) so that its CPU is its own."""
    groups = [{"name": "avset%02d" % g, "kind": "availability_set",
               "vms": ["vm%04d" % n for n in range(g * 50, min(args.fleet_vms, (g + 1) * 50))]}
              for g in range((args.fleet_vms + 49) // 50)]
    workdir = tempfile.mkdtemp(prefix="mock_imds_bench_")
    fleet_file = os.path.join(workdir, "fleet.json")
    with open(fleet_file, "w") as handle:
        json.dump({"default_vm": "vm0000", "groups": groups}, handle)
    handle = spawn_mock(["--fleet", fleet_file, "--quiet"], timeout=60)
    try:
        names = ["vm%04d" % n for n in range(args.fleet_vms)]
        start_at = time.time() + 3.0
        stop = threading.Event()
        created = []
        driver = threading.Thread(target=lambda: created.append(
            fleet_driver(handle.control, groups, seconds, stop)))
        queue = ctx.Queue()
        procs = [ctx.Process(target=fleet_process, args=(handle.port, names[i::args.processes], args.fleet_vms,
                                                         start_at, seconds, queue))
                 for i in range(args.processes)]
        for proc in procs:
            proc.start()
        time.sleep(max(0.0, start_at - time.time()))
        cpu_before, wall_before = process_cpu_seconds(handle.process.pid), time.time()
        driver.start()
        out = [queue.get() for _proc in procs]
        cpu = (process_cpu_seconds(handle.process.pid) - cpu_before) / (time.time() - wall_before)
        stop.set()
        driver.join()
        for proc in procs:
            proc.join()
        audit = handle.control("GET", "audit", timeout=120)
        by_approval = sum(1 for t in audit["transitions"] if t["to"] == "Started" and t["cause"] == "approval")
    finally:
        handle.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    total = dict((key, sum(o[key] for o in out)) for key in ("ok", "errors", "limited", "approvals", "changes"))
    total["lag"] = max(o["lag"] for o in out)
    total["p99"] = max(o["p99"] for o in out)
    total["cpu"] = cpu
    total["events"] = created[0] if created else 0
    total["started_by_approval"] = by_approval
    return total


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

    fleet = fleet_run(ctx, args, fleet_seconds)
    print("fleet: %d VMs, each its own connection, polling 1/s for %.0f s, rate limit on, %d events added "
          "(broadcast to sets of 50), %d approvals sent, %d events started by approval"
          % (args.fleet_vms, fleet_seconds, fleet["events"], fleet["approvals"], fleet["started_by_approval"]))
    print("fleet: %d answers, %d errors, %d x 429, %d document changes seen, worst lag %.3f s, p99 lag %.3f s, "
          "mock CPU %.0f%% of one core"
          % (fleet["ok"], fleet["errors"], fleet["limited"], fleet["changes"], fleet["lag"], fleet["p99"],
             fleet["cpu"] * 100))
    targets = [
        ("throughput mock/baseline >= 0.80", bool(base_rate) and mock_rate / base_rate >= 0.80),
        ("latency median < 1 ms", statistics.median(samples) < 0.001),
        ("fleet: 0 errors", fleet["errors"] == 0),
        ("fleet: 0 x 429", fleet["limited"] == 0),
        ("fleet: worst lag < 1 s (an answer before the next poll)", fleet["lag"] < 1.0),
        ("fleet: approvals flowed and started events", fleet["approvals"] > 0 and fleet["started_by_approval"] > 0),
        ("fleet: mock CPU < 90% of one core", fleet["cpu"] < 0.90),
    ]
    for name, ok in targets:
        print("target %-58s %s" % (name, "ok" if ok else "FAILED"))
    failed = [name for name, ok in targets if not ok]
    if failed:
        print("mock_imds bench: %d target(s) failed: %s" % (len(failed), "; ".join(failed)))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
