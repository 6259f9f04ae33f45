"""The scheduled_event_wait action plugin with a faked _execute_module and a fake clock.

The state machine itself is tested in tests/unit/plugins/plugin_utils/test_wait_state.py; here:
argument validation before anything runs, what is passed to scheduled_event_info, connection
failures and resets, check mode, the result against RETURN, and the docs against the argspec.
"""

import threading
from unittest import mock

import pytest
import yaml
from ansible.errors import AnsibleActionFail, AnsibleConnectionFailure, AnsibleError
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.azure_imds.scheduled_events.plugins.action import scheduled_event_wait as action_mod
from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _options
from ansible_collections.azure_imds.scheduled_events.plugins.modules import scheduled_event_info
from ansible_collections.azure_imds.scheduled_events.plugins.modules import scheduled_event_wait as docs
from ansible_collections.azure_imds.scheduled_events.plugins.plugin_utils import _wait_state

from ansible_collections.azure_imds.scheduled_events.tests.support.fakes import FakeClock
from ansible_collections.azure_imds.scheduled_events.tests.support.module_harness import compare_options, documented_options

FQCN = "azure_imds.scheduled_events.scheduled_event_wait"
URL = "http://127.0.0.1:8080/vm/vm0"
EVENT_ID = "C7061BAC-AFDC-4513-B24B-AA5F13A16123"
RAW_EVENT = {"EventId": EVENT_ID, "EventStatus": "Scheduled", "EventType": "Reboot",
             "ResourceType": "VirtualMachine", "Resources": ["vm0"], "NotBefore": "Mon, 11 Apr 2022 22:26:58 GMT",
             "Description": "", "EventSource": "Platform", "DurationInSeconds": -1}
EVENT = {"event_id": EVENT_ID, "event_type": "Reboot", "event_status": "Scheduled", "resource_type": "VirtualMachine",
         "resources": ["vm0"], "not_before": "2022-04-11T22:26:58Z", "description": "", "event_source": "Platform",
         "duration_in_seconds": -1, "affects_this_host": True, "seconds_to_not_before": 120.0}


def info_result(incarnation, with_event=False, polls=1, watched=0.0):
    return {"changed": False, "document_incarnation": incarnation, "resource_name": "vm0", "api_version": "2020-07-01",
            "document": {"DocumentIncarnation": incarnation, "Events": [RAW_EVENT] if with_event else []},
            "events": [dict(EVENT)] if with_event else [], "watched": watched, "polls": polls}


# A step that hangs like an SSH session to a VM reset under it: neither answers nor fails until the
# connection is reset, then fails as a lost connection.
HANG = "hang"


class FakeConnection:
    """The connection the action sees: options, reset() and the shell's tmpdir."""

    def __init__(self, options=None):
        self.options = dict(options or {})
        self.resets = 0
        self.reset_done = threading.Event()
        self.timeouts_set = []
        self._shell = mock.MagicMock()
        self._shell.tmpdir = None
        # A POSIX shell, as the sh plugin says (a PowerShell one takes the win_uri path).
        self._shell.SHELL_FAMILY = "sh"
        self._shell._IS_WINDOWS = False

    def get_option(self, name):
        if name not in self.options:
            raise KeyError("Requested entry (plugin_type: connection setting: %s) was not defined" % name)
        return self.options[name]

    def set_option(self, name, value):
        self.get_option(name)
        self.options[name] = value
        self.timeouts_set.append(value)

    def reset(self):
        self.resets += 1
        self.reset_done.set()


