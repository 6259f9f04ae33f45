# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the mock IMDS tests share: the scheduled events path, raw exchanges on a socket, and a client
of one in-process mock."""

import json
import os
import socket

try:
    import http.client as http_client
except ImportError:  # pragma: no cover
    http_client = None

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SAMPLES = os.path.join(os.path.dirname(ROOT), "shared", "reference", "imds-samples.json")
SE = "/metadata/scheduledevents?api-version=2020-07-01"


def raw_exchange(mock, data):
    """Send bytes on a fresh connection and read until the server closes it.
    Returns the bytes received (b"" for a close without answer) or "reset" for a TCP RST."""
    with socket.create_connection(("127.0.0.1", mock.port), timeout=5) as sock:
        sock.sendall(data)
        chunks = []
        try:
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    return b"".join(chunks)
                chunks.append(chunk)
        except ConnectionResetError:
            return "reset"


class Answer(object):
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body

    def json(self):
        return json.loads(self.body.decode("utf-8"))

    @property
    def text(self):
        return self.body.decode("utf-8")


class Client(object):
    """A keep-alive http.client connection to the mock, with the IMDS header by default."""

    def __init__(self, mock):
        self.mock = mock
        self.conn = http_client.HTTPConnection("127.0.0.1", mock.port, timeout=10)

    def request(self, method, path, vm=None, headers=None, body=None, metadata=True):
        full = ("/vm/%s%s" % (vm, path)) if vm else path
        hdrs = {"Metadata": "true"} if metadata else {}
        hdrs.update(headers or {})
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode("utf-8")
            hdrs.setdefault("Content-Type", "application/json")
        self.conn.request(method, full, body=body, headers=hdrs)
        response = self.conn.getresponse()
        return Answer(response.status, response, response.read())

    def get(self, path=SE, **kwargs):
        return self.request("GET", path, **kwargs)

    def post(self, path=SE, body=None, **kwargs):
        return self.request("POST", path, body=body, **kwargs)

    def doc(self, vm=None, version="2020-07-01"):
        answer = self.get("/metadata/scheduledevents?api-version=" + version, vm=vm)
        assert answer.status == 200, answer.body
        return answer.json()

    def approve(self, vm, *event_ids):
        return self.post(body={"StartRequests": [{"EventId": e} for e in event_ids]}, vm=vm)

    def close(self):
        self.conn.close()
