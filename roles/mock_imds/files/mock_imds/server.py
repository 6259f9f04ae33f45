# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""HTTP: the request handler, the threaded server and MockImds, the object tests start."""

from __future__ import print_function

import email.utils
import ipaddress
import json
import socket
import struct
import tempfile
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from socketserver import TCPServer
from urllib.parse import urlsplit

from .checks import MockError
from .control import control
from .imds import Response
from .rules import CONTROL_PREFIX, REDIRECT_TRAP, _error_bytes
from .state import MockState


_REASONS = dict((s.value, s.phrase) for s in HTTPStatus)
_DATE_CACHE = [0, ""]


def _http_date():
    now = int(time.time())
    if _DATE_CACHE[0] != now:
        _DATE_CACHE[1] = email.utils.formatdate(now, usegmt=True)
        _DATE_CACHE[0] = now
    return _DATE_CACHE[1]


class _Headers(dict):
    """Request headers by lower-case name (the first occurrence wins); get() ignores case."""

    def get(self, name, default=None):
        return dict.get(self, name.lower(), default)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    MAX_HEADERS = 100

    def version_string(self):
        return "mock_imds"

    def setup(self):
        BaseHTTPRequestHandler.setup(self)
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.connections.add(self.connection)

    def finish(self):
        try:
            BaseHTTPRequestHandler.finish(self)
        finally:
            self.server.connections.discard(self.connection)

    def handle_one_request(self):
        try:
            self.raw_requestline = self.rfile.readline(65537)
            if len(self.raw_requestline) > 65536:
                self._refuse_long_request_line()
                return
            if not self.raw_requestline:
                self.close_connection = True
                return
            if not self.parse_request():
                return
            self._dispatch()
        except (socket.timeout, ConnectionError, OSError):
            self.close_connection = True

    def _refuse_long_request_line(self):
        """414, then the connection closes. send_error logs the request line and looks at the method
        and version, which no parse has set yet; the rest of the line is read (up to a bound) so that
        closing with unread bytes does not reset the connection before the client has the answer."""
        self.command, self.request_version = None, "HTTP/1.0"
        self.requestline = "%s..." % self.raw_requestline[:64].decode("iso-8859-1")
        self.close_connection = True
        self.send_error(414, "Request line longer than 65536 bytes")
        for _chunk in range(16):
            if self.rfile.readline(65537).endswith(b"\n"):
                break

    def parse_request(self):
        """Replaces BaseHTTPRequestHandler.parse_request, whose email-based header parser costs
        more than everything else the mock does for a request. Same outcome for HTTP/1.0 and 1.1:
        command, path, request_version, headers, close_connection, 100-continue."""
        self.command = None
        self.request_version = "HTTP/1.0"
        self.close_connection = True
        self.requestline = self.raw_requestline.decode("iso-8859-1").rstrip("\r\n")
        words = self.requestline.split()
        if len(words) != 3 or not words[2].startswith("HTTP/"):
            self.send_error(400, "Bad request line %r" % self.requestline)
            return False
        self.command, self.path, version = words
        if version not in ("HTTP/1.0", "HTTP/1.1"):
            self.send_error(505, "HTTP version %s is not supported" % version)
            return False
        self.request_version = version
        headers = _Headers()
        last = None
        for _attempt in range(self.MAX_HEADERS + 1):
            raw = self.rfile.readline(65537)
            if len(raw) > 65536:
                self.send_error(431, "Header line too long")
                return False
            if raw in (b"\r\n", b"\n", b""):
                break
            text = raw.decode("iso-8859-1").rstrip("\r\n")
            if text[:1] in (" ", "\t") and last is not None:  # obsolete line folding
                headers[last] += " " + text.strip()
                continue
            name, colon, value = text.partition(":")
            if not colon or not name or name != name.strip():
                self.send_error(400, "Bad header line %r" % text)
                return False
            name = name.lower()
            last = name if name not in headers else None
            headers.setdefault(name, value.strip())
        else:
            self.send_error(431, "Too many headers")
            return False
        self.headers = headers
        connection = headers.get("connection", "").lower()
        self.close_connection = connection == "close" or (version == "HTTP/1.0" and connection != "keep-alive")
        if version == "HTTP/1.1" and headers.get("expect", "").lower() == "100-continue":
            return self.handle_expect_100()
        return True

    def _read_body(self):
        length = self.headers.get("Content-Length")
        if length is None:
            if self.headers.get("Transfer-Encoding"):
                self._write(Response(411, _error_bytes("Send a Content-Length; chunked bodies are not supported")))
                self.close_connection = True
                return None
            return b""
        if not length.strip().isdigit() or int(length) > 1 << 20:
            self.close_connection = True
            self._write(Response(400, _error_bytes("Bad Content-Length")))
            return None
        return self.rfile.read(int(length)) if int(length) else b""

    def _dispatch(self):
        started = time.monotonic()
        mock = self.server.mock
        state = mock.state
        raw = self.path
        if not raw.startswith("/"):
            parts = urlsplit(raw)
            raw = (parts.path or "/") + ("?" + parts.query if parts.query else "")
        path, _sep, query = raw.partition("?")
        body = self._read_body()
        if body is None:
            return
        if path.startswith(CONTROL_PREFIX):
            response = self._control(mock, state, path[len(CONTROL_PREFIX):], query, body)
            vm = "-"
        else:
            if path.startswith("/vm/"):
                vm, _sep, rest = path[4:].partition("/")
                path = "/" + rest
            else:
                vm = state.default_vm()
            if not state.has_vm(vm):
                response = Response(404, _error_bytes("mock_imds: no VM named %s in the fleet" % vm))
            else:
                try:
                    response = self._imds(mock, state, vm, path, query, body)
                except Exception as exc:  # pylint: disable=broad-except
                    # A bug of the mock must not take the IMDS side down: answer, log, go on.
                    response = Response(500, _error_bytes("mock_imds internal error: %s" % exc))
                    if mock.log is not None:
                        mock.log("internal error on %s %s: %r" % (self.command, self.path, exc))
        if mock.log is not None:
            # Logged before the answer is sent, so that the log keeps the order of the requests
            # even when the client's next request arrives on another connection.
            status = response.status if response is not None else "-"
            elapsed = (time.monotonic() - started) * 1000
            mock.log('%s %s "%s %s" %s %.1fms' % (self.client_address[0], vm, self.command, self.path, status, elapsed))
        if response is not None:
            self._write(response)

    def _imds(self, mock, state, vm, path, query, body):
        arrival = time.time()
        admission = state.admit(vm, self.command, path)
        if admission.delay and mock.stopping.wait(admission.delay):
            self.close_connection = True
            return None
        response = state.respond(vm, self.command, path, query, self.headers, body, admission, arrival)
        if response.action == "drop":
            self.close_connection = True
            return None
        if response.action == "reset":
            self.close_connection = True
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
            return None
        return response

    def _control(self, mock, state, path, query, body):
        try:
            if path != REDIRECT_TRAP[len(CONTROL_PREFIX):]:
                check_control_request(mock, self.headers, body)
            status, obj = control(state, self.command, path, query, body)
        except MockError as exc:
            status, obj = exc.status, {"error": str(exc)}
        except Exception as exc:  # pylint: disable=broad-except
            # Whatever goes wrong, the caller gets JSON and the connection stays usable.
            status, obj = 500, {"error": "mock_imds internal error (a bug of the mock): %r" % (exc,)}
            if mock.log is not None:
                mock.log("internal error on %s /_mock/%s: %r" % (self.command, path, exc))
        return Response(status, (json.dumps(obj, indent=2) + "\n").encode("utf-8"))

    def _write(self, response):
        length = response.size if response.action == "oversize" else len(response.body)
        parts = ["HTTP/1.1 %d %s\r\n" % (response.status, _REASONS.get(response.status, "Unknown")),
                 "Date: %s\r\nContent-Length: %d\r\n" % (_http_date(), length)]
        if response.content_type:
            parts.append("Content-Type: %s\r\n" % response.content_type)
        for name, value in response.headers:
            parts.append("%s: %s\r\n" % (name, value))
        if self.close_connection:
            parts.append("Connection: close\r\n")
        parts.append("\r\n")
        data = "".join(parts).encode("latin-1")
        if self.command != "HEAD":
            data += response.body
        if response.action == "trickle":
            self._trickle(data, response.interval)
        elif response.action == "oversize":
            self.wfile.write(data)
            self._pad(length - len(response.body))
        else:
            self.wfile.write(data)

    def _trickle(self, data, interval):
        # One byte at a time, headers included, so that a client with a per-read timeout never
        # times out while a client with a per-request deadline must give up.
        stopping = self.server.mock.stopping
        self.close_connection = True
        for index in range(len(data)):
            if stopping.wait(interval if index else 0):
                return
            try:
                self.wfile.write(data[index:index + 1])
                self.wfile.flush()
            except OSError:
                return

    def _pad(self, remaining):
        # JSON allows white space after the document: the padded answer stays valid JSON, so only
        # a client's size cap can refuse it.
        chunk = b" " * 65536
        try:
            while remaining > 0:
                self.wfile.write(chunk[:remaining])
                remaining -= len(chunk)
        except OSError:
            self.close_connection = True

    def log_message(self, fmt, *args):
        log = self.server.mock.log
        if log is not None:
            log("%s %s" % (self.client_address[0], fmt % args))


