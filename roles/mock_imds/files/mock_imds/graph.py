# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Resource Graph: the part of KQL the mock understands, over the rows of maintenanceresources.

Understood: the table `maintenanceresources` (any case), then any of
`where COND [and COND ...]` with COND `FIELD OP 'value'` or `FIELD OP ('a', 'b')`, OP one of
== != =~ !~ in in~ !in !in~ (FIELD a column or properties.NAME, optionally inside tostring() or
tolower()), `extend NAME = tostring(FIELD)`, `project F[, NAME = FIELD ...]` (an unnamed
properties.X is the column properties_X, as Kusto names it), `order by`/`sort by KEY[, KEY ...]` with
KEY a FIELD or tostring()/tolower() of one and `asc` or `desc` (desc when left out, as in Kusto),
`take N`/`limit N`: so both queries Microsoft's Resource Graph page for scheduled events shows.
Strings are single- or double-quoted. Anything else is a 400 naming the part the mock does not
understand."""

from __future__ import print_function

import re

from .checks import MockError

TABLE = "maintenanceresources"
ROW_TYPE = "microsoft.maintenance/scheduledevents"
COLUMNS = ("id", "name", "type", "location", "zones", "resourceGroup", "subscriptionId", "properties")

_STRING = r"""'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*\""""
_FIELD = r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*"
_COND_RE = re.compile(r"\A\s*(?:(tostring|tolower)\(\s*(%s)\s*\)|(%s))\s*(==|!=|=~|!~|!in~|!in|in~|in)\s*(%s|\((?:\s*(?:%s)\s*,?)*\))\s*\Z"
                      % (_FIELD, _FIELD, _STRING, _STRING))
_EXTEND_RE = re.compile(r"\A([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(?:(tostring|tolower)\(\s*(%s)\s*\)|(%s))\Z" % (_FIELD, _FIELD))
_PROJECT_ITEM_RE = re.compile(r"\A(?:([A-Za-z_][A-Za-z0-9_]*)\s*=\s*)?(%s)\Z" % _FIELD)
_ORDER_RE = re.compile(r"\A(?:order|sort)\s+by\s+(.+)\Z")
# One key of `sort by`: a field, or tostring()/tolower() of one, and its direction (KQL's default: desc).
_ORDER_KEY_RE = re.compile(r"\A(?:(tostring|tolower)\(\s*(%s)\s*\)|(%s))(?:\s+(asc|desc))?\Z" % (_FIELD, _FIELD))
_TAKE_RE = re.compile(r"\A(?:take|limit)\s+([0-9]{1,6})\Z")


class QueryError(MockError):
    pass


def _split_outside_quotes(text, sep):
    parts, current, quote, escape = [], [], None, False
    for char in text:
        if quote:
            current.append(char)
            if escape:
                escape = False
            elif char == "\\":
                escape = True
            elif char == quote:
                quote = None
        elif char in "'\"":
            quote = char
            current.append(char)
        elif char == sep:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    if quote:
        raise QueryError("an unterminated string literal")
    parts.append("".join(current))
    return parts


def _literal(text):
    text = text.strip()
    return re.sub(r"\\(.)", r"\1", text[1:-1])


def _literals(text):
    text = text.strip()
    if text.startswith("("):
        return [_literal(m.group(0)) for m in re.finditer(_STRING, text)]
    return [_literal(text)]


def _getter(field, func=None):
    path = field.split(".")

    def get(row):
        value = row
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if func == "tolower" and value is not None:
            value = str(value).lower()
        elif func == "tostring" and value is not None and not isinstance(value, str):
            value = str(value)
        return value
    return get


def _condition(text):
    match = _COND_RE.match(text)
    if not match:
        raise QueryError("the condition %r" % text.strip()[:200])
    func, inner, field, op, value = match.groups()
    get = _getter(inner or field, func)
    values = _literals(value)
    fold = op.endswith("~")
    if fold:
        values = [v.lower() for v in values]
    negate = op.startswith("!")
    if op in ("==", "=~", "!=", "!~") and len(values) != 1:
        raise QueryError("the condition %r (%s takes one value)" % (text.strip()[:200], op))
    wanted = frozenset(values)

    def test(row):
        value = get(row)
        if value is None:
            return negate
        value = str(value)
        hit = (value.lower() if fold else value) in wanted
        return hit != negate
    return test


