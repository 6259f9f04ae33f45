# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The command line: python3 -m mock_imds --help."""

from __future__ import print_function

import argparse
import json
import os
import re
import signal
import socket
import sys
import threading

from .checks import MockError, _check_keys, read_json_file
from .fleet import Fleet, parse_fleet_spec
from .rules import APPROVAL_MODES, DEFAULT_VM_NAME, UNKNOWN_ID_POLICIES
from .scenarios import BUILTIN_SCENARIOS
from .server import MockImds


def collection_version(path=__file__):
    """The version of the collection this copy belongs to: MANIFEST.json (installed) or galaxy.yml
    (a checkout) in the nearest directory above path. A copy outside any collection (the mock_imds
    role's, on a test host) says "unknown"."""
    here = os.path.dirname(os.path.abspath(path))
    parents = [here]
    while os.path.dirname(parents[-1]) != parents[-1]:
        parents.append(os.path.dirname(parents[-1]))
    for directory in parents:
        try:
            with open(os.path.join(directory, "MANIFEST.json")) as handle:
                return "%s" % json.load(handle)["collection_info"]["version"]
        except (OSError, ValueError, KeyError, TypeError):
            pass
        try:
            with open(os.path.join(directory, "galaxy.yml")) as handle:
                found = re.search(r"""^version:[ \t]*['"]?([^\s'"#]+)""", handle.read(), re.M)
        except (OSError, UnicodeDecodeError):
            continue
        if found:
            return found.group(1)
    return "unknown"


class _ArgumentParser(argparse.ArgumentParser):
    def error(self, message):
        self.exit(2, "mock_imds: error: %s (see --help)\n" % message)


def _build_parser():
    parser = _ArgumentParser(
        prog="mock_imds",
        description="Mock Azure Instance Metadata Service (scheduled events, instance metadata) for tests. "
                    "Control API under /_mock/; see docs/docsite/rst/mock_imds.rst.")
    parser.add_argument("--version", action="version", version="mock_imds %s" % collection_version())
    parser.add_argument("--bind", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8080, help="port (default 8080; 0 = any free port)")
    parser.add_argument("--port-file", help="write the port actually used to this file once listening")
    parser.add_argument("--scenario", help="built-in scenario name or scenario JSON file (--list-scenarios)")
    parser.add_argument("--fleet", action="append", default=[],
                        help="fleet JSON file, or KIND:VM,VM / KIND:GROUP:VM,VM with KIND avset, vmss or zonal; "
                             "repeatable")
    parser.add_argument("--default-vm", help="VM served at the root /metadata/... (default vm0)")
    parser.add_argument("--speed", type=float, help="simulated seconds per real second (default 1)")
    parser.add_argument("--start-time", help="simulated time at start, ISO 8601 (default now)")
    parser.add_argument("--no-rate-limit", action="store_true", help="turn off the 5 requests/s per VM limit")
    parser.add_argument("--approval-mode", choices=APPROVAL_MODES, help="who must approve before an event starts")
    parser.add_argument("--unknown-event-ids", choices=UNKNOWN_ID_POLICIES,
                        help="answer to approvals of unknown EventIds: accept (200, default) or reject (400)")
    parser.add_argument("--arm-port", type=int,
                        help="also serve the control-plane face (Resource Manager, sign-in, Resource Graph) over "
                             "TLS on this port (0 = any free port); needs the Python package cryptography")
    parser.add_argument("--tls-dir", help="directory for the test CA (ca.pem) and the face's certificate "
                                          "(default: a new temporary directory)")
    parser.add_argument("--arm-port-file", help="write the control-plane face's port to this file once listening")
    parser.add_argument("--allow-remote", action="store_true",
                        help="allow a non-loopback --bind (the control API is unauthenticated)")
    parser.add_argument("--quiet", action="store_true", help="no per-request log lines on stderr")
    parser.add_argument("--list-scenarios", action="store_true", help="print the built-in scenarios and exit")
    return parser