class _ArmHandler(_Handler):
    """The control-plane face: TLS, Resource Manager routes only (no control API, no IMDS)."""

    def setup(self):
        self.request.settimeout(30)
        self.request = self.server.tls.wrap_socket(self.request, server_side=True)
        _Handler.setup(self)

    def _dispatch(self):
        mock = self.server.mock
        path, _sep, query = self.path.partition("?")
        body = self._read_body()
        if body is None:
            return
        try:
            response = mock.state.arm_respond(self.command, path, query, self.headers, body)
        except Exception as exc:  # pylint: disable=broad-except
            response = Response(500, _error_bytes("mock_imds internal error: %s" % exc))
            if mock.log is not None:
                mock.log("internal error on %s %s: %r" % (self.command, path, exc))
        if mock.log is not None:
            mock.log('%s arm "%s %s" %s' % (self.client_address[0], self.command, path, response.status or "-"))
        if response.action in ("drop", "reset"):
            self.close_connection = True
            if response.action == "reset":
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            return
        if response.action == "slow":
            if mock.stopping.wait(response.interval):
                self.close_connection = True
                return
            response.action = None
        self._write(response)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024

    def server_bind(self):
        # HTTPServer.server_bind would look the address up in DNS (getfqdn): keep it numeric.
        TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]


