# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The watcher's configuration file: defaults, and checks whose errors name the key and the fix.

The file is JSON (standard library, and what the role writes with to_nice_json). It is read once
at start; a change takes effect on restart (the role restarts the service when it changes it).
"""

import copy
import json
import math
import os
import re
from urllib.parse import urlsplit

from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _defaults, _edge

PHASES = ("drain", "started", "recover")
POLICIES = ("after_drain", "immediate", "none")
LOG_FORMATS = ("text", "json")
HANDLER_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")

DEFAULT_CONFIG_PATH = "/etc/azure-imds-watcher/config.json"

DEFAULTS = {
    "imds_url": None,
    "api_version": _defaults.DEFAULT_API_VERSION,
    "resource_name": None,
    "poll_interval": _defaults.DEFAULT_POLL_INTERVAL,
    "request_timeout": 10.0,
    "first_request_timeout": _defaults.DEFAULT_REQUEST_TIMEOUT,
    "state_dir": "/var/lib/azure-imds-watcher",
    "handlers_dir": "/etc/azure-imds-watcher/handlers",
    "handler_timeout": 300.0,
    "kill_grace": 5.0,
    "handler_environment": {},
    "handlers": [],
    "approval": {
        "policy": "after_drain",
        "rules": [],
        "user_events_at_once": False,
        # Microsoft's sample approves a Freeze with 0 <= DurationInSeconds < 9: at most 8 s.
        "freeze_max_duration": 8,
        "leader_only": False,
    },
    "log_format": "text",
    # Prometheus metrics (docs/docsite/rst/watcher.rst, "Metrics"): a textfile for node_exporter (null: none)
    # and a port on 127.0.0.1 serving /metrics (0: none).
    "metrics_textfile": None,
    # true: while the textfile's directory does not exist, write none and say nothing (the role's
    # default, node_exporter's directory, on a host without node_exporter); false: a warning.
    "metrics_textfile_if_directory_exists": False,
    "metrics_port": 0,
    # Where each transition of an event is POSTed (docs/docsite/rst/watcher.rst, "Notify"): a list of targets
    # {url, token_file, headers, timeout, max_attempts}; a target's timeout and max_attempts
    # default to notify_timeout and notify_max_attempts.
    "notify": [],
    "notify_timeout": 10.0,
    "notify_max_attempts": 20,
    "notify_outbox_max": 1000,
}

HANDLER_KEYS = ("name", "phase", "event_types", "timeout", "command")
RULE_KEYS = ("event_types", "event_sources", "policy")
NOTIFY_KEYS = ("url", "token_file", "headers", "timeout", "max_attempts")
# Headers the sender writes itself: a configured one would contradict the request.
NOTIFY_RESERVED_HEADERS = ("host", "content-length", "content-type", "transfer-encoding", "connection")

# The range of every number of the file, (minimum, maximum), both included. One table: the checks,
# check-config and docs/docsite/rst/watcher.rst all follow it.
RANGES = {
    # Microsoft recommends polling once a second; a minute already loses a Preempt's 30 s notice.
    "poll_interval": (_defaults.MIN_POLL_INTERVAL, 60.0),
    # request_timeout bounds every later request, an approval included, and so a stop.
    "request_timeout": (0.5, 120.0),
    # The first request after a quiet day switches the service on and can take two minutes.
    "first_request_timeout": (0.5, 600.0),
    "handler_timeout": (1.0, _defaults.MAX_TIMEOUT),
    "kill_grace": (0.0, 300.0),
    "freeze_max_duration": (0, 3600),
    # 0 is off; below 1024 needs privileges a sandboxed daemon should not have.
    "metrics_port": (1024, 65535),
    # One POST to a receiver, all of it (connect, send, answer): a receiver that needs longer is broken.
    "notify_timeout": (0.5, 120.0),
    # With the backoff capped at a minute, 1000 attempts keep a notification for about 16 hours.
    "notify_max_attempts": (1, 1000),
    # Unsent notifications kept in the state file (about 1 KB each) while a receiver is down.
    "notify_outbox_max": (10, 100000),
}
# What a stop may take beyond the running handler's SIGKILL: an approval in flight (request_timeout)
# and writing the state.
STOP_MARGIN_SECONDS = 15.0

_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class ConfigError(Exception):
    """The configuration cannot be used; the message names the key and what to write instead."""


def _number(value, where, key=None, allow_none=False, integer=False, unit="seconds"):
    """A finite number within RANGES[key] (key defaults to where); the message names where."""
    minimum, maximum = RANGES[key or where]
    try:
        return _edge.check_number(value, where, minimum=minimum, maximum=maximum, integer=integer,
                                  allow_none=allow_none, unit=unit)
    except _edge.ImdsInputError as exc:
        raise ConfigError(str(exc))


def _string(value, where, allow_none=True):
    if value is None and allow_none:
        return None
    if not isinstance(value, str) or not value:
        raise ConfigError("%s must be a non-empty string, got %r." % (where, value))
    if _CONTROL_RE.search(value):
        raise ConfigError("%s must not hold control characters (newline, tab, NUL...), got %r." % (where, value))
    return value


def _string_list(value, where, choices=None):
    if value is None:
        return None
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise ConfigError("%s must be a non-empty list of strings (or null for any), got %r." % (where, value))
    if choices is not None:
        bad = [v for v in value if v not in choices]
        if bad:
            raise ConfigError("%s: %s not one of %s." % (where, ", ".join(map(repr, bad)), ", ".join(choices)))
    return list(value)


def _known_keys(doc, known, where):
    if not isinstance(doc, dict):
        raise ConfigError("%s must be a JSON object, got %s." % (where, type(doc).__name__))
    unknown = sorted(set(doc) - set(known))
    if unknown:
        raise ConfigError("%s: unknown key %s; the known keys are %s. Check the spelling."
                          % (where, ", ".join(map(repr, unknown)), ", ".join(sorted(known))))


def _choice(value, where, choices):
    if value not in choices:
        raise ConfigError("%s must be one of %s, got %r." % (where, ", ".join(choices), value))
    return value


def check_handler(entry, index):
    where = "handlers[%d]" % index
    _known_keys(entry, HANDLER_KEYS, where)
    name = entry.get("name")
    if not isinstance(name, str) or not HANDLER_NAME_RE.match(name):
        raise ConfigError("%s.name must be a file name of letters, digits, '.', '_' and '-' (such as "
                          "10-health-probe), got %r." % (where, name))
    where = "handler %s" % name
    handler = {
        "name": name,
        "phase": _choice(entry.get("phase"), where + ".phase", PHASES),
        "event_types": _string_list(entry.get("event_types"), where + ".event_types"),
        "timeout": _number(entry.get("timeout"), "handlers[%d].timeout" % index, key="handler_timeout",
                           allow_none=True),
        "command": None,
    }
    command = entry.get("command")
    if command is not None:
        if not isinstance(command, list) or not command or not all(isinstance(a, str) for a in command):
            raise ConfigError("%s.command must be a list of arguments such as [\"/usr/bin/systemctl\", \"stop\", "
                              "\"app.service\"], got %r. It is run without a shell." % (where, command))
        for position, argument in enumerate(command):
            if "\x00" in argument:
                raise ConfigError("%s.command[%d] holds a NUL character, which no argument can carry: %r."
                                  % (where, position, argument))
        if not os.path.isabs(command[0]):
            raise ConfigError("%s.command[0] must be an absolute path (%r is not): handlers never depend on "
                              "$PATH. Write for example /usr/bin/%s." % (where, command[0], command[0]))
        handler["command"] = list(command)
    return handler


def check_environment(env):
    if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        raise ConfigError("handler_environment must map names to strings, such as {\"KUBECONFIG\": "
                          "\"/etc/kubernetes/kubelet.conf\"}, got %r." % (env,))
    for name, value in sorted(env.items()):
        if not _ENV_NAME_RE.match(name):
            raise ConfigError("handler_environment: %r is not a variable name (letters, digits and _, not starting "
                              "with a digit)." % (name,))
        if "\x00" in value:
            raise ConfigError("handler_environment.%s holds a NUL character, which no variable can carry." % name)
    return dict(env)


def longest_handler_limit(config):
    """The longest time limit any one handler can get, in seconds."""
    return max([config["handler_timeout"]] + [h["timeout"] for h in config["handlers"] if h["timeout"] is not None])


def stop_timeout(config):
    """Seconds a stop (SIGTERM) may take: the running handler's whole limit and its kill grace (no
    new handler starts after SIGTERM), then an approval it leads to and the last state write.
    The systemd unit's TimeoutStopSec must be at least this."""
    return int(math.ceil(longest_handler_limit(config) + config["kill_grace"] + config["request_timeout"]
                         + STOP_MARGIN_SECONDS))


