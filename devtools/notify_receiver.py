"""A stand-in for a notification receiver (an ansible-rulebook webhook source) on 127.0.0.1: it
records every POST (path, headers, JSON body) and answers as told. Used by the notify tests and
by bench/watcher_kill_soak.py. Standard library only."""

import http.server
import json
import random
import socket
import socketserver
import subprocess
import threading
import time

# The notify tests' own ports (other suites use other ranges).
PORTS = range(28650, 28700)


def free_port():
    """A port of PORTS nobody listens on now (for a receiver that starts later on it)."""
    ports = list(PORTS)
    random.shuffle(ports)
    for port in ports:
        probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            continue
        finally:
            probe.close()
        return port
    raise RuntimeError("no free port in %d-%d" % (PORTS[0], PORTS[-1]))


class _Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class Receiver(object):
    """start(port=None) ... stop(). posts: list of {"path", "headers", "body", "time"}.
    status: what to answer; hold: while set, answers wait (a receiver that hangs)."""

    def __init__(self):
        self.posts = []
        self.status = 200
        self.release = threading.Event()
        self.release.set()
        self.arrived = threading.Condition()
        self.server = None
        self.port = None

    def start(self, port=None, tls=None):
        """tls: (certificate file, key file) to answer https."""
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802  pylint: disable=invalid-name
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw.decode("utf-8"))
                except ValueError:
                    body = {"unparsable": raw.decode("utf-8", "replace")}
                with receiver.arrived:
                    receiver.arrivals += 1
                    receiver.arrived.notify_all()
                receiver.release.wait(120)
                status = receiver.status
                with receiver.arrived:
                    if 200 <= status < 300:
                        receiver.posts.append({"path": self.path, "headers": dict(self.headers.items()),
                                               "body": body, "time": time.time()})
                    else:
                        receiver.refused.append({"path": self.path, "status": status, "body": body})
                    receiver.arrived.notify_all()
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):  # pylint: disable=arguments-differ
                pass

        self.refused = []
        self.arrivals = 0
        self.server = _Server(("127.0.0.1", port or free_port()), Handler)
        self.port = self.server.server_address[1]
        self.scheme = "http"
        if tls is not None:
            import ssl  # pylint: disable=import-outside-toplevel
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
            self.scheme = "https"
        thread = threading.Thread(target=self.server.serve_forever, name="receiver")
        thread.daemon = True
        thread.start()
        return self

    @property
    def url(self):
        return "%s://127.0.0.1:%d/endpoint" % (self.scheme, self.port)

    def stop(self):
        if self.server is not None:
            self.release.set()
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def bodies(self):
        with self.arrived:
            return [post["body"] for post in self.posts]

    def wait_for(self, predicate, timeout):
        """Wait until predicate(bodies) is true; returns it. timeout only bounds a hang."""
        return self.wait_until(lambda: predicate([post["body"] for post in self.posts]), timeout)

    def wait_until(self, condition, timeout):
        """Wait until condition() (called under the receiver's lock) is true; returns it."""
        end = time.monotonic() + timeout
        with self.arrived:
            while True:
                result = condition()
                left = end - time.monotonic()
                if result or left <= 0:
                    return result
                self.arrived.wait(min(left, 0.5))


def self_signed_certificate(directory):
    """(certificate, key) for 127.0.0.1, made by openssl (which the notify TLS tests need)."""
    cert, key = "%s/receiver.crt" % directory, "%s/receiver.key" % directory
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", key, "-out", cert],
                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=True, timeout=120)
    return cert, key
