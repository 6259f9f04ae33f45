"""Issue 22, item 9: the /metrics port serves from one thread, whatever clients do. It used to start
a thread per connection with no timeout (500 idle connections: 502 threads)."""

import socket
import threading
import urllib.request

import pytest

from ansible_collections.azure_imds.scheduled_events.roles.watcher.files.scheduled_events_watcher import metrics as watcher_metrics

IDLE_CONNECTIONS = 500


@pytest.fixture
def server():
    metrics = watcher_metrics.WatcherMetrics("test", 0.0)
    metrics.polled("ok", 0.01, 1.0)
    running = watcher_metrics.serve(metrics, 0)
    yield running
    running.shutdown()
    running.server_close()


def scrape(port, path="/metrics"):
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open("http://127.0.0.1:%d%s" % (port, path), timeout=30) as answer:
        return answer.status, answer.headers["Content-Type"], answer.read().decode("utf-8")


def open_connections(port, count, first_bytes=b""):
    clients = []
    for _number in range(count):
        client = socket.create_connection(("127.0.0.1", port), timeout=30)
        if first_bytes:
            client.sendall(first_bytes)
        clients.append(client)
    return clients


@pytest.mark.parametrize("first_bytes", [b"", b"GET /metrics HTTP/1.1\r\nHost: 127"], ids=["idle", "half-request"])
def test_many_idle_connections_make_no_thread_and_a_scrape_still_answers(server, first_bytes):
    before = threading.active_count()
    port = server.server_address[1]
    clients = open_connections(port, IDLE_CONNECTIONS, first_bytes)
    try:
        status, content_type, body = scrape(port)
        assert status == 200 and content_type == watcher_metrics.CONTENT_TYPE
        assert 'azure_imds_watcher_polls_total{outcome="ok"} 1' in body
        assert threading.active_count() == before, [t.name for t in threading.enumerate()]
        # The connections beyond the cap were closed by the server (the quietest first).
        closed = 0
        for client in clients:
            client.settimeout(0.0)
            try:
                closed += client.recv(1) == b""
            except BlockingIOError:
                pass
            except ConnectionResetError:
                closed += 1
        assert closed >= IDLE_CONNECTIONS - watcher_metrics.MAX_CONNECTIONS
    finally:
        for client in clients:
            client.close()


def test_other_paths_and_methods_and_oversized_heads(server):
    port = server.server_address[1]
    with pytest.raises(urllib.error.HTTPError) as info:
        scrape(port, "/other")
    assert info.value.code == 404
    for request, status in ((b"POST /metrics HTTP/1.1\r\n\r\n", b"405"), (b"nonsense\r\n\r\n", b"400"),
                            (b"GET /metrics HTTP/1.1\r\nX: " + b"a" * 10000, b"431")):
        with socket.create_connection(("127.0.0.1", port), timeout=30) as client:
            client.sendall(request)
            assert client.recv(65536).startswith(b"HTTP/1.1 " + status + b" "), request[:30]
    assert scrape(port)[0] == 200
