"""Run a module's main() the way Ansible does, with the client's clock and transport faked; check
documented options against an argument spec.

Shared by the module tests and the action plugin's tests: AnsibleModule.exit_json/fail_json are
patched to raise, the arguments go in through ansible.module_utils.testing.patch_module_args, and
the module gets a Runtime whose clock never really sleeps.
"""

import json
import os
import subprocess
import sys
from unittest import mock

import yaml
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _module_runner, _options
from ansible_collections.azure_imds.scheduled_events.tests.harness import collection_path
from ansible_collections.azure_imds.scheduled_events.tests.support.fakes import FakeClock, ScriptedTransport, answer

# Mon, 11 Apr 2022 22:00:00 GMT: the wall clock every module run sees.
NOW_EPOCH = 1649714400.0
FAKE_URL = "http://127.0.0.1:9"


class ModuleExit(Exception):
    def __init__(self, result):
        super(ModuleExit, self).__init__(result)
        self.result = result


class Run:
    def __init__(self, result, warnings, transport, clock):
        self.result = result
        self.warnings = warnings
        self.transport = transport
        self.clock = clock

    @property
    def failed(self):
        return bool(self.result.get("failed"))

    @property
    def requests(self):
        """(method, path) of every request sent, in order."""
        return [request[:2] for request in self.transport.requests]

    def posted_bodies(self):
        return [json.loads(request[2]) for request in self.transport.requests if request[0] == "POST"]


def _exit_json(self, **kwargs):
    kwargs.setdefault("changed", False)
    raise ModuleExit(kwargs)


def _fail_json(self, msg, **kwargs):
    kwargs.update(failed=True, msg=msg)
    raise ModuleExit(kwargs)


def run_module(module, args, steps=(), check_mode=False, real_connections=False, clock=None):
    """Run module.main() once. steps script the transport (see fakes.ScriptedTransport);
    real_connections=True lets the client open its own connections (to a loopback mock)."""
    clock = clock or FakeClock()
    transport = ScriptedTransport(clock, steps)
    args = dict(args)
    args.setdefault("imds_url", FAKE_URL)
    if check_mode:
        args["_ansible_check_mode"] = True
    warnings = []
    runtime = _module_runner.Runtime(clock=clock, sleep=clock.sleep, wall_clock=lambda: NOW_EPOCH,
                                     connection_factory=None if real_connections else transport, rng=lambda: 1.0)
    with patch_module_args(args), \
            mock.patch.object(basic.AnsibleModule, "exit_json", _exit_json), \
            mock.patch.object(basic.AnsibleModule, "fail_json", _fail_json), \
            mock.patch.object(basic.AnsibleModule, "warn", lambda self, text: warnings.append(text)):
        try:
            module.main(runtime)
        except ModuleExit as exc:
            return Run(exc.result, warnings, transport, clock)
    raise AssertionError("%s.main() returned without exit_json or fail_json" % module.__name__)


# -- IMDS answers ------------------------------------------------------------------------------

def raw_event(event_id, event_type="Reboot", status="Scheduled", resources=("web_0",),
              not_before="Mon, 11 Apr 2022 22:15:00 GMT", source="Platform", duration=-1, description=""):
    return {"EventId": event_id, "EventType": event_type, "EventStatus": status, "ResourceType": "VirtualMachine",
            "Resources": list(resources), "NotBefore": not_before if status == "Scheduled" else "",
            "Description": description, "EventSource": source, "DurationInSeconds": duration}


def document(*events, incarnation=1):
    return {"DocumentIncarnation": incarnation, "Events": list(events)}


def doc_answer(*events, incarnation=1):
    return answer(200, document(*events, incarnation=incarnation))


def name_answer(name="web_0"):
    return answer(200, name, headers=[("Content-Type", "text/plain")])


# -- documentation against code ------------------------------------------------------------------

def compare_options(doc_text, spec):
    """The options documented in doc_text (YAML with an options key) are those of the argument spec."""
    documented = yaml.safe_load(doc_text)["options"]
    assert sorted(documented) == sorted(spec)
    for name, doc in documented.items():
        arg = spec[name]
        assert doc["type"] == arg["type"], name
        assert doc.get("elements") == arg.get("elements"), name
        assert doc.get("choices") == arg.get("choices"), name
        default = doc.get("default")
        if arg["type"] == "float" and default is not None:
            default = float(default)
        assert default == arg.get("default"), name
        assert doc.get("required", False) == arg.get("required", False), name
        assert doc["description"], name
        if arg["type"] in ("int", "float"):
            # Every number has a checked range, and the documentation states it as the check does.
            assert name in _options.NUMBER_RANGES, name
            description = " ".join(doc["description"] if isinstance(doc["description"], list)
                                   else [doc["description"]])
            assert _options.range_text(name) in " ".join(description.split()), (name, _options.range_text(name))