class Harness:
    """One action run: steps are what each _execute_module call returns (or raises) and its cost."""

    def __init__(self, args, steps=(), check_mode=False, connection=None):
        self.clock = FakeClock()
        self.steps = list(steps)
        self.calls = []
        task = mock.MagicMock()
        task.args = dict(args)
        task.check_mode = check_mode
        task.async_val = 0
        task.action = FQCN
        self.connection = connection or FakeConnection()
        self.action = action_mod.ActionModule(task, self.connection, mock.MagicMock(), loader=None, templar=None,
                                              shared_loader_obj=None)
        self.action._load_name = FQCN
        self.action._clock = self.clock
        self.action._sleep = self.clock.sleep
        self.action._execute_module = self._execute_module
        self.action._remove_tmp_path = mock.MagicMock()
        self.action._join = self._join
        self.joins = []             # (patience, whether the run was then found finished)
        self._started = threading.Event()
        self._hanging = False

    def _execute_module(self, module_name=None, module_args=None, task_vars=None, **kwargs):
        self.calls.append((module_name, dict(module_args), dict(self.connection.options), self.clock.now))
        assert self.steps, "more module runs than scripted: %r" % (module_args,)
        outcome, cost = self.steps.pop(0)
        self._hanging = outcome == HANG
        self._started.set()
        if self._hanging:
            self.connection.reset_done.clear()
            assert self.connection.reset_done.wait(10), "a hanging run was never ended by a connection reset"
            self.clock.now += cost
            raise AnsibleConnectionFailure("Shared connection to web_0 closed.")
        self.clock.now += cost
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def _join(self, thread, seconds):
        """The action's wait for a run's answer, without waiting: a hanging run is overdue at once."""
        self._started.wait(10)
        if self._hanging and not self.connection.reset_done.is_set():
            self.clock.now += seconds
            self.joins.append((seconds, False))
            return False
        thread.join(10)
        self._started.clear()
        self.joins.append((seconds, not thread.is_alive()))
        return not thread.is_alive()

    def run(self):
        return self.action.run(task_vars={"inventory_hostname": "vm0"})


# -- the documentation and the argspec ------------------------------------------------------------

def test_documented_options_match_the_argspec():
    documented = documented_options(docs)
    spec = action_mod.argument_spec()
    # progress_interval's range (0, or from 1 up) is the action's own, checked by test_progress_interval_docs.
    progress_doc, progress_spec = documented.pop("progress_interval"), spec.pop("progress_interval")
    compare_options(yaml.safe_dump({"options": documented}), spec)
    assert progress_doc["type"] == progress_spec["type"] == "float"
    assert float(progress_doc["default"]) == progress_spec["default"] == 60.0


def test_progress_interval_docs_state_the_range_the_action_checks():
    description = " ".join(" ".join(documented_options(docs)["progress_interval"]["description"]).split())
    assert action_mod.progress_range_text() in description
    assert action_mod.progress_range_text() == "V(0) turns the lines off; otherwise a number of seconds from 1 to 86400."


def test_docs_state_choices_are_the_state_machine_s():
    assert action_mod.argument_spec()["state"]["choices"] == list(_wait_state.STATES)


def test_examples_use_fqcn_and_start_with_a_document_marker():
    assert docs.EXAMPLES.lstrip().startswith("---")
    tasks = yaml.safe_load(docs.EXAMPLES)
    names = []
    for task in tasks:
        names.extend(t for t in task if "." in t)
        for inner in task.get("block", []):
            names.extend(t for t in inner if "." in t)
    assert FQCN in names and all(n.count(".") == 2 for n in names), names


def test_return_documents_every_key_of_a_successful_result_with_matching_types():
    returned = yaml.safe_load(docs.RETURN)
    harness = Harness({"imds_url": URL}, [(info_result(3), 0.1)])
    result = harness.run()
    python_types = {"float": float, "int": int, "list": list, "dict": dict, "str": str}
    for key in set(result) - {"changed"}:
        assert key in returned, key
        assert isinstance(result[key], python_types[returned[key]["type"]]), key
        assert returned[key]["returned"] and "sample" in returned[key], key
        assert isinstance(returned[key]["sample"], python_types[returned[key]["type"]]), key


# -- what runs on the managed host ------------------------------------------------------------------

