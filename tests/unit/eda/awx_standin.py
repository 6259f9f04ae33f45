# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A small stand-in for the part of the AWX API that ansible-rulebook's run_job_template uses.

It is NOT AWX: it answers just the calls ansible-rulebook 1.3 makes, with the fields it reads, and
records every request so a test can assert what a launch carried:

- GET  /api/v2/config/                          at start (--controller-url): {"version": ...}
- GET  /api/v2/unified_job_templates/?name=N    the template, its organization and launch URL
- POST /api/v2/job_templates/<id>/launch/       a job; recorded with its JSON body (limit, extra_vars)
- GET  /api/v2/jobs/?id__in=1,2                 the jobs' status: every job is "successful" at once

Requests need "Authorization: Bearer <token>", as AWX does for a token; anything else is a 404 or
a 401, so a wrong call fails the test instead of passing quietly.
"""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

VERSION = "24.6.1"


class AwxStandIn(object):
    def __init__(self, token, templates, organization="Default"):
        self.token = token
        self.templates = dict((index + 1, name) for index, name in enumerate(templates))
        self.organization = organization
        self.requests = []     # (method, path, query dict, JSON body or None)
        self.launches = []     # (template name, JSON body)
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self._server.server_address[1]

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self._server.shutdown()
        self._server.server_close()

    def launched(self):
        with self._lock:
            return list(self.launches)

    def _template(self, template_id, name):
        return {
            "id": template_id, "type": "job_template", "name": name,
            "summary_fields": {"organization": {"name": self.organization}},
            "related": {"launch": "/api/v2/job_templates/%d/launch/" % template_id},
            "ask_limit_on_launch": True, "ask_labels_on_launch": False,
            "ask_inventory_on_launch": False, "ask_variables_on_launch": True,
        }

    def answer(self, method, path, query, body):
        """(status, JSON) for one request."""
        if method == "GET" and path == "/api/v2/config/":
            return 200, {"version": VERSION}
        if method == "GET" and path == "/api/v2/unified_job_templates/":
            wanted = query.get("name", [None])[0]
            found = [self._template(i, n) for i, n in sorted(self.templates.items()) if n == wanted]
            return 200, {"count": len(found), "next": None, "previous": None, "results": found}
        parts = [p for p in path.split("/") if p]
        if method == "POST" and len(parts) == 5 and parts[:3] == ["api", "v2", "job_templates"] and parts[4] == "launch":
            name = self.templates.get(int(parts[3])) if parts[3].isdigit() else None
            if name is None:
                return 404, {"detail": "Not found."}
            with self._lock:
                self.launches.append((name, body))
                job_id = len(self.launches)
            return 201, {"id": job_id, "job": job_id, "url": "/api/v2/jobs/%d/" % job_id, "status": "pending"}
        if method == "GET" and path == "/api/v2/jobs/":
            ids = [i for i in query.get("id__in", [""])[0].split(",") if i]
            with self._lock:
                known = [int(i) for i in ids if i.isdigit() and 0 < int(i) <= len(self.launches)]
            results = [{"id": i, "status": "successful", "created": "2026-01-01T00:00:00Z",
                        "url": "/api/v2/jobs/%d/" % i, "artifacts": {}} for i in known]
            return 200, {"count": len(results), "next": None, "previous": None, "results": results}
        return 404, {"detail": "the stand-in does not answer %s %s" % (method, path)}

    def _handler(self):
        standin = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _serve(self, method):
                parts = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw.decode("utf-8")) if raw else None
                query = parse_qs(parts.query)
                with standin._lock:
                    standin.requests.append((method, parts.path, query, body))
                if self.headers.get("Authorization") != "Bearer %s" % standin.token:
                    status, answer = 401, {"detail": "Authentication credentials were not provided."}
                else:
                    status, answer = standin.answer(method, parts.path, query, body)
                data = json.dumps(answer).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):  # noqa: N802  (the name http.server calls)
                self._serve("GET")

            def do_POST(self):  # noqa: N802
                self._serve("POST")

            def log_message(self, *args):
                return

        return Handler