class _Server6(_Server):
    address_family = socket.AF_INET6


class _ArmServer(_Server):
    def handle_error(self, request, client_address):
        # A client that drops the TLS handshake is no error of the mock: no traceback on stderr.
        if self.mock.log is not None:
            self.mock.log("%s arm connection error" % (client_address[0],))


def _media_type(value):
    return (value or "").split(";", 1)[0].strip().lower()


def check_control_request(mock, headers, body):
    """Refuse what a web page could send: a page on any site may POST text/plain or a form to
    127.0.0.1 without a CORS preflight, and DNS rebinding lets it name the mock by its own host
    name. JSON bodies (which need a preflight the mock never grants), known Host names, and no
    foreign Origin close both doors."""
    host = (headers.get("Host") or "").strip().lower()
    if host not in mock.allowed_hosts and not (mock.any_ip_host and _is_ip_host(host, mock.port)):
        raise MockError("Host %r is not an address this mock listens on (%s); call it by that address"
                        % (host[:100], ", ".join(sorted(mock.allowed_hosts))))
    origin = headers.get("Origin")
    if origin is not None and origin.strip().lower() not in mock.allowed_origins:
        raise MockError("requests from web pages (Origin %r) may not use the control API" % origin[:100])
    if body and body.strip() and _media_type(headers.get("Content-Type")) != "application/json":
        raise MockError("a control API body needs Content-Type: application/json, got %r"
                        % (headers.get("Content-Type") or "none")[:100])


def _is_ip_host(host, port):
    name, sep, host_port = host.rpartition(":")
    if not sep or host_port != str(port):
        return False
    try:
        ipaddress.ip_address(name[1:-1] if name.startswith("[") and name.endswith("]") else name)
    except ValueError:
        return False
    return True


def check_bind(bind, allow_remote):
    if bind == "localhost":
        return
    try:
        address = ipaddress.ip_address(bind)
    except ValueError:
        raise MockError("--bind %r is not a numeric IP address; use 127.0.0.1 (or ::1)" % (bind,))
    if not address.is_loopback and not allow_remote:
        raise MockError("refusing to listen on %s: the control API lets anyone who reaches it change the events; "
                        "use 127.0.0.1, or pass --allow-remote (allow_remote=True) on an isolated network" % bind)