def check_approval(doc):
    _known_keys(doc, DEFAULTS["approval"], "approval")
    approval = dict(DEFAULTS["approval"], **doc)
    _choice(approval["policy"], "approval.policy", POLICIES)
    rules = approval["rules"]
    if not isinstance(rules, list):
        raise ConfigError("approval.rules must be a list of {event_types, event_sources, policy}, got %r." % (rules,))
    checked = []
    for index, rule in enumerate(rules):
        where = "approval.rules[%d]" % index
        _known_keys(rule, RULE_KEYS, where)
        if "policy" not in rule:
            raise ConfigError("%s needs a policy (%s)." % (where, ", ".join(POLICIES)))
        checked.append({
            "event_types": _string_list(rule.get("event_types"), where + ".event_types"),
            "event_sources": _string_list(rule.get("event_sources"), where + ".event_sources",
                                          choices=_defaults.EVENT_SOURCES),
            "policy": _choice(rule["policy"], where + ".policy", POLICIES),
        })
    approval["rules"] = checked
    for key in ("user_events_at_once", "leader_only"):
        if not isinstance(approval[key], bool):
            raise ConfigError("approval.%s must be true or false, got %r." % (key, approval[key]))
    approval["freeze_max_duration"] = _number(approval["freeze_max_duration"], "approval.freeze_max_duration",
                                              key="freeze_max_duration", allow_none=True, integer=True)
    return approval


