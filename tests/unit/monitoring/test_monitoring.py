# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""extensions/monitoring/: the alert rules and the Grafana dashboard use only the watcher's metrics,
with their labels, in expressions that parse.

promtool is not installed on the test machines (Debian ships it in the prometheus package), so
the expressions go through tests/unit/monitoring/promql.py, a parser of the PromQL these files use.
"""

import json
import os
import re

import pytest
import yaml

from .promql import PromQLError, parse

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
MONITORING = os.path.join(ROOT, "extensions", "monitoring")
RULES = os.path.join(MONITORING, "azure_imds_watcher_alerts.yml")
DASHBOARD = os.path.join(MONITORING, "azure_imds_watcher_dashboard.json")

# The contract between the watcher and these files: name -> (type, labels).
CONTRACT = {
    "azure_imds_watcher_build_info": ("gauge", ("version",)),
    "azure_imds_watcher_start_time_seconds": ("gauge", ()),
    "azure_imds_watcher_last_loop_timestamp_seconds": ("gauge", ()),
    "azure_imds_watcher_polls_total": ("counter", ("outcome",)),
    "azure_imds_watcher_imds_request_duration_seconds": ("histogram", ()),
    "azure_imds_watcher_last_successful_poll_timestamp_seconds": ("gauge", ()),
    "azure_imds_watcher_document_incarnation": ("gauge", ()),
    "azure_imds_watcher_events": ("gauge", ("event_type", "event_status")),
    "azure_imds_watcher_events_seen_total": ("counter", ("event_type",)),
    "azure_imds_watcher_events_auto_approved_total": ("counter", ("event_type",)),
    "azure_imds_watcher_handler_runs_total": ("counter", ("phase", "outcome")),
    "azure_imds_watcher_handler_duration_seconds": ("histogram", ("phase",)),
    "azure_imds_watcher_handlers_running": ("gauge", ()),
    "azure_imds_watcher_approvals_total": ("counter", ("outcome",)),
    "azure_imds_watcher_event_to_drain_start_seconds": ("histogram", ()),
    "azure_imds_watcher_event_to_approval_seconds": ("histogram", ()),
    "azure_imds_watcher_drains_past_not_before_total": ("counter", ()),
    "azure_imds_watcher_state_writes_total": ("counter", ("outcome",)),
    "azure_imds_watcher_notifications_total": ("counter", ("outcome",)),
    "azure_imds_watcher_notify_attempt_failures_total": ("counter", ()),
    "azure_imds_watcher_notify_outbox": ("gauge", ()),
}
LABEL_VALUES = {
    "outcome": {"ok", "http_error", "throttled", "timeout", "connection_error", "bad_document", "failed", "killed",
                "sent", "dropped"},
    "phase": {"drain", "started", "recover"},
}
# Prometheus adds these to every scraped series (node_exporter's, for the textfile collector).
TARGET_LABELS = ("instance", "job")


def series():
    """Every series name a query may use, with the labels it carries."""
    names = {}
    for name, (kind, labels) in CONTRACT.items():
        labels = set(labels) | set(TARGET_LABELS)
        if kind == "histogram":
            names[name + "_bucket"] = labels | {"le"}
            names[name + "_sum"] = labels
            names[name + "_count"] = labels
        else:
            names[name] = labels
    return names


SERIES = series()
ALL_LABELS = set().union(*SERIES.values())


def check_expression(expr, template=False):
    """Parse expr and check every selector against the contract; returns the metric names used."""
    parsed = parse(expr, template=template)
    used = set()
    for selector in parsed.selectors:
        assert selector.name is not None, "a selector without a metric name in %r" % expr
        assert selector.name in SERIES, "%s is not a metric the watcher writes (in %r)" % (selector.name, expr)
        used.add(selector.name)
        for label, operator, value in selector.matchers:
            assert label in SERIES[selector.name], "%s has no label %s (in %r)" % (selector.name, label, expr)
            if label in LABEL_VALUES and operator in ("=", "!="):
                assert value in LABEL_VALUES[label], "%s=%r is not a value the watcher writes (in %r)" % (label, value, expr)
    for label in parsed.grouping_labels:
        assert label in ALL_LABELS, "grouping by %s, which no watcher metric has (in %r)" % (label, expr)
    return used


def base_name(name):
    for suffix in ("_bucket", "_sum", "_count"):
        if name.endswith(suffix) and name[:-len(suffix)] in CONTRACT:
            return name[:-len(suffix)]
    return name


# -- the checker itself -------------------------------------------------------------------------------

@pytest.mark.parametrize("expr, problem", [
    ("sum(rate(azure_imds_watcher_polls_total[5m])", "expected )"),
    ("rate(azure_imds_watcher_polls_total[5x])", "not a duration"),
    ("azure_imds_watcher_polls_total{outcome=ok}", "expected string"),
    ("rated(azure_imds_watcher_polls_total[5m])", "unknown function"),
    ("azure_imds_watcher_polls_total azure_imds_watcher_events", "after a complete expression"),
    ("azure_imds_watcher_polls_total >", "expected an expression"),
])
def test_the_parser_refuses_broken_expressions(expr, problem):
    with pytest.raises(PromQLError, match=re.escape(problem)):
        parse(expr)


@pytest.mark.parametrize("expr, problem", [
    ("azure_imds_watcher_poll_total", "not a metric the watcher writes"),
    ("azure_imds_watcher_events{event_kind=\"Reboot\"}", "has no label event_kind"),
    ("azure_imds_watcher_polls_total{outcome=\"error\"}", "not a value the watcher writes"),
    ("sum by (event_kind) (azure_imds_watcher_events)", "no watcher metric has"),
    ("azure_imds_watcher_imds_request_duration_seconds_bucket{outcome=\"ok\"}", "has no label outcome"),
])
def test_the_contract_check_refuses_names_and_labels_the_watcher_does_not_write(expr, problem):
    with pytest.raises(AssertionError, match=re.escape(problem)):
        check_expression(expr)


# -- the alert rules -------------------------------------------------------------------------------

def load_rules():
    with open(RULES, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def all_rules():
    return [rule for group in load_rules()["groups"] for rule in group["rules"]]


def test_rule_file_has_the_structure_prometheus_loads():
    document = load_rules()
    assert set(document) == {"groups"}
    names = [group["name"] for group in document["groups"]]
    assert len(names) == len(set(names)) and all(names)
    for group in document["groups"]:
        assert set(group) <= {"name", "interval", "rules", "limit"}
        assert group["rules"], group["name"]
        for rule in group["rules"]:
            assert set(rule) <= {"alert", "expr", "for", "keep_firing_for", "labels", "annotations"}, rule
            assert re.match(r"^[A-Z][A-Za-z0-9]+$", rule["alert"]), rule["alert"]
            assert rule["labels"]["severity"] in ("critical", "warning"), rule["alert"]
            assert rule["annotations"]["summary"].strip() and rule["annotations"]["description"].strip(), rule["alert"]
            if "for" in rule:
                assert re.match(r"^(\d+(ms|[smhdwy]))+$", rule["for"]), rule["alert"]
    alerts = [rule["alert"] for rule in all_rules()]
    assert len(alerts) == len(set(alerts))


@pytest.mark.parametrize("rule", all_rules(), ids=lambda rule: rule["alert"])
def test_every_rule_expression_parses_and_uses_only_the_contract(rule):
    assert check_expression(rule["expr"])


@pytest.mark.parametrize("rule", all_rules(), ids=lambda rule: rule["alert"])
def test_annotations_are_valid_templates_that_use_only_labels_the_expression_keeps(rule):
    parsed = parse(rule["expr"])
    kept = set(parsed.grouping_labels) if any(f in ("sum", "count", "max", "min", "avg") for f in parsed.functions) \
        else set(ALL_LABELS)
    for text in rule["annotations"].values():
        assert text.count("{{") == text.count("}}"), text
        for template in re.findall(r"\{\{(.*?)\}\}", text):
            template = template.strip()
            assert re.match(r"^\$(value|labels\.[a-z_]+)( \| (humanizeDuration|humanize))?$", template), template
            label = re.match(r"^\$labels\.([a-z_]+)", template)
            if label:
                assert label.group(1) in kept, "%s: $labels.%s is not kept by %r" % (rule["alert"], label.group(1), rule["expr"])


# What each alert the issue asks for must watch.
WANTED = {
    "AzureImdsWatcherDown": "azure_imds_watcher_last_loop_timestamp_seconds",
    "AzureImdsWatcherMetricsAbsent": "azure_imds_watcher_last_loop_timestamp_seconds",
    "AzureImdsWatcherPollsFailing": "azure_imds_watcher_last_successful_poll_timestamp_seconds",
    "AzureImdsWatcherHandlerFailed": "azure_imds_watcher_handler_runs_total",
    "AzureImdsWatcherDrainPastNotBefore": "azure_imds_watcher_drains_past_not_before_total",
}


def test_the_alerts_of_the_issue_exist_and_watch_what_they_are_named_for():
    rules = dict((rule["alert"], rule) for rule in all_rules())
    for alert, metric in WANTED.items():
        assert metric in check_expression(rules[alert]["expr"]), alert
    down = rules["AzureImdsWatcherDown"]["expr"]
    assert re.search(r"time\(\) - azure_imds_watcher_last_loop_timestamp_seconds\) > 120\b", down), down
    assert parse(rules["AzureImdsWatcherMetricsAbsent"]["expr"]).functions == ["absent"]
    assert "> 300" in rules["AzureImdsWatcherPollsFailing"]["expr"]
    handler = parse(rules["AzureImdsWatcherHandlerFailed"]["expr"])
    assert ("outcome", "!=", "ok") in handler.selectors[0].matchers
    assert "increase" in parse(rules["AzureImdsWatcherDrainPastNotBefore"]["expr"]).functions


# -- the dashboard -----------------------------------------------------------------------------------

def load_dashboard():
    with open(DASHBOARD, encoding="utf-8") as handle:
        return json.load(handle)


def panels():
    return [panel for panel in load_dashboard()["panels"] if panel["type"] != "row"]


def test_dashboard_has_the_top_level_fields_grafana_imports():
    dashboard = load_dashboard()
    for key in ("title", "uid", "panels", "templating", "schemaVersion", "time"):
        assert key in dashboard, key
    assert re.match(r"^[a-zA-Z0-9_-]{1,40}$", dashboard["uid"])
    variables = dict((variable["name"], variable) for variable in dashboard["templating"]["list"])
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    instance = variables["instance"]
    assert instance["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
    assert check_expression(instance["query"]["query"], template=True) == {"azure_imds_watcher_build_info"}
    assert instance["definition"] == instance["query"]["query"]


def test_panels_have_unique_ids_titles_and_places_on_the_grid():
    every = load_dashboard()["panels"]
    ids = [panel["id"] for panel in every]
    assert len(ids) == len(set(ids))
    titles = [panel["title"] for panel in panels()]
    assert len(titles) == len(set(titles))
    taken = set()
    for panel in every:
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["w"] > 0 and grid["x"] + grid["w"] <= 24, panel["title"]
        cells = set((x, y) for x in range(grid["x"], grid["x"] + grid["w"]) for y in range(grid["y"], grid["y"] + grid["h"]))
        assert not cells & taken, "%s overlaps another panel" % panel["title"]
        taken |= cells


@pytest.mark.parametrize("panel", panels(), ids=lambda panel: panel["title"])
def test_every_panel_has_a_datasource_and_targets_that_use_only_the_contract(panel):
    assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
    assert panel["type"] in ("stat", "timeseries", "table", "gauge", "bargauge")
    assert panel["targets"]
    ref_ids = [target["refId"] for target in panel["targets"]]
    assert len(ref_ids) == len(set(ref_ids))
    for target in panel["targets"]:
        assert target["datasource"] == panel["datasource"]
        used = check_expression(target["expr"])
        assert used, target["expr"]
        selectors = parse(target["expr"]).selectors
        # One dashboard for a fleet: every query follows the instance picker.
        for selector in selectors:
            assert ("instance", "=~", "$instance") in selector.matchers, target["expr"]
        for legend in re.findall(r"\{\{(\w+)\}\}", target.get("legendFormat", "")):
            assert legend in ALL_LABELS, (panel["title"], legend)


def test_dashboard_shows_what_the_issue_lists():
    used = set()
    for panel in panels():
        for target in panel["targets"]:
            used |= set(base_name(name) for name in check_expression(target["expr"]))
    wanted = {"azure_imds_watcher_polls_total", "azure_imds_watcher_last_successful_poll_timestamp_seconds",
              "azure_imds_watcher_imds_request_duration_seconds", "azure_imds_watcher_events",
              "azure_imds_watcher_handler_runs_total", "azure_imds_watcher_handler_duration_seconds",
              "azure_imds_watcher_approvals_total", "azure_imds_watcher_event_to_drain_start_seconds",
              "azure_imds_watcher_event_to_approval_seconds", "azure_imds_watcher_handlers_running",
              "azure_imds_watcher_last_loop_timestamp_seconds"}
    assert wanted <= used, wanted - used


def test_histograms_are_read_through_their_buckets_with_le_kept():
    for panel in panels():
        for target in panel["targets"]:
            expr = target["expr"]
            if "histogram_quantile" in expr:
                parsed = parse(expr)
                assert "le" in parsed.grouping_labels, expr
                assert all(selector.name.endswith("_bucket") for selector in parsed.selectors), expr


# -- the contract against the watcher itself ---------------------------------------------------------

def rendered_watcher_metrics():
    """The families (name -> (type, label names)) the watcher daemon writes, every labelled series filled."""
    from prometheus_client.parser import text_string_to_metric_families  # pylint: disable=import-outside-toplevel
    from ansible_collections.azure_imds.scheduled_events.roles.watcher.files.scheduled_events_watcher import (  # noqa: E501
        metrics as watcher_metrics)  # pylint: disable=import-outside-toplevel
    metrics = watcher_metrics.WatcherMetrics("1.0.0", 1000.0)
    metrics.document(3, [{"event_id": "A", "event_type": "Reboot", "event_status": "Scheduled"}], lambda event: True, 1001.0)
    families = {}
    values = {}
    for family in text_string_to_metric_families(metrics.render()):
        labels = set()
        for sample in family.samples:
            labels |= set(sample.labels) - {"le"}
            for label in LABEL_VALUES:
                if label in sample.labels:
                    values.setdefault(label, set()).add(sample.labels[label])
        families[family.name] = (family.type, tuple(sorted(labels)))
    return families, values


def test_the_contract_is_what_the_watcher_writes():
    written, values = rendered_watcher_metrics()
    # Every outcome and phase a query may name is one the watcher writes (its series start at 0).
    assert values == LABEL_VALUES
    # prometheus_client names a counter's family without its _total suffix.
    expected = dict(((name[:-len("_total")] if kind == "counter" else name), (kind, tuple(sorted(labels))))
                    for name, (kind, labels) in CONTRACT.items())
    assert written == expected