class MockImds(object):
    """The mock server. Use start() / stop() or a with block; state lives in .state (a MockState).

    All keyword arguments but bind, port, allow_remote, log and scenario go to MockState:
    fleet, default_vm, speed, start_time, rate_limit, approval_mode, unknown_event_ids, clock,
    wallclock, audit_limit."""

    def __init__(self, bind="127.0.0.1", port=0, allow_remote=False, log=None, scenario=None, arm_port=None,
                 tls_dir=None, **state_kwargs):
        check_bind(bind, allow_remote)
        self.bind = bind
        self.requested_port = port
        if arm_port is not None and (isinstance(arm_port, bool) or not isinstance(arm_port, int)
                                     or not 0 <= arm_port <= 65535):
            raise MockError("arm_port must be a port number (0 for any free port), got %r" % (arm_port,))
        self.arm_port = arm_port
        self.tls_dir = tls_dir
        self.ca_path = None
        self._arm_server = None
        self.log = log
        self.state = MockState(**state_kwargs)
        if scenario is not None:
            self.state.load_scenario(scenario)
        self.stopping = threading.Event()
        self.port = None
        self._server = None
        self._thread = None

    @property
    def url(self):
        host = "[%s]" % self.bind if ":" in self.bind else self.bind
        return "http://%s:%d" % (host, self.port)

    @property
    def control_url(self):
        return self.url + CONTROL_PREFIX

    def vm_url(self, name):
        return "%s/vm/%s" % (self.url, name)

    def start(self):
        server_class = _Server6 if ":" in self.bind else _Server
        self._server = server_class((self.bind, self.requested_port), _Handler)
        self._server.mock = self
        self._server.connections = set()
        self.port = self._server.server_address[1]
        self.state.base_url = self.url
        names = ["127.0.0.1", "localhost", "[::1]"]
        if self.bind not in ("0.0.0.0", "::"):
            names.append("[%s]" % self.bind if ":" in self.bind else self.bind)
        hosts = set("%s:%d" % (name, self.port) for name in names)
        if self.port == 80:
            hosts.update(names)
        self.allowed_hosts = frozenset(h.lower() for h in hosts)
        self.allowed_origins = frozenset("http://" + h for h in self.allowed_hosts)
        # Bound to every address: any numeric address with the port (a rebinding attack needs a name).
        self.any_ip_host = self.bind in ("0.0.0.0", "::")
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="mock_imds", daemon=True)
        self._thread.start()
        if self.arm_port is not None:
            self._start_arm()
        return self

    def _start_arm(self):
        """The Resource Manager face: same process, same state and clock, TLS with a test CA."""
        from .tls import make_test_ca, server_context  # the IMDS face needs no cryptography
        if self.tls_dir is None:
            self.tls_dir = tempfile.mkdtemp(prefix="mock_imds_tls_")
        try:
            self.ca_path = make_test_ca(self.tls_dir)
        except MockError:
            self.stop()
            raise
        self._arm_server = _ArmServer((self.bind, self.arm_port), _ArmHandler)
        self._arm_server.mock = self
        self._arm_server.connections = set()
        self._arm_server.tls = server_context(self.tls_dir)
        self.arm_port = self._arm_server.server_address[1]
        self.state.arm_base_url = self.arm_url
        threading.Thread(target=self._arm_server.serve_forever, kwargs={"poll_interval": 0.05},
                         name="mock_imds_arm", daemon=True).start()

    @property
    def arm_url(self):
        """https://127.0.0.1:PORT, the mock's Resource Manager (None without the control-plane face)."""
        if self._arm_server is None:
            return None
        host = "[%s]" % self.bind if ":" in self.bind else self.bind
        return "https://%s:%d" % (host, self.arm_port)

    def stop(self):
        self.state.eventgrid_stop()
        if self._arm_server is not None:
            self._arm_server.shutdown()
            self._arm_server.server_close()
            for conn in list(self._arm_server.connections):
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            self._arm_server = None
        if self._server is None:
            return
        self.stopping.set()
        self._server.shutdown()
        self._server.server_close()
        for conn in list(self._server.connections):
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._thread.join(5)
        self._server = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # Shortcuts to the state for tests and scripts.
    def advance(self, seconds):
        return self.state.advance(seconds)

    def add_event(self, spec=None, **kwargs):
        return self.state.add_event(spec, **kwargs)

    def add_fault(self, spec=None, **kwargs):
        return self.state.add_fault(spec, **kwargs)["fault_id"]

    def clear_faults(self, vm=None):
        return self.state.clear_faults(vm=vm)

    def audit(self, since=None, vm=None):
        return self.state.audit(since=since, vm=vm)

    def load_scenario(self, name_or_doc):
        return self.state.load_scenario(name_or_doc)