def check_config(doc):
    """A complete, checked configuration from a (possibly partial) document."""
    _known_keys(doc, DEFAULTS, "the configuration")
    config = copy.deepcopy(DEFAULTS)
    config.update(copy.deepcopy(doc))
    if config["imds_url"] is not None:
        try:
            config["imds_url"] = _edge.check_base_url(config["imds_url"])
        except _edge.ImdsInputError as exc:
            raise ConfigError(str(exc))
    try:
        _edge.validate_api_version(config["api_version"])
    except _edge.ImdsInputError as exc:
        raise ConfigError(str(exc))
    _string(config["resource_name"], "resource_name")
    for key in ("poll_interval", "request_timeout", "first_request_timeout", "handler_timeout", "kill_grace"):
        config[key] = _number(config[key], key)
    for key in ("state_dir", "handlers_dir"):
        value = _string(config[key], key, allow_none=False)
        if not os.path.isabs(value):
            raise ConfigError("%s must be an absolute path, got %r." % (key, value))
    config["handler_environment"] = check_environment(config["handler_environment"])
    if not isinstance(config["handlers"], list):
        raise ConfigError("handlers must be a list of {name, phase, event_types, timeout, command}.")
    handlers = [check_handler(entry, i) for i, entry in enumerate(config["handlers"])]
    seen = set()
    for handler in handlers:
        key = (handler["phase"], handler["name"])
        if key in seen:
            raise ConfigError("handler %s is listed twice for phase %s; give each a distinct name."
                              % (handler["name"], handler["phase"]))
        seen.add(key)
    config["handlers"] = handlers
    config["approval"] = check_approval(config["approval"])
    _choice(config["log_format"], "log_format", LOG_FORMATS)
    config["metrics_textfile"] = check_metrics_textfile(config["metrics_textfile"])
    if not isinstance(config["metrics_textfile_if_directory_exists"], bool):
        raise ConfigError("metrics_textfile_if_directory_exists must be true or false, got %r."
                          % (config["metrics_textfile_if_directory_exists"],))
    config["metrics_port"] = check_metrics_port(config["metrics_port"])
    config["notify_timeout"] = _number(config["notify_timeout"], "notify_timeout")
    for key in ("notify_max_attempts", "notify_outbox_max"):
        config[key] = _number(config[key], key, integer=True, unit=None)
    config["notify"] = check_notify(config["notify"], config)
    return config


