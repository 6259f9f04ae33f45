# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The command line: run, status, check-config, start, stop (python3 -m scheduled_events_watcher)."""

import argparse
import os
import signal
import sys

if __name__ == "__main__":
    # IMDS speaks plain HTTP on a link-local address. http.client would load the TLS library
    # (about 4 MB of the daemon's 22 MB of resident memory) for nothing; an https imds_url is
    # refused at start instead. Only for the program: an importer keeps its ssl.
    sys.modules.setdefault("ssl", None)

# pylint: disable=wrong-import-position
from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _defaults, _edge, _imds

from . import EXIT_FAILED, EXIT_LOCKED, EXIT_OK, EXIT_USAGE, PROGRAM, liveness  # noqa: E402
from .config import DEFAULT_CONFIG_PATH, ConfigError, check_config, load_config, stop_timeout  # noqa: E402
from .daemon import Watcher  # noqa: E402
from .log import Logger, describe_internal_error, escape_text  # noqa: E402
from .pidfile import read_pid, start_background, stop_background, write_pid  # noqa: E402
from .state import StateLocked, StateError, StateStore  # noqa: E402
from .status import status_command  # noqa: E402

CONFIG_ENV_VAR = "AZURE_IMDS_WATCHER_CONFIG"
CALLER_DIRECTORY_ENV_VAR = "AZURE_IMDS_WATCHER_CALLER_DIRECTORY"


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        self.exit(EXIT_USAGE, "%s: error: %s (see --help)\n" % (self.prog, message))


def _seconds_argument(text):
    try:
        return _edge.check_number(float(text), "--timeout", minimum=0, maximum=_defaults.MAX_TIMEOUT)
    except (ValueError, _edge.ImdsInputError) as exc:
        raise argparse.ArgumentTypeError(str(exc) if isinstance(exc, _edge.ImdsInputError)
                                         else "--timeout must be a number of seconds, got %r" % text)


def build_parser():
    parser = _Parser(prog=PROGRAM, description="Act on Azure Scheduled Events on this VM: drain, approve, "
                                               "recover. Reference: docs/docsite/rst/watcher.rst of azure_imds.scheduled_events.")
    parser.add_argument("--version", action="version", version="%s %s" % (PROGRAM, liveness.collection_version()))
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    config_path = os.environ.get(CONFIG_ENV_VAR) or DEFAULT_CONFIG_PATH
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", default=config_path,
                        help="JSON configuration (default $%s or %s)" % (CONFIG_ENV_VAR, DEFAULT_CONFIG_PATH))
    common.add_argument("--imds-url", help="IMDS base URL; overrides the configuration and $%s" % _defaults.URL_ENV_VAR)
    common.add_argument("--resource-name", help="this VM's name as Resources spells it (default: ask IMDS)")
    common.add_argument("--state-dir", help="overrides state_dir of the configuration")
    run = sub.add_parser("run", parents=[common], help="poll and act (the service runs this)")
    run.add_argument("--once", action="store_true", help="poll once, finish what that poll starts, exit")
    run.add_argument("--dry-run", action="store_true", help="run no handler, approve nothing; log what it would do")
    run.add_argument("--handlers-dir", help="overrides handlers_dir of the configuration")
    run.add_argument("--log-format", choices=("text", "json"), help="overrides log_format of the configuration")
    run.add_argument("--pid-file", help="write this process's pid here while it runs")
    status = sub.add_parser("status", parents=[common], help="print the events IMDS shows and the watcher's state")
    status.add_argument("--json", action="store_true", help="print JSON")
    sub.add_parser("check-config", parents=[common], help="check the configuration file and exit")
    for name, text in (("start", "start `run` in the background (hosts without systemd)"),
                       ("stop", "stop the background process named by --pid-file")):
        cmd = sub.add_parser(name, help=text)
        cmd.add_argument("--config", default=config_path)
        cmd.add_argument("--pid-file", required=True)
        cmd.add_argument("--log-file", default=os.devnull)
        cmd.add_argument("--dry-run", action="store_true")
        cmd.add_argument("--check", action="store_true", help="only say what would be done")
        cmd.add_argument("--timeout", type=_seconds_argument, default=30.0, help="seconds to wait (default 30)")
    return parser


def effective_config(args):
    config = load_config(args.config if (args.config != DEFAULT_CONFIG_PATH or os.path.exists(args.config))
                         else None)
    overrides = {}
    for option, key in (("imds_url", "imds_url"), ("resource_name", "resource_name"), ("state_dir", "state_dir"),
                        ("handlers_dir", "handlers_dir"), ("log_format", "log_format")):
        value = getattr(args, option, None)
        if value is not None:
            overrides[key] = value
    if overrides:
        doc = dict(config)
        doc.update(overrides)
        config = check_config(doc)
    return config


def make_client(config, **overrides):
    # retry_timeout 0: one attempt per call. The loop retries on its own schedule, so retries
    # are paced like polls and the loop keeps reacting to finished handlers meanwhile. The
    # client's own per-request bound is the longest the loop ever allows (the first poll's);
    # each call passes the Deadline that applies to it.
    overrides.setdefault("request_timeout", max(config["request_timeout"], config["first_request_timeout"]))
    client = _imds.client_from_options(dict(config, retry_timeout=0), **overrides)
    # Nor does the client resend on its own when a kept-alive connection drops.
    client.resend_on_stale_connection = False
    return client


def main(argv=None, out=None):
    """The command line. Never raises but SystemExit (argparse's usage errors, exit 2): any other
    error ends in one message on standard error and an exit status."""
    out = out or sys.stdout
    try:
        return _main(argv, out)
    except KeyboardInterrupt:
        sys.stderr.write("%s: interrupted\n" % PROGRAM)
        return EXIT_FAILED
    except Exception as exc:  # pylint: disable=broad-except
        sys.stderr.write("%s: internal error: %s. Please report it with this line.\n"
                         % (PROGRAM, escape_text(describe_internal_error(exc))))
        return EXIT_FAILED