def test_runs_the_info_module_with_the_filters_and_clamped_timeouts():
    args = {"imds_url": URL, "event_types": ["Reboot"], "event_statuses": ["Scheduled"], "this_host_only": True,
            "event_ids": [EVENT_ID.lower()], "timeout": 50, "sleep": 2}
    harness = Harness(args, [(info_result(2, with_event=True), 0.2), (info_result(3), 10.0)])
    result = harness.run()
    assert not result.get("failed") and result["changed"] is False
    assert [call[0] for call in harness.calls] == ["azure_imds.scheduled_events.scheduled_event_info"] * 2
    first, second = [call[1] for call in harness.calls]
    assert first == {"imds_url": URL, "api_version": "2020-07-01", "event_types": ["Reboot"],
                     "event_statuses": ["Scheduled"], "event_ids": [EVENT_ID.lower()], "this_host_only": True,
                     "request_timeout": 50.0, "retry_timeout": 50.0,
                     # One run reads, and watches on unless the state already holds (no plain read first).
                     "watch_unless_state": "absent", "max_wait": 50.0, "poll_interval": 2.0}
    assert second["changed_since"] == 2 and second["max_wait"] == pytest.approx(49.8)
    assert second["poll_interval"] == 2.0 and second["resource_name"] == "vm0"
    assert result["polls"] == 2 and result["document_incarnation"] == 3 and result["events"] == []


def test_every_set_of_module_args_is_accepted_by_the_info_module_s_argspec():
    harness = Harness({"imds_url": URL, "event_sources": ["Platform"], "timeout": 300},
                      [(info_result(2, with_event=True), 0.2), (info_result(2, with_event=True), 120.0),
                       (info_result(5), 3.0)])
    harness.run()
    validator = ArgumentSpecValidator(scheduled_event_info.argument_spec())
    for module_args in [call[1] for call in harness.calls]:
        outcome = validator.validate(module_args)
        assert outcome.error_messages == [], (module_args, outcome.error_messages)


def test_success_returns_elapsed_polls_events_and_document():
    harness = Harness({"imds_url": URL, "state": "present", "delay": 2},
                      [(info_result(1), 0.5), (info_result(2, with_event=True, polls=7), 6.5)])
    result = harness.run()
    assert result["elapsed"] == 9.0 and result["polls"] == 8
    assert result["events"] == [EVENT] and result["document"]["Events"] == [RAW_EVENT]
    assert harness.clock.sleeps[0] == 2.0, "delay comes first"
    harness.action._remove_tmp_path.assert_called_once()


def test_timeout_fails_naming_the_state_and_the_last_document_and_still_returns_elapsed_and_polls():
    harness = Harness({"imds_url": URL, "timeout": 30, "event_types": ["Reboot"]},
                      [(info_result(2, with_event=True), 0.1), (info_result(2, with_event=True, polls=30), 29.9)])
    result = harness.run()
    assert result["failed"] is True
    assert result["msg"].startswith("Timed out after 30.0s (timeout=30) waiting for state=absent; last seen: "
                                    "DocumentIncarnation 2 with 1 matching event (Reboot %s Scheduled)" % EVENT_ID)
    assert result["elapsed"] == 30.0 and result["polls"] == 31 and result["events"] == [EVENT]


def test_timeout_fails_with_msg_when_given():
    harness = Harness({"imds_url": URL, "timeout": 5, "msg": "maintenance still pending"},
                      [(info_result(2, with_event=True), 0.1), (info_result(2, with_event=True), 4.9)])
    result = harness.run()
    assert result["failed"] is True and result["msg"] == "maintenance still pending"
    assert result["elapsed"] == 5.0 and result["polls"] == 2


def test_check_mode_still_runs_the_wait():
    harness = Harness({"imds_url": URL, "state": "changed"}, [(info_result(4), 0.1), (info_result(5), 3.0)],
                      check_mode=True)
    result = harness.run()
    assert not result.get("failed") and not result.get("skipped") and result["changed"] is False
    assert len(harness.calls) == 2 and result["document_incarnation"] == 5


def test_condition_alone_decides_and_sees_the_raw_document():
    harness = Harness({"imds_url": URL, "condition": "DocumentIncarnation == `6`"},
                      [(info_result(5), 0.1), (info_result(6, with_event=True), 2.0)])
    result = harness.run()
    assert not result.get("failed") and result["events"] == [EVENT], "a pending event does not matter to it"


# -- the host going away ------------------------------------------------------------------------------

