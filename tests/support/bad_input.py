# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Values no number option may take, each with a label for the test's id: the modules', the wait
action's, the roles' and the watcher's bad-input tests all try the same set."""

NUMBER_VALUES = [
    ("nan", float("nan")),
    ("+inf", float("inf")),
    ("-inf", float("-inf")),
    ("negative", -1),
    ("zero", 0),                     # only for options where zero is not a valid value
    ("huge", 1e308),
    ("string", "abc"),
    ("bool", True),
    ("list", [1]),
    ("fullwidth_5", u"\uff15"),                   # "５": float() reads it as 5.0
    ("fullwidth_1e3", u"\uff11e3"),               # "１e3": float() reads it as 1000.0
    ("nan_as_text", "nan"),
]