def _main(argv, out):
    args = build_parser().parse_args(argv)
    if args.command is None:
        build_parser().print_help(out)
        return EXIT_USAGE
    if args.command in ("start", "stop"):
        try:
            return start_background(args, out) if args.command == "start" else stop_background(args, out)
        except OSError as exc:
            sys.stderr.write("%s: %s: %s\n" % (PROGRAM, args.command, escape_text(str(exc))))
            return EXIT_FAILED
    try:
        config = effective_config(args)
        if (config["imds_url"] or os.environ.get(_defaults.URL_ENV_VAR) or "").startswith("https:") \
                and sys.modules.get("ssl", False) is None:
            raise ConfigError("imds_url is https, but IMDS has no TLS endpoint and the watcher speaks plain HTTP "
                              "only: use http://169.254.169.254 (or the mock's http:// URL).")
        client = make_client(config)
    except (ConfigError, _edge.ImdsInputError) as exc:
        sys.stderr.write("%s: configuration error: %s\n" % (PROGRAM, escape_text(str(exc))))
        return EXIT_USAGE
    if args.command == "check-config":
        out.write("%s: the configuration %s is valid; a stop may take up to %ds (the unit's TimeoutStopSec must be "
                  "at least that)\n" % (PROGRAM, args.config, stop_timeout(config)))
        return EXIT_OK
    store = StateStore(config["state_dir"])
    if args.command == "status":
        return status_command(args, config, client, store, out)
    return run_command(args, config, client, store, out)


def run_command(args, config, client, store, out):
    log = Logger(out, config["log_format"])
    version = liveness.collection_version()
    # A dry run writes nothing into the state directory, its status file included.
    telemetry = liveness.Telemetry(config, log, version, write_status=not args.dry_run)
    watcher = Watcher(config, client, log, store, dry_run=args.dry_run, telemetry=telemetry)

    def stop(signum, _frame):
        again = watcher.stopping
        watcher.mark_stop()
        log("info", "shutdown", "received %s%s" % (signal.Signals(signum).name, "; cutting the running handler short"
                                                   if again else ""))
        watcher.abandon_get()

    def hang_up(signum, _frame):
        # No reload: a configuration changed under a running drain would split one event between two
        # policies. Logged, so that a hangup (a closed terminal, a stray kill -HUP) is no silent death.
        log("warning", "sighup", "received %s: ignored, the watcher goes on; it does not reload its configuration "
            "(restart it to apply a change)" % signal.Signals(signum).name)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGHUP, hang_up)
    published = False
    try:
        log("info", "startup", "%s %s (pid %d)%s" % (PROGRAM, version, os.getpid(), "; systemd watchdog every %gs"
                                                     % telemetry.watchdog if telemetry.watchdog else ""),
            version=version, pid=os.getpid())
        # The state directory first: created, locked (one watcher per directory), read and written
        # once, backing off while it cannot be used, before anything else is written: the pid
        # file and the status file of a watcher that may not start are nobody's to overwrite.
        if not watcher.read_state():
            return EXIT_OK
        if args.pid_file:
            try:
                write_pid(args.pid_file)
            except OSError as exc:
                log("error", "fatal", "cannot write the pid file %s (%s): give a writable --pid-file"
                    % (args.pid_file, exc.strerror or exc))
                return EXIT_USAGE
        published = True
        telemetry.start()
        # Leftovers of a killed predecessor end first: IMDS may keep the watcher waiting for long.
        if not watcher.end_leftovers():
            return EXIT_OK
        if not watcher.resolve_name(keep_trying=not args.once):
            return EXIT_FAILED if args.once and not watcher.stopping else EXIT_OK
        if not watcher.load_state():
            return EXIT_OK
        return watcher.run_once() if args.once else watcher.run_forever()
    except StateLocked as exc:
        log("error", "state_locked", str(exc), holder=exc.holder)
        return EXIT_LOCKED
    except (StateError, OSError) as exc:
        log("error", "fatal", "cannot keep the state in %s: %s. Fix the directory (it must be writable by the "
            "watcher) and restart." % (config["state_dir"], exc))
        return EXIT_FAILED
    except Exception as exc:  # pylint: disable=broad-except
        log("error", "fatal", "internal error outside the loop: %s" % describe_internal_error(exc))
        return EXIT_FAILED
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        if published:
            telemetry.stopping()
        else:
            # Neither the status file nor the metrics textfile is this watcher's to write (yet).
            telemetry.notify("STOPPING=1")
        client.close()
        store.unlock()
        if args.pid_file and read_pid(args.pid_file) in (os.getpid(), None):
            try:
                os.remove(args.pid_file)
            except OSError:
                pass


def _return_to_callers_directory(environ=None):
    """The azure-imds-watcher command starts Python in / and names the caller's directory in
    CALLER_DIRECTORY_ENV_VAR: `python3 -m` puts the working directory first on the module path,
    where a package planted in a directory others can write would run as root in this one's place.
    Going back before the arguments are read keeps their relative paths meaning what they say."""
    environ = os.environ if environ is None else environ
    directory = environ.pop(CALLER_DIRECTORY_ENV_VAR, None)
    if directory:
        try:
            os.chdir(directory)
        except OSError as exc:
            sys.stderr.write("%s: cannot return to the directory %s (%s); relative paths are taken from /\n"
                             % (PROGRAM, escape_text(directory), exc.strerror or exc))


if __name__ == "__main__":
    _return_to_callers_directory()
    sys.exit(main())