def test_connection_failures_are_retried_with_a_reset_and_the_wait_resumes():
    connection = FakeConnection({"timeout": 10})
    steps = [(info_result(2, with_event=True), 0.2),
             (AnsibleConnectionFailure("Failed to connect to the host via ssh: Connection refused"), 10.0),
             ({"unreachable": True, "msg": "Data could not be sent to remote host"}, 1.0),
             (AnsibleError("failed to transfer file to /root/.ansible/tmp/AnsiballZ_info.py"), 0.5),
             (info_result(3), 0.3)]
    harness = Harness({"imds_url": URL, "timeout": 60}, steps, connection=connection)
    result = harness.run()
    assert not result.get("failed"), result
    assert connection.resets == 2, "one reset after each connection failure"
    assert harness.calls[-1][1]["changed_since"] == 2 and harness.calls[-1][1]["resource_name"] == "vm0"
    assert harness.clock.sleeps == [1.0, 1.0, 1.0]


def test_connection_timeout_is_cut_to_the_time_left_and_restored():
    connection = FakeConnection({"timeout": 10})
    steps = [(info_result(2, with_event=True), 0.5)] + [(AnsibleConnectionFailure("refused"), 2.0)] * 3
    harness = Harness({"imds_url": URL, "timeout": 8.5}, steps, connection=connection)
    result = harness.run()
    assert result["failed"] is True and "last error: host unreachable: refused" in result["msg"]
    seen = [call[2]["timeout"] for call in harness.calls]
    assert seen == [9, 8, 5, 2], "ceil(time left) each run, never more than the configured 10"
    assert connection.options["timeout"] == 10, "restored at the end"


def test_a_connection_without_a_timeout_option_is_left_alone():
    connection = FakeConnection({})
    harness = Harness({"imds_url": URL}, [(info_result(1), 0.1)], connection=connection)
    assert not harness.run().get("failed") and connection.timeouts_set == []


def test_a_failure_of_the_first_run_fails_at_once_with_the_module_s_message():
    harness = Harness({"imds_url": URL}, [(AnsibleError("The module azure_imds.scheduled_events.scheduled_event_info "
                                                        "was not found in configured module paths"), 0.1)])
    result = harness.run()
    assert result["failed"] is True and len(harness.calls) == 1
    assert result["msg"].startswith("Could not read the Scheduled Events of this host: The module")
    assert result["elapsed"] == 0.1 and result["polls"] == 0 and result["events"] == []


def test_a_module_failure_mid_wait_is_retried():
    failed = {"failed": True, "msg": "GET %s/metadata/scheduledevents?api-version=2020-07-01 did not succeed within "
                                     "retry_timeout; last failure: HTTP 410" % URL, "status": 410}
    harness = Harness({"imds_url": URL}, [(info_result(2, with_event=True), 0.1), (failed, 60.0),
                                          (info_result(3), 1.0)])
    assert not harness.run().get("failed")


# -- refused before anything runs -------------------------------------------------------------------------

@pytest.mark.parametrize("args, message", [
    ({"condition": "Events[?"}, "not a valid JMESPath expression"),
    ({"event_types": []}, "event_types is an empty list"),
    ({"event_ids": ["1234"]}, "not an EventId"),
    ({"since_incarnation": 3}, "since_incarnation applies only to state=changed"),
    ({"state": "absent", "since_incarnation": 3}, "since_incarnation applies only to state=changed"),
    ({"sleep": 0.1}, r"sleep must be a number from 0.2 to 86400 \(seconds\), got 0.1\."),
    ({"timeout": -1}, r"timeout must be a number from 0 to 86400 \(seconds\), got -1.0\."),
    ({"delay": -2}, r"delay must be a number from 0 to 86400 \(seconds\), got -2.0\."),
    ({"imds_url": "ftp://127.0.0.1/"}, "is not an http:// URL"),
    ({"state": "gone"}, "value of state must be one of"),
    ({"timout": 5}, "Unsupported parameters for \\(%s\\) module: timout" % FQCN),
    ({"event_statuses": ["Completed"]}, "event_statuses must be one or more of: Scheduled, Started"),
])
def test_bad_input_is_refused_before_the_host_is_touched(args, message):
    args.setdefault("imds_url", URL)
    harness = Harness(args)
    with pytest.raises(AnsibleActionFail, match=message):
        harness.run()
    assert harness.calls == []