def _cli_fleet(specs):
    """--fleet options -> one fleet document (None without any)."""
    if not specs:
        return None
    groups = []
    doc_default = None
    extra = {}
    for spec in specs:
        if spec.endswith(".json") or os.path.isfile(spec):
            doc = read_json_file(spec, "--fleet", "give a fleet JSON file or KIND:VM,VM")
            _check_keys(doc, Fleet.DOC_KEYS, "fleet file %s" % spec)
            groups.extend(doc.get("groups") or [])
            doc_default = doc.get("default_vm") or doc_default
            extra.update((k, v) for k, v in doc.items() if k not in ("groups", "default_vm"))
        else:
            groups.append(parse_fleet_spec(spec, number=len(groups) + 1))
    return dict(extra, groups=groups, default_vm=doc_default or DEFAULT_VM_NAME)


def _notify_systemd():
    """Tell systemd (Type=notify) that the mock listens; nothing without a NOTIFY_SOCKET."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return
    if address.startswith("@"):
        address = "\0" + address[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.connect(address)
            sock.sendall(b"READY=1")
    except OSError:
        pass


def _print(line, stream=None):
    stream = stream or sys.stdout
    try:
        stream.write(line + "\n")
        stream.flush()
    except (OSError, ValueError):
        pass


def main(argv=None):
    args = _build_parser().parse_args(argv)
    if args.list_scenarios:
        for name, scenario in sorted(BUILTIN_SCENARIOS.items()):
            _print("%-28s %s" % (name, scenario["description"]))
        return 0
    if args.arm_port is not None and not 0 <= args.arm_port <= 65535:
        _print("mock_imds: error: --arm-port %d is out of range; use 1-65535, or 0 for any free port" % args.arm_port,
               sys.stderr)
        return 2
    if not 0 <= args.port <= 65535:
        _print("mock_imds: error: --port %d is out of range; use 1-65535, or 0 for any free port" % args.port,
               sys.stderr)
        return 2
    log = None if args.quiet else (lambda line: _print("mock_imds: " + line, sys.stderr))
    try:
        fleet = _cli_fleet(args.fleet)
        config = {}
        if args.speed is not None:
            config["speed"] = args.speed
        if args.no_rate_limit:
            config["rate_limit"] = False
        if args.approval_mode:
            config["approval_mode"] = args.approval_mode
        if args.unknown_event_ids:
            config["unknown_event_ids"] = args.unknown_event_ids
        mock = MockImds(bind=args.bind, port=args.port, allow_remote=args.allow_remote, log=log, fleet=fleet,
                        default_vm=args.default_vm, start_time=args.start_time, arm_port=args.arm_port,
                        tls_dir=args.tls_dir, **config)
        if args.scenario:
            mock.state.load_scenario(args.scenario, fleet=fleet, default_vm=args.default_vm,
                                     start_time=args.start_time, config=config)
    except MockError as exc:
        _print("mock_imds: error: %s" % exc, sys.stderr)
        return 2
    try:
        mock.start()
    except MockError as exc:
        _print("mock_imds: error: %s" % exc, sys.stderr)
        return 2
    except OSError as exc:
        _print("mock_imds: error: cannot listen on %s:%d (%s); choose another --port, or 0 for any free port"
               % (args.bind, args.port, exc.strerror or exc), sys.stderr)
        return 1
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_args: stop.set())
    signal.signal(signal.SIGINT, lambda *_args: stop.set())
    if args.arm_port_file and mock.arm_url:  # before --port-file, which tells a waiting caller all is ready
        tmp = args.arm_port_file + ".tmp"
        with open(tmp, "w") as handle:
            handle.write("%d\n" % mock.arm_port)
        os.replace(tmp, args.arm_port_file)
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as handle:
            handle.write("%d\n" % mock.port)
        os.replace(tmp, args.port_file)
    _print("mock_imds: listening on %s" % mock.url)
    for name in mock.state.snapshot()["vms"]:
        _print("mock_imds: vm %s at %s" % (name, mock.vm_url(name)))
    _print("mock_imds: control at %s" % mock.control_url)
    if mock.arm_url:
        _print("mock_imds: resource manager at %s (test CA %s)" % (mock.arm_url, mock.ca_path))
    _notify_systemd()
    while not stop.wait(0.5):
        pass
    mock.stop()
    if args.port_file:
        try:
            os.remove(args.port_file)
        except OSError:
            pass
    return 0