def check_notify_url(url, where):
    """An http:// or https:// URL with a host: what the sender can POST to. Receivers are the
    user's (an ansible-rulebook webhook, an EDA event stream), so any host is accepted."""
    _string(url, where, allow_none=False)
    form = ("Write for example http://eda.example.internal:5000/endpoint or the https:// URL of an EDA "
            "controller event stream.")
    if any(c.isspace() or ord(c) >= 127 for c in url):
        raise ConfigError("%s %r holds whitespace or non-ASCII characters (percent-encode them). %s" % (where, url, form))
    try:
        parts = urlsplit(url)
        host = parts.hostname
        port = parts.port
    except ValueError as exc:
        raise ConfigError("%s %r is not a valid URL (%s): check the brackets of an IPv6 host and give the port as "
                          "a number from 1 to 65535. %s" % (where, url, exc, form))
    if parts.scheme not in ("http", "https") or not host:
        raise ConfigError("%s %r is not an http:// or https:// URL with a host. %s" % (where, url, form))
    if (port is not None and not 1 <= port <= 65535) or parts.netloc.endswith(":"):
        raise ConfigError("%s %r has a port outside 1-65535. %s" % (where, url, form))
    if parts.username is not None or parts.password is not None:
        raise ConfigError("%s %r carries a user name or password, which would end up in logs: put a token in a "
                          "file and name it in token_file." % (where, url))
    if parts.fragment or "#" in url:
        raise ConfigError("%s %r carries a #fragment, which is never sent. %s" % (where, url, form))
    return url


