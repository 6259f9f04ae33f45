"""The test stand-in of ansible.windows.win_uri against the real win_uri's own documentation and code.

The win_uri path's end-to-end tests run a Python stand-in (tests/support/win_uri_standin), since no
Windows host runs here. This file holds it to ansible.windows' win_uri (DOCUMENTATION, the
web_request doc fragment, RETURN, and win_uri.ps1 for what RETURN does not promise), taken from the
`ansible` package by tests/harness/prepare.d/26-windows-collection.sh: an option, a default, a type
or a returned key that drifts fails here.
"""

import importlib.util
import os

import pytest
import yaml

from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _defaults, _edge, _imds
from ansible_collections.azure_imds.scheduled_events.plugins.plugin_utils import _win_uri
from ansible_collections.azure_imds.scheduled_events.tests.harness import collection_path

STANDIN_PATH = os.path.join(collection_path.ROOT, "tests", "support", "win_uri_standin", "ansible_collections", "ansible",
                            "windows", "plugins", "modules", "win_uri.py")
REAL = os.path.join(collection_path.ROOT, collection_path.WINDOWS_COLLECTIONS, "ansible_collections", "ansible",
                    "windows")


def _read_real(*parts):
    path = os.path.join(REAL, *parts)
    if not os.path.exists(path):
        raise AssertionError("%s is missing: run tests/harness/prepare units (it takes ansible.windows out of the "
                             "ansible package into %s)" % (path, collection_path.WINDOWS_COLLECTIONS))
    with open(path) as handle:
        return handle.read()


def _python_constant(source, name):
    namespace = {}
    # The documentation modules are plain assignments of raw strings; only those lines are run.
    start = source.index("%s = r" % name)
    quote = source[start + len(name) + 4:start + len(name) + 7]
    end = source.index(quote, start + len(name) + 7) + 3
    exec(source[start:end], namespace)  # pylint: disable=exec-used
    return namespace[name]


def _load_standin():
    # By its path: it is the module ansible.windows.win_uri only on the collections path of the tests
    # that run it, and must not be importable as that here.
    spec = importlib.util.spec_from_file_location("win_uri_standin", STANDIN_PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


win_uri_standin = _load_standin()


@pytest.fixture(scope="module")
def real_options():
    """win_uri's options as ansible-doc shows them: its own, merged over the web_request fragment."""
    module = _read_real("plugins", "modules", "win_uri.py")
    fragment = _read_real("plugins", "doc_fragments", "web_request.py")
    options = yaml.safe_load(_python_constant(fragment, "DOCUMENTATION"))["options"]
    for name, doc in yaml.safe_load(_python_constant(module, "DOCUMENTATION"))["options"].items():
        options[name] = dict(options.get(name, {}), **doc)
    return options


@pytest.fixture(scope="module")
def real_return():
    return yaml.safe_load(_python_constant(_read_real("plugins", "modules", "win_uri.py"), "RETURN"))


def _names(options):
    names = {}
    for name, doc in options.items():
        for alias in [name] + list(doc.get("aliases") or []):
            names[alias] = name
    return names


def test_the_stand_in_takes_each_option_as_win_uri_documents_it(real_options):
    spec = win_uri_standin.argument_spec()
    for name, arg in spec.items():
        assert name in real_options, "the stand-in takes %s, which win_uri does not document" % name
        doc = real_options[name]
        assert doc.get("type", "str") == arg["type"], name
        assert doc.get("elements") == arg.get("elements"), name
        assert doc.get("choices") == arg.get("choices"), name
        assert sorted(doc.get("aliases") or []) == sorted(arg.get("aliases") or []), name
        assert bool(doc.get("required", False)) == bool(arg.get("required", False)), name
        default = doc.get("default")
        if arg["type"] == "bool" and isinstance(default, str):
            default = default in ("yes", "true")
        assert default == arg.get("default"), name


def test_every_option_the_collection_passes_is_taken_by_both(real_options):
    request = _imds.Request("POST", "http://127.0.0.1:9/metadata/scheduledevents?api-version=2020-07-01",
                            "/metadata/scheduledevents?api-version=2020-07-01", _imds.request_headers("{}"), "{}")
    args = _win_uri.win_uri_args(request, _edge.Deadline(7.5))
    standin_names = _names(win_uri_standin.argument_spec())
    real_names = _names(real_options)
    for name in args:
        assert name in real_names, "win_uri does not document %s" % name
        assert standin_names.get(name) == real_names[name], name
    # What the issue asks of the exchange, in win_uri's own terms.
    assert args["use_proxy"] is False and args["follow_redirects"] == "none"
    assert args["headers"] == {"Metadata": "true"} and args["http_agent"] == _defaults.USER_AGENT
    assert args["timeout"] == 8 and isinstance(args["timeout"], int)
    assert args["status_code"] == list(range(100, 600)) and args["return_content"] is True
    assert (args["body"], args["content_type"]) == ("{}", "application/json")


def test_the_keys_the_collection_reads_are_in_win_uri_s_return_with_their_types(real_return):
    for key, type_name in (("status_code", "int"), ("status_description", "str"), ("content", "str"),
                           ("elapsed", "float"), ("url", "str")):
        assert key in real_return, key
        assert real_return[key]["type"] == type_name, key
    standin_return = yaml.safe_load(win_uri_standin.RETURN)
    assert sorted(standin_return) == sorted(real_return)
    for key, doc in real_return.items():
        assert standin_return[key]["type"] == doc["type"], key


def test_what_return_does_not_promise_is_still_in_win_uri_s_code():
    """The headers as keys (Retry-After as retry_after), answers of every status handed to the
    module, and the message of a request that failed: read from win_uri.ps1, since RETURN is silent."""
    code = _read_real("plugins", "modules", "win_uri.ps1")
    assert "$Response.Headers.GetEnumerator()" in code
    assert '$header_key.Replace("-", "")' in code and "Convert-StringToSnakeCase -string $header_key" in code
    assert "-IgnoreBadResponse" in code
    assert "Unhandled exception occurred when sending web request. Exception: " in code
    assert _win_uri._SEND_FAILED in code
    assert "$status_code -notcontains $Response.StatusCode" in code
    assert [win_uri_standin.snake_header(name) for name in ("Retry-After", "Location", "Content-Type")] == [
        key for key, _name in _win_uri._HEADER_KEYS]