def test_missing_jmespath_is_refused_naming_pip_install(monkeypatch):
    monkeypatch.setattr(_wait_state, "jmespath", None)
    harness = Harness({"imds_url": URL, "condition": "length(Events) == `0`"})
    with pytest.raises(AnsibleActionFail, match="pip install jmespath"):
        harness.run()
    assert harness.calls == []


def test_jmespath_is_not_needed_without_a_condition(monkeypatch):
    monkeypatch.setattr(_wait_state, "jmespath", None)
    assert not Harness({"imds_url": URL}, [(info_result(1), 0.1)]).run().get("failed")


def test_a_condition_that_cannot_be_evaluated_fails_clearly():
    harness = Harness({"imds_url": URL, "condition": "length(DocumentIncarnation) > `0`"}, [(info_result(1), 0.1)])
    with pytest.raises(AnsibleActionFail, match="cannot be evaluated against the Scheduled Events document"):
        harness.run()
    harness.action._remove_tmp_path.assert_called_once()


def test_unknown_event_type_is_waited_for_with_one_warning_and_the_module_s_warnings_pass_through_once():
    harness = Harness({"imds_url": URL, "event_types": ["Hibernate"], "state": "changed"},
                      [(info_result(1), 0.1), (info_result(2), 3.0)])
    type_warning = _options.check_filters({"event_types": ["Hibernate"]})[0]
    name_warning = "IMDS did not tell this VM's name (HTTP 404), so affects_this_host is false for every event."
    for step, _cost in harness.steps:
        step["warnings"] = [type_warning, name_warning]
    result = harness.run()
    assert not result.get("failed") and result["warnings"] == [type_warning, name_warning]


def test_async_is_refused():
    harness = Harness({"imds_url": URL})
    harness.action._task.async_val = 30
    with pytest.raises(AnsibleActionFail, match="does not support async"):
        harness.run()


def test_a_run_that_hangs_is_given_up_after_its_grace_and_the_wait_resumes_after_a_reset():
    connection = FakeConnection()
    steps = [(info_result(2, with_event=True), 0.2), (HANG, 0.0), (info_result(3), 0.5)]
    # Without progress lines the answer is awaited in one piece (the pieces are tested below).
    harness = Harness({"imds_url": URL, "timeout": 600, "progress_interval": 0}, steps, connection=connection)
    result = harness.run()
    assert not result.get("failed"), result
    watch_args = harness.calls[1][1]
    assert watch_args["max_wait"] == 120.0
    # The first wait for the hanging run: its own 120 s, plus the grace.
    assert harness.joins[1] == (120.0 + _wait_state.ANSWER_GRACE, False)
    assert connection.resets >= 1, "the reset is what ends a hung session"
    # The next call collects the overdue run (a lost connection), then a new run reads the document.
    assert harness.joins[2][1] is True and len(harness.calls) == 3
    assert result["document_incarnation"] == 3
    assert result["elapsed"] == pytest.approx(0.2 + 150.0 + 1.0 + 1.0 + 0.5)


def test_a_hang_at_the_deadline_ends_the_wait_after_the_grace_not_later():
    steps = [(info_result(2, with_event=True), 0.2), (HANG, 0.0)]
    harness = Harness({"imds_url": URL, "timeout": 20}, steps)
    result = harness.run()
    assert result["failed"] is True
    assert "last error: host unreachable: no answer from the host 30.0s after the run was due to end" in result["msg"]
    assert result["elapsed"] == pytest.approx(20.0 + _wait_state.ANSWER_GRACE)
    harness.action._remove_tmp_path.assert_not_called()


def test_an_overdue_run_whose_answer_comes_late_is_used():
    harness = Harness({"imds_url": URL, "timeout": 600},
                      [(info_result(2, with_event=True), 0.2), (info_result(3), 5.0)])
    late = iter([False])

    def join_late_once(thread, seconds):
        thread.join(10)
        return next(late, True)
    harness.action._join = join_late_once
    result = harness.run()
    assert not result.get("failed") and result["document_incarnation"] == 3
    assert len(harness.calls) == 2, "no second run while the first one is in flight"


def test_an_unexpected_error_in_the_run_is_raised_in_the_task():
    harness = Harness({"imds_url": URL}, [(RuntimeError("bug"), 0.1)])
    with pytest.raises(RuntimeError, match="bug"):
        harness.run()


