# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A small PromQL parser for the tests of extensions/monitoring/: Debian's prometheus package (and
its promtool) is not installed on the test machines, and no Python PromQL parser is a dependency.

It parses the subset a dashboard or an alert rule uses (selectors, matchers, ranges, offsets,
functions, aggregations with by/without, binary operators with bool/on/ignoring/group_left) into
the selectors it contains, and raises PromQLError on anything it does not understand, so that a
typo or an unbalanced expression fails the test rather than passing unseen.
"""

import re

FUNCTIONS = {
    "abs", "absent", "absent_over_time", "avg_over_time", "ceil", "changes", "clamp", "clamp_max", "clamp_min",
    "count_over_time", "day_of_week", "delta", "deriv", "exp", "floor", "histogram_quantile", "holt_winters",
    "idelta", "increase", "irate", "label_join", "label_replace", "last_over_time", "ln", "log2", "log10",
    "max_over_time", "min_over_time", "predict_linear", "present_over_time", "quantile_over_time", "rate",
    "resets", "round", "scalar", "sort", "sort_desc", "sqrt", "stddev_over_time", "sum_over_time", "time",
    "timestamp", "vector",
}
# Grafana's label_values() is a template query, not PromQL, but has the same call shape.
TEMPLATE_FUNCTIONS = {"label_values"}
AGGREGATIONS = {"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk", "topk",
                "quantile"}
SET_OPERATORS = {"and", "or", "unless"}
BINARY = {"+", "-", "*", "/", "%", "^", "==", "!=", ">", "<", ">=", "<="} | SET_OPERATORS
COMPARISONS = {"==", "!=", ">", "<", ">=", "<="}
MATCH_OPERATORS = {"=", "!=", "=~", "!~"}
# Durations as Prometheus writes them, and the range variables Grafana fills in.
DURATION = re.compile(r"^(?:(?:\d+(?:ms|[smhdwy]))+|\$__rate_interval|\$__interval|\$__range)$")

TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
  | (?P<duration>(?:\d+(?:ms|[smhdwy]))+(?![a-zA-Z0-9_]))
  | (?P<number>\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)
  | (?P<duration_variable>\$__rate_interval|\$__interval|\$__range)
  | (?P<ident>[a-zA-Z_][a-zA-Z0-9_:]*)
  | (?P<op>=~|!~|==|!=|>=|<=|[-+*/%^<>=(){}\[\],:])
""", re.VERBOSE)


class PromQLError(ValueError):
    pass


class Selector:
    """One vector selector: its metric name (or None) and its matchers [(label, op, value)]."""

    def __init__(self, name, matchers, range_=None):
        self.name = name
        self.matchers = matchers
        self.range = range_

    def __repr__(self):
        return "Selector(%r, %r, %r)" % (self.name, self.matchers, self.range)


class Parsed:
    def __init__(self):
        self.selectors = []
        self.grouping_labels = []     # labels of by/without/on/ignoring/group_left/group_right
        self.functions = []


def tokenize(text):
    tokens = []
    position = 0
    while position < len(text):
        match = TOKEN.match(text, position)
        if not match:
            raise PromQLError("unexpected character %r at %d in %r" % (text[position], position, text))
        position = match.end()
        if match.lastgroup != "space":
            tokens.append((match.lastgroup, match.group()))
    return tokens


