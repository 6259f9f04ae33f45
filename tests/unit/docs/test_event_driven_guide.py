# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""docs/docsite/rst/event_driven.rst, "Try it against the mock": its blocks run as written.

The mock's command runs in the checkout, the inventory is the guide's, the ansible-rulebook command
line (its -v included: the test waits for the source's line that only -v prints) and the curl that
adds the Reboot run in a shell, and vm_local.yml's maintenance rule must run rolling_maintenance,
which approves the event in the mock. The install block pins what the tests use.
"""

import json
import os
import re
import subprocess
import sys

from ansible_collections.azure_imds.scheduled_events.devtools.engine_tools import stop_group
from ansible_collections.azure_imds.scheduled_events.roles.mock_imds.files.mock_imds.testing import MockHandle
from ansible_collections.azure_imds.scheduled_events.tests.support.rulebook_engine import PLAYBOOK_TIMEOUT, ROOT, Engine, wait_until

from .test_support_range import PIP_RANGE

GUIDE = os.path.join(ROOT, "docs", "docsite", "rst", "event_driven.rst")
TRY_IT = "Try it against the mock"
MAINTENANCE_PLAY = "PLAY [Rolling maintenance driven by Azure scheduled events]"


def section(text, title):
    """The text of the section with this title, up to the next title of the same or a higher level."""
    lines = text.split("\n")
    start = lines.index(title) + 2
    underline = lines[start - 1][0]
    levels = "=-~"[:"=-~".index(underline) + 1]
    for number in range(start, len(lines) - 1):
        following = lines[number + 1]
        if lines[number] and following and len(set(following)) == 1 and following[0] in levels \
                and len(following) >= len(lines[number]):
            return "\n".join(lines[start:number])
    return "\n".join(lines[start:])


def code_blocks(text):
    """[(language, body)] of the `.. code::` blocks, in order, with their indentation removed."""
    blocks = []
    lines = text.split("\n")
    for number, line in enumerate(lines):
        found = re.match(r"^(\s*)\.\. code:: (\w+)$", line)
        if not found:
            continue
        body = []
        for following in lines[number + 1:]:
            if following.strip() and len(following) - len(following.lstrip()) <= len(found.group(1)):
                break
            body.append(following)
        indent = min(len(b) - len(b.lstrip()) for b in body if b.strip())
        blocks.append((found.group(2), "\n".join(b[indent:] for b in body).strip("\n") + "\n"))
    return blocks


def commands(console):
    """The commands of a console block: its `$ ` lines, with their continuation lines."""
    found = []
    for line in console.split("\n"):
        if line.startswith("$ "):
            found.append(line[2:])
        elif line.strip() and found and found[-1].endswith("\\"):
            found[-1] += "\n" + line
    return found


def guide_blocks():
    with open(GUIDE, encoding="utf-8") as handle:
        return code_blocks(section(handle.read(), TRY_IT))


def test_the_install_block_pins_what_the_tests_use():
    with open(GUIDE, encoding="utf-8") as handle:
        install = commands(code_blocks(section(handle.read(), "On one VM: ``vm_local.yml``"))[0][1])
    with open(os.path.join(ROOT, "tests", "unit", "requirements.txt"), encoding="utf-8") as handle:
        [pin] = [line.strip() for line in handle if line.startswith("ansible-rulebook==")]
    [pip] = [c for c in install if " install " in c and "pip" in c]
    assert pip.split()[2:] == [pin, "'%s'" % PIP_RANGE], pip
    install = [c.split("#")[0].strip() for c in install]     # without the comments that name the systems
    assert "sudo apt-get install -y openjdk-17-jre-headless" in install
    assert "sudo dnf install -y java-17-openjdk-headless" in install
    assert "ansible-galaxy collection install azure_imds-scheduled_events-<version>.tar.gz" in install


def test_vm_local_against_the_mock_as_the_guide_writes_it(tmp_path):
    [(lang_mock, mock_block), (lang_inventory, inventory), (lang_rulebook, rulebook_block),
     (lang_event, event_block)] = guide_blocks()
    assert (lang_mock, lang_inventory, lang_rulebook, lang_event) == ("console", "yaml", "console", "console")
    [mock_command] = commands(mock_block)
    port = int(re.search(r"--port (\d+)", mock_command).group(1))
    mock = MockHandle("127.0.0.1", port)
    (tmp_path / "inventory.yml").write_text(inventory)
    rulebook_script = "\n".join(commands(rulebook_block))
    assert re.search(r"^ansible-rulebook .* -v$", rulebook_script, re.M), rulebook_script

    # python3 and curl from PATH, this environment's first (as the install block's export PATH does).
    shell_env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    with open(str(tmp_path / "mock.log"), "wb") as mock_log:
        mock_process = subprocess.Popen(["bash", "-c", mock_command], cwd=ROOT, env=shell_env, stdin=subprocess.DEVNULL,
                                        stdout=mock_log, stderr=subprocess.STDOUT, start_new_session=True)
    engine = None
    try:
        def mock_answers():
            if mock_process.poll() is not None:
                raise AssertionError("the mock ended: %s" % (tmp_path / "mock.log").read_text())
            try:
                return mock.control("GET", "state") is not None
            except OSError:
                return False

        wait_until("the mock to answer on port %d" % port, mock_answers, 30)
        # PATH puts this environment's ansible-rulebook first and the collection is this checkout
        # (Engine), as the install block would; the command lines are the guide's.
        engine = Engine(tmp_path, ["bash", "-c", rulebook_script])
        engine.wait_for(r"scheduled_events: watching http://127\.0\.0\.1:%d/vm/web_1/metadata/scheduledevents"
                        r"\?api-version=2020-07-01 as web_1 every 1 s" % port)

        [event_command] = commands(event_block)
        added = subprocess.run(["bash", "-c", event_command], cwd=str(tmp_path), env=shell_env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60, check=True)
        reboot = json.loads(added.stdout.decode("utf-8"))["event_id"]
        engine.wait_for(r"^PLAY RECAP", timeout=PLAYBOOK_TIMEOUT)
        output = engine.output
        audit = mock.control("GET", "audit")
        status = mock.control("GET", "events/%s" % reboot)["status"]
    finally:
        if engine is not None:
            engine.stop()
        stop_group(mock_process, 30)

    assert "scheduled_events: scheduled %s (Reboot)" % reboot in output, engine.tail()
    # The maintenance rule's run_playbook: rolling_maintenance once, for web_1, which approved.
    assert output.count(MAINTENANCE_PLAY) == 1, engine.tail()
    assert re.search(r"^web_1\s+: ok=\d+\s+changed=\d+\s+unreachable=0\s+failed=0", output, re.M), engine.tail()
    assert [(a["vm"], a["event_ids"]) for a in audit["approvals"]] == [("web_1", [reboot])]
    assert status == "removed"