def test_the_discovered_interpreter_is_handed_on_to_the_host_s_facts():
    first = info_result(2, with_event=True)
    first["ansible_facts"] = {"discovered_interpreter_python": "/usr/bin/python3"}
    harness = Harness({"imds_url": URL}, [(first, 0.2), (info_result(3), 2.0)])
    result = harness.run()
    assert result["ansible_facts"] == {"discovered_interpreter_python": "/usr/bin/python3"}


# -- numbers at the edge and module failures as messages (issue 10) ------------------------------

@pytest.mark.parametrize("option, value, text", [
    ("timeout", float("nan"), "timeout must be a number from 0 to 86400 (seconds), got nan."),
    ("timeout", 1e308, "timeout must be a number from 0 to 86400 (seconds), got 1e+308."),
    ("timeout", True, "timeout must be a number from 0 to 86400 (seconds), got True."),
    ("sleep", float("inf"), "sleep must be a number from 0.2 to 86400 (seconds), got inf."),
    ("sleep", "\u0661", "sleep must be a number from 0.2 to 86400 (seconds), got '\u0661'."),
    ("delay", float("-inf"), "delay must be a number from 0 to 86400 (seconds), got -inf."),
    ("request_timeout", 0, "request_timeout must be a number from 0.1 to 86400 (seconds), got 0.0."),
    ("retry_timeout", float("nan"), "retry_timeout must be a number from 0 to 86400 (seconds), got nan."),
    ("since_incarnation", -3, "since_incarnation must be a whole number from 0 to 9223372036854775807, got -3."),
    ("imds_url", "http://127.0.0.1:99999", "imds_url 'http://127.0.0.1:99999' is not a valid URL"),
])
def test_bad_numbers_and_urls_are_refused_at_once_naming_option_value_and_range(option, value, text):
    harness = Harness({"imds_url": URL, "state": "changed", option: value})
    with pytest.raises(AnsibleActionFail) as info:
        harness.run()
    assert str(info.value.message).startswith(text), info.value.message
    assert harness.calls == []


class _ErrorSummary:
    """What ansible-core 2.19 puts in a failed module result's "exception": an object, not text."""

    class event:  # pylint: disable=invalid-name,too-few-public-methods
        msg = "'int' object is not iterable"

    def __repr__(self):
        return "CapturedErrorSummary(event=Event(msg=...))"


def test_a_module_failure_shows_its_message_never_a_raw_error_summary():
    failed = {"failed": True, "exception": _ErrorSummary()}
    harness = Harness({"imds_url": URL}, [(failed, 0.1)])
    result = harness.run()
    assert result["failed"]
    assert "CapturedErrorSummary" not in result["msg"]
    assert result["msg"] == ("Could not read the Scheduled Events of this host: the info module failed: "
                             "'int' object is not iterable")


def test_the_module_warnings_about_the_document_are_the_task_s_warnings():
    unreadable = "Scheduled Events document (incarnation 2): event #1 (EventId 1): EventId is not a string"
    step = info_result(2, with_event=True)
    step["warnings"] = [unreadable]
    harness = Harness({"imds_url": URL, "state": "present"}, [(step, 0.1)])
    result = harness.run()
    assert not result.get("failed") and result["warnings"] == [unreadable]


# -- progress lines ---------------------------------------------------------------------------------

class Lines:
    """Display.display of the action: each line with the fake clock's time."""

    def __init__(self, harness, monkeypatch):
        self.seen = []
        fake = mock.MagicMock()
        fake.display.side_effect = lambda text, *args, **kwargs: self.seen.append((harness.clock.now - 1000.0, text))
        monkeypatch.setattr(action_mod, "display", fake)
        self.fake = fake


