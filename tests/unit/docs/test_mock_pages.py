# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pages about the mock, as a user of the installed collection reads them: their Python examples
run as written against the installed copy of the mock, and every file they name either ships in the
collection or is said to be in the git repository."""

import os
import re
import subprocess
import sys

import pytest

from .pages import NOT_IN_A_CLONE, README, ROOT, RST, code_blocks, read

MOCK_IMDS = os.path.join(RST, "mock_imds.rst")
TESTING = os.path.join(RST, "testing_with_the_mock.rst")
GETTING_STARTED = os.path.join(RST, "getting_started.rst")
# A file named in ``...`` (RST) or `...` (Markdown) under one of the repository's top directories.
TOP = sorted(name for name in os.listdir(ROOT) if not name.startswith(".") and name not in NOT_IN_A_CLONE)
NAMED_PATH = re.compile(r"`{1,2}((?:%s)/[^`\s]*)" % "|".join(re.escape(name) for name in TOP))


@pytest.mark.parametrize("page, on_pythonpath", [
    # mock_imds.rst says: put .../roles/mock_imds/files on the import path (PYTHONPATH).
    (MOCK_IMDS, True),
    # testing_with_the_mock.rst gives the conftest lines that find it under the collections path.
    (TESTING, False),
], ids=["mock_imds.rst", "testing_with_the_mock.rst"])
def test_python_examples_run_as_written_against_the_installed_mock(installed, tmp_path, page, on_pythonpath):
    blocks = code_blocks(page, "python")
    assert blocks, page
    script = tmp_path / "example.py"
    # The last line is the test's: where the examples found the mock.
    script.write_text("\n\n".join(blocks) + "\nimport mock_imds\nprint('mock_imds from', mock_imds.__file__)\n")
    env = dict(installed.env)
    files = str(installed.collection / "roles" / "mock_imds" / "files")
    if on_pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [files, env.get("PYTHONPATH")]))
    proc = subprocess.run([sys.executable, str(script)], cwd=str(tmp_path), env=env, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120, check=False,
                          universal_newlines=True)
    assert proc.returncode == 0, proc.stdout
    assert "mock_imds from %s" % os.path.join(files, "mock_imds", "__init__.py") in proc.stdout, proc.stdout


def paragraphs(path):
    return re.split(r"\n[ \t]*\n", read(path))


@pytest.mark.parametrize("page", [README, GETTING_STARTED, TESTING, MOCK_IMDS], ids=os.path.basename)
def test_every_file_named_ships_or_is_said_to_be_in_the_git_repository(installed, page):
    for paragraph in paragraphs(page):
        for named in NAMED_PATH.findall(paragraph):
            path = named.rstrip(".,:;)/")
            if "<" in path or "*" in path:
                continue
            assert os.path.exists(os.path.join(ROOT, path)), "%s names %s, which does not exist" % (page, path)
            if os.path.exists(str(installed.collection / path)):
                continue
            said = " ".join(paragraph.split()).lower()
            assert "git repository" in said or "from a clone" in said or "in the clone" in said, (
                "%s names %s, which the installed collection lacks, without saying it is in the git "
                "repository:\n%s" % (os.path.basename(page), path, paragraph))