def check_notify_headers(headers, where, has_token):
    if headers is None:
        return {}
    if not isinstance(headers, dict):
        raise ConfigError("%s must map header names to strings, such as {\"X-Team\": \"web\"}, got %r."
                          % (where, headers))
    for name, value in sorted(headers.items()):
        if not re.match(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$", name):
            raise ConfigError("%s: %r is not an HTTP header name (letters, digits and - are)." % (where, name))
        if not isinstance(value, str) or _CONTROL_RE.search(value):
            raise ConfigError("%s.%s must be a string without control characters, got %r." % (where, name, value))
        if name.lower() in NOTIFY_RESERVED_HEADERS:
            raise ConfigError("%s.%s is written by the watcher itself; leave it out." % (where, name))
        if name.lower() == "authorization" and has_token:
            raise ConfigError("%s.%s and token_file both set the Authorization header; keep one." % (where, name))
    return dict(headers)


def check_notify(targets, config):
    """The notify targets, each complete: url, token_file, headers, timeout, max_attempts."""
    if not isinstance(targets, list):
        raise ConfigError("notify must be a list of targets such as [{\"url\": \"http://eda.example.internal:5000/"
                          "endpoint\"}], got %r." % (targets,))
    checked = []
    for index, entry in enumerate(targets):
        where = "notify[%d]" % index
        _known_keys(entry, NOTIFY_KEYS, where)
        if "url" not in entry:
            raise ConfigError("%s needs a url." % where)
        url = check_notify_url(entry["url"], where + ".url")
        if any(target["url"] == url for target in checked):
            raise ConfigError("%s.url %r is listed twice; each receiver once." % (where, url))
        token_file = _string(entry.get("token_file"), where + ".token_file")
        if token_file is not None and not os.path.isabs(token_file):
            raise ConfigError("%s.token_file must be an absolute path (it is read at each send), got %r."
                              % (where, token_file))
        timeout = entry.get("timeout")
        attempts = entry.get("max_attempts")
        checked.append({
            "url": url,
            "token_file": token_file,
            "headers": check_notify_headers(entry.get("headers"), where + ".headers", token_file is not None),
            "timeout": config["notify_timeout"] if timeout is None
            else _number(timeout, where + ".timeout", key="notify_timeout"),
            "max_attempts": config["notify_max_attempts"] if attempts is None
            else _number(attempts, where + ".max_attempts", key="notify_max_attempts", integer=True, unit=None),
        })
    return checked


def check_metrics_port(value):
    """0 (no server) or a whole number in RANGES["metrics_port"]."""
    if value == 0 and not isinstance(value, bool):
        return 0
    try:
        return _number(value, "metrics_port", integer=True, unit=None)
    except ConfigError as exc:
        raise ConfigError("%s Or 0 to serve no metrics." % exc)


def check_metrics_textfile(path):
    """An absolute file path, or None/"" for no textfile. Its directory is checked when the daemon
    writes (node_exporter may be installed after the watcher): a warning then, never a crash."""
    if path is None or path == "":
        return None
    _string(path, "metrics_textfile")
    if not os.path.isabs(path) or path.endswith("/"):
        raise ConfigError("metrics_textfile must be an absolute file path such as "
                          "/var/lib/node_exporter/textfile_collector/azure_imds_watcher.prom (or empty for none), "
                          "got %r." % (path,))
    if not path.endswith(".prom"):
        raise ConfigError("metrics_textfile must end in .prom, which is what node_exporter's textfile collector "
                          "reads, got %r." % (path,))
    return path


# The deepest a valid configuration nests is five levels (approval.rules[0].event_types); a file nested
# far deeper is a mistake, and Python's json (then every walk over the document) would stop at its
# recursion limit with a RecursionError instead of a configuration error.
MAX_CONFIG_DEPTH = 32


class _JsonConstant(object):
    """NaN, Infinity or -Infinity where the file has one: Python's json reads them, JSON itself
    has no such thing. Kept as a marker so that the error can name the key that holds it."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name


def _find_constant(value, where):
    if isinstance(value, _JsonConstant):
        return where, value
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        found = _find_constant(item, "%s.%s" % (where, key) if isinstance(key, str) else "%s[%d]" % (where, key))
        if found:
            return found
    return None


def load_config(path):
    """Read and check the file. A missing file means every default."""
    if path is None:
        return check_config({})
    try:
        with open(path, "rb") as handle:
            text = handle.read().decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError("cannot read the configuration %s (%s). Give an existing file with --config, or "
                          "install it with the azure_imds.scheduled_events.watcher role." % (path, exc))
    if _edge.json_nesting_exceeds(text, MAX_CONFIG_DEPTH):
        raise ConfigError("the configuration %s nests arrays and objects more than %d deep; a valid one nests at "
                          "most 5 (approval.rules[].event_types). Check the file against the watcher's reference."
                          % (path, MAX_CONFIG_DEPTH))
    try:
        doc = json.loads(text, parse_constant=_JsonConstant) if text.strip() else {}
    except ValueError as exc:
        raise ConfigError("the configuration %s is not valid JSON (%s)." % (path, exc))
    try:
        # A NaN where a number is expected is refused there, with the key's range.
        config = check_config(doc)
    except ConfigError as exc:
        raise ConfigError("%s: %s" % (path, exc))
    found = _find_constant(doc, "")
    if found:
        raise ConfigError("%s: %s holds %r, which is not a number JSON allows; write a finite number such as 1.0."
                          % (path, found[0].lstrip(".") or "the document", found[1]))
    return config