class _Parser:
    def __init__(self, text, template=False):
        self.text = text
        self.tokens = tokenize(text)
        self.index = 0
        self.parsed = Parsed()
        self.template = template

    # -- tokens ---------------------------------------------------------------------------------

    def peek(self, offset=0):
        at = self.index + offset
        return self.tokens[at] if at < len(self.tokens) else (None, None)

    def take(self, value=None, kind=None):
        token = self.peek()
        if (value is not None and token[1] != value) or (kind is not None and token[0] != kind):
            raise PromQLError("expected %s at token %d of %r, got %r" % (value or kind, self.index, self.text, token[1]))
        self.index += 1
        return token[1]

    def at(self, value):
        return self.peek()[1] == value

    # -- grammar ----------------------------------------------------------------------------------

    def parse(self):
        self.expression()
        if self.index != len(self.tokens):
            raise PromQLError("unexpected %r after a complete expression in %r" % (self.peek()[1], self.text))
        return self.parsed

    def expression(self):
        self.unary()
        while self.peek()[1] in BINARY and (self.peek()[0] == "op" or self.peek()[1] in SET_OPERATORS):
            operator = self.take()
            if self.at("bool"):
                if operator not in COMPARISONS:
                    raise PromQLError("bool only follows a comparison, not %r, in %r" % (operator, self.text))
                self.take("bool")
            if self.peek()[1] in ("on", "ignoring"):
                self.take()
                self.labels()
                if self.peek()[1] in ("group_left", "group_right"):
                    self.take()
                    if self.at("("):
                        self.labels()
            self.unary()

    def unary(self):
        if self.peek()[1] in ("-", "+"):
            self.take()
            self.unary()
            return
        self.primary()
        if self.at("["):
            self.range_suffix()
        if self.at("offset"):
            self.take("offset")
            self.duration()

    def primary(self):
        kind, value = self.peek()
        if kind in ("number", "string", "duration"):
            self.take()
        elif value == "(":
            self.take("(")
            self.expression()
            self.take(")")
        elif value == "{":
            self.parsed.selectors.append(Selector(None, self.matchers()))
        elif kind == "ident" and value in AGGREGATIONS:
            self.aggregation()
        elif kind == "ident" and self.peek(1)[1] == "(":
            if value not in FUNCTIONS and not (self.template and value in TEMPLATE_FUNCTIONS):
                raise PromQLError("unknown function %r in %r" % (value, self.text))
            self.parsed.functions.append(self.take())
            self.arguments()
        elif kind == "ident" and value not in BINARY and value not in ("by", "without", "on", "ignoring", "bool", "offset"):
            name = self.take()
            self.parsed.selectors.append(Selector(name, self.matchers() if self.at("{") else []))
        else:
            raise PromQLError("expected an expression at token %d of %r, got %r" % (self.index, self.text, value))

    def aggregation(self):
        self.parsed.functions.append(self.take())
        if self.peek()[1] in ("by", "without"):
            self.take()
            self.labels()
        self.arguments()
        if self.peek()[1] in ("by", "without"):
            self.take()
            self.labels()

    def arguments(self):
        self.take("(")
        if not self.at(")"):
            if self.template and self.peek()[0] == "ident" and self.peek(1)[1] in (",", ")"):
                self.parsed.selectors.append(Selector(self.take(), []))
            else:
                self.expression()
            while self.at(","):
                self.take(",")
                if self.template and self.peek()[0] == "ident" and self.peek(1)[1] == ")":
                    self.parsed.grouping_labels.append(self.take())
                else:
                    self.expression()
        self.take(")")

    def labels(self):
        self.take("(")
        while not self.at(")"):
            self.parsed.grouping_labels.append(self.take(kind="ident"))
            if not self.at(")"):
                self.take(",")
        self.take(")")

    def matchers(self):
        self.take("{")
        found = []
        while not self.at("}"):
            label = self.take(kind="ident")
            operator = self.take(kind="op")
            if operator not in MATCH_OPERATORS:
                raise PromQLError("%r is not a label matcher operator in %r" % (operator, self.text))
            value = self.take(kind="string")
            if operator in ("=~", "!~"):
                try:
                    re.compile(value[1:-1].replace("$instance", ".*"))
                except re.error as exc:
                    raise PromQLError("bad regular expression %s in %r: %s" % (value, self.text, exc)) from exc
            found.append((label, operator, value[1:-1]))
            if not self.at("}"):
                self.take(",")
        self.take("}")
        return found

    def range_suffix(self):
        self.take("[")
        self.duration()
        if self.at(":"):
            self.take(":")
            if not self.at("]"):
                self.duration()
        self.take("]")
        if not self.parsed.selectors:
            raise PromQLError("a range without a selector in %r" % self.text)

    def duration(self):
        kind, value = self.peek()
        if kind not in ("duration", "duration_variable") or not DURATION.match(value):
            raise PromQLError("%r is not a duration in %r" % (value, self.text))
        self.take()


def parse(text, template=False):
    """The selectors, grouping labels and functions of a PromQL expression; PromQLError if it does not parse."""
    if not isinstance(text, str) or not text.strip():
        raise PromQLError("an empty expression")
    return _Parser(text, template=template).parse()