class Query(object):
    """A parsed query: filters, extends, projection, order and limit, applied to a list of rows."""

    def __init__(self, text):
        if not isinstance(text, str) or not text.strip():
            raise QueryError("an empty query")
        if len(text) > 10000:
            raise QueryError("a query longer than 10000 characters")
        stages = [s.strip() for s in _split_outside_quotes(text.strip(), "|")]
        if stages[0].lower() != TABLE:
            raise QueryError("the table %r (the mock serves only %s)" % (stages[0][:100], TABLE))
        self.steps = []
        self.columns = list(COLUMNS)
        self.projected = False
        self.take = None
        for stage in stages[1:]:
            word = stage.split(None, 1)[0].lower() if stage else ""
            rest = stage[len(word):].strip()
            if word == "where":
                tests = [_condition(part) for part in re.split(r"\s+and\s+", rest) if part.strip()]
                if not tests:
                    raise QueryError("an empty where")
                self.steps.append(("where", tests))
            elif word == "extend":
                for item in _split_outside_quotes(rest, ","):
                    match = _EXTEND_RE.match(item.strip())
                    if not match:
                        raise QueryError("the extend %r" % item.strip()[:200])
                    name, func, inner, field = match.groups()
                    self.steps.append(("extend", (name, _getter(inner or field, func))))
                    self.columns.append(name)
            elif word == "project":
                items = []
                for item in _split_outside_quotes(rest, ","):
                    match = _PROJECT_ITEM_RE.match(item.strip())
                    if not match:
                        raise QueryError("the project item %r" % item.strip()[:200])
                    alias, field = match.groups()
                    # Unnamed, a nested field's column is named as Kusto names it: properties_EventId.
                    items.append((alias or field.replace(".", "_"), _getter(field)))
                self.steps.append(("project", items))
                self.columns = [name for name, _get in items]
                self.projected = True
            elif _ORDER_RE.match(stage):
                keys = []
                for item in _ORDER_RE.match(stage).group(1).split(","):
                    match = _ORDER_KEY_RE.match(item.strip())
                    if not match:
                        raise QueryError("the sort key %r" % item.strip()[:200])
                    func, inner, field, direction = match.groups()
                    keys.append((_getter(inner or field, func), direction != "asc"))
                self.steps.append(("order", keys))
            elif _TAKE_RE.match(stage):
                self.take = int(_TAKE_RE.match(stage).group(1))
                self.steps.append(("take", self.take))
            else:
                raise QueryError("the operator %r" % stage[:200])

    @property
    def pages(self):
        """Resource Graph gives a $skipToken only when the result carries the row id."""
        return "id" in self.columns

    def run(self, rows):
        for kind, arg in self.steps:
            if kind == "where":
                rows = [r for r in rows if all(t(r) for t in arg)]
            elif kind == "extend":
                name, get = arg
                rows = [dict(r, **{name: get(r)}) for r in rows]
            elif kind == "project":
                rows = [dict((name, get(r)) for name, get in arg) for r in rows]
            elif kind == "order":
                # The last key first: Python's sort is stable, so the first key ends up deciding.
                for get, reverse in reversed(arg):
                    rows = sorted(rows, key=lambda r, get=get: (get(r) is None, str(get(r))), reverse=reverse)
            elif kind == "take":
                rows = rows[:arg]
        return rows


def table(rows, columns):
    """resultFormat table: columns with types, rows as lists."""
    def kind(value):
        if isinstance(value, dict):
            return "object"
        if isinstance(value, list):
            return "array"
        return "string"
    first = rows[0] if rows else {}
    return {"columns": [{"name": c, "type": kind(first.get(c))} for c in columns],
            "rows": [[r.get(c) for c in columns] for r in rows]}
