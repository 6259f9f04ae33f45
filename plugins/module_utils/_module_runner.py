# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# This module_utils is PRIVATE to this collection: its API may change in any release.
#
# What scheduled_event_info and scheduled_event_approve do alike with an AnsibleModule: build
# the shared client, learn this VM's name, and turn the client's typed errors into fail_json.
# Everything that does not need Ansible stays in _imds.py (reaching IMDS), _event.py (what an event is)
# and _edge.py (errors and checks).

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _edge, _event, _options


class Runtime:
    """The clocks and the transport of one module run. Unit tests pass fakes, so nothing waits.

    The action plugins run the same module code on the controller for a Windows host: they pass
    the exchange that sends each request through ansible.windows.win_uri and environ, the task's
    environment (where $AZURE_IMDS_URL is looked up instead of the controller's)."""

    def __init__(self, clock=None, sleep=None, wall_clock=None, connection_factory=None, rng=None,
                 exchange=None, environ=None):
        self.clock = clock or time.monotonic
        self.sleep = sleep or time.sleep
        self.wall_clock = wall_clock or time.time
        self.connection_factory = connection_factory
        self.rng = rng
        self.exchange = exchange
        self.environ = environ

    def client(self, params):
        return _options.client_from_params(params, clock=self.clock, sleep=self.sleep, wall_clock=self.wall_clock,
                                           connection_factory=self.connection_factory, rng=self.rng,
                                           exchange=self.exchange, environ=self.environ)


def run(module, execute, runtime=None, raw_args=None):
    """Call execute(module, client, runtime); every error of the client ends as one fail_json.

    raw_args are the options before type conversion; a module run reads them from its input, the
    controller passes the task's."""
    runtime = runtime or Runtime()
    client = None
    try:
        _options.check_numbers(module.params, _options.raw_module_args() if raw_args is None else raw_args)
        for warning in _options.check_filters(module.params):
            module.warn(warning)
        client = runtime.client(module.params)
        execute(module, client, runtime)
    except _edge.ImdsError as exc:
        module.fail_json(msg=str(exc), **exc.to_dict())
    except _edge.ImdsInputError as exc:
        module.fail_json(msg=str(exc), url=None, status=None, imds_error=None, hint=None)
    finally:
        if client is not None:
            client.close()


def resource_name(module, client, needed_by=None):
    """This VM's name as Resources spells it, or None when IMDS does not know it and nothing needs it.

    needed_by names the option that cannot work without the name; then a failure is final.
    """
    try:
        return _options.resolve_resource_name(client, module.params)
    except _edge.ImdsHttpError as exc:
        if exc.status != 404:
            raise
        if needed_by:
            raise _edge.ImdsHttpError("%s %s needs this VM's name: set resource_name to the VM name as event "
                                      "Resources spell it." % (exc, needed_by),
                                      url=exc.url, status=exc.status, imds_error=exc.imds_error)
        module.warn("IMDS did not tell this VM's name (%s), so affects_this_host is false for every event. "
                    "Set resource_name to the VM name as event Resources spell it." % exc)
        return None


def report_unreadable(module, scheduled):
    """One module warning per field of the document that could not be read (see ScheduledEvents.warnings)."""
    for warning in scheduled.warnings:
        module.warn("Scheduled Events document (incarnation %d): %s" % (scheduled.incarnation, warning))


def annotated(events, name, runtime):
    return _event.annotate_events(events, name, now_epoch=runtime.wall_clock())