def documented_options(module):
    """The module's options with its doc fragments merged in, as ansible-doc shows them."""
    from ansible_collections.azure_imds.scheduled_events.plugins.doc_fragments.imds import ModuleDocFragment
    options = {}
    options.update(yaml.safe_load(ModuleDocFragment.DOCUMENTATION)["options"])
    options.update(yaml.safe_load(ModuleDocFragment.FILTERS)["options"])
    options.update(yaml.safe_load(module.DOCUMENTATION)["options"])
    return options


def check_documented_options(module):
    """DOCUMENTATION (fragments included) and argument_spec() name the same options alike."""
    documented = documented_options(module)
    compare_options(yaml.safe_dump({"options": documented}), module.argument_spec())
    for name, doc in documented.items():
        lines = doc["description"] if isinstance(doc["description"], list) else [doc["description"]]
        assert all(isinstance(line, str) for line in lines), (name, doc["description"])


def check_examples_use_fqcn(module):
    assert module.EXAMPLES.lstrip().startswith("---")
    for task in yaml.safe_load(module.EXAMPLES):
        module_keys = [k for k in task if "." in k]
        assert len(module_keys) == 1 and module_keys[0].count(".") == 2, task


RETURN_TYPES = {"int": int, "float": float, "str": str, "bool": bool, "list": list, "dict": dict}


def check_result_against_return_doc(module, result):
    """Every documented return is there with its documented type, and nothing undocumented is."""
    documented = yaml.safe_load(module.RETURN)
    returned = set(result) - {"changed", "failed", "invocation", "warnings"}
    assert returned == set(documented), (sorted(returned), sorted(documented))
    for key, doc in documented.items():
        value = result[key]
        if value is not None:
            assert isinstance(value, RETURN_TYPES[doc["type"]]), (key, value)
            assert not (doc["type"] == "int" and isinstance(value, bool)), key
        if doc["type"] == "list" and doc.get("contains"):
            for element in value:
                assert set(element) == set(doc["contains"]), (key, sorted(element))
                for field, field_doc in doc["contains"].items():
                    if element[field] is not None:
                        assert isinstance(element[field], RETURN_TYPES[field_doc["type"]]), (key, field)


# -- running EXAMPLES against the mock -----------------------------------------------------------

COLLECTIONS_FARM = collection_path.collections_dir()


def run_examples(module, mock_url, tmp_path):
    """Run module.EXAMPLES as they are, as one play on localhost, with AZURE_IMDS_URL set.

    Returns the CompletedProcess of ansible-playbook (output in .stdout).
    """
    tasks = yaml.safe_load(module.EXAMPLES)
    playbook = [{"name": "EXAMPLES of %s" % module.__name__.rsplit(".", 1)[-1], "hosts": "localhost",
                 "gather_facts": False, "tasks": tasks}]
    path = tmp_path / "examples.yml"
    path.write_text(yaml.safe_dump(playbook, sort_keys=False))
    env = dict(os.environ)
    env.update(AZURE_IMDS_URL=mock_url, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS_FARM, ANSIBLE_NOCOLOR="1",
               ANSIBLE_HOME=str(tmp_path / "ansible-home"), ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"),
               ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default", ANSIBLE_RETRY_FILES_ENABLED="0")
    # Under ansible-test units, PYTHONPATH points at its restricted import hooks, which hide
    # ansible.cli from the ansible-playbook started here.
    env.pop("PYTHONPATH", None)
    command = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,",
               "-c", "local", "-e", "ansible_python_interpreter=%s" % sys.executable, "-v", str(path)]
    return subprocess.run(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300,
                          universal_newlines=True, check=False)


def recap(output):
    """The PLAY RECAP counters of localhost as a dict."""
    for line in output.splitlines():
        if line.startswith("localhost") and "ok=" in line:
            return dict((k, int(v)) for k, v in (item.split("=") for item in line.split(":", 1)[1].split()))
    raise AssertionError("no PLAY RECAP in:\n" + output)