def test_progress_lines_come_every_interval_at_default_verbosity_even_while_a_run_hangs(monkeypatch):
    connection = FakeConnection()
    steps = [(info_result(2, with_event=True), 0.2), (HANG, 0.0), (info_result(3), 0.5)]
    harness = Harness({"imds_url": URL, "timeout": 600}, steps, connection=connection)
    lines = Lines(harness, monkeypatch)
    result = harness.run()
    assert not result.get("failed"), result
    # Default interval 60 s: the hanging run (120 s of watch + the grace) is awaited in pieces that
    # end where a line is due, and the pieces add up to the same patience.
    assert [round(piece, 6) for piece, dummy in harness.joins[1:4]] == [59.8, 60.0, 30.2]
    assert sum(piece for piece, dummy in harness.joins[1:4]) == pytest.approx(120.0 + _wait_state.ANSWER_GRACE)
    assert [when for when, dummy in lines.seen] == [60.0, 120.0]
    prefix = "scheduled_event_wait vm0: waiting for state=absent; now: Reboot C7061BAC Scheduled (DocumentIncarnation 2); 1 event seen; "
    assert [text for dummy, text in lines.seen] == [prefix + "1m00s elapsed of 10m00s", prefix + "2m00s elapsed of 10m00s"]
    # Default verbosity: display(), never vvv().
    assert lines.fake.display.call_count == 2


def test_progress_line_says_the_host_stopped_answering_with_its_error(monkeypatch):
    steps = [(info_result(2, with_event=True), 0.2), (AnsibleConnectionFailure("ssh: connect to host vm0 port 22: Connection refused"), 70.0),
             (info_result(3), 0.5)]
    harness = Harness({"imds_url": URL, "timeout": 600, "progress_interval": 60}, steps)
    lines = Lines(harness, monkeypatch)
    assert not harness.run().get("failed")
    assert len(lines.seen) == 1
    assert lines.seen[0][0] == pytest.approx(70.2)
    assert ("now: the last read failed (host unreachable: ssh: connect to host vm0 port 22: Connection refused); "
            "before that Reboot C7061BAC Scheduled (DocumentIncarnation 2); 1 event seen; 1m10s elapsed of 10m00s") in lines.seen[0][1]


def test_progress_interval_zero_prints_no_line(monkeypatch):
    connection = FakeConnection()
    steps = [(info_result(2, with_event=True), 0.2), (HANG, 0.0), (info_result(3), 0.5)]
    harness = Harness({"imds_url": URL, "timeout": 600, "progress_interval": 0}, steps, connection=connection)
    lines = Lines(harness, monkeypatch)
    assert not harness.run().get("failed")
    assert harness.clock.now - 1000.0 > 150.0
    assert lines.seen == [] and lines.fake.display.call_count == 0


@pytest.mark.parametrize("value", [0.5, -1, float("nan"), float("inf"), 86401, True, u"\uff15", "nan"])
def test_a_bad_progress_interval_is_refused_naming_it_and_its_range(value):
    harness = Harness({"imds_url": URL, "progress_interval": value})
    with pytest.raises(AnsibleActionFail) as failure:
        harness.run()
    message = str(failure.value)
    assert "progress_interval must be 0 (no progress lines) or a number of seconds from 1 to 86400, got" in message
    assert harness.calls == []


@pytest.mark.parametrize("value, expected", [(0, 0.0), ("0", 0.0), (1, 1.0), ("90", 90.0), (86400, 86400.0)])
def test_a_good_progress_interval_is_taken(value, expected):
    assert action_mod.check_progress_interval(value, float(value)) == expected


# -- the Scheduled Events Policy ------------------------------------------------------------------

def test_an_event_first_seen_started_by_user_is_returned_in_auto_approved_unless_the_play_saw_it():
    started = dict(RAW_EVENT, EventStatus="Started", NotBefore="", EventSource="User")
    first = info_result(2, with_event=True)
    first["document"]["Events"] = [started]
    first["events"] = [dict(EVENT, event_status="Started", not_before=None, event_source="User")]
    harness = Harness({"imds_url": URL, "state": "completed"}, [(first, 0.1), (info_result(3), 5.0)])
    result = harness.run()
    assert not result.get("failed")
    assert result["auto_approved"] == [EVENT_ID] and result["started_before_seen"] == []
    harness = Harness({"imds_url": URL, "state": "completed", "seen_event_ids": [EVENT_ID]},
                      [(first, 0.1), (info_result(3), 5.0)])
    result = harness.run()
    assert result["auto_approved"] == [] and result["started_before_seen"] == []
    assert "seen_event_ids" not in harness.calls[0][1], "the play's knowledge stays on the controller"
