# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fixtures of the docs' tests: the collection built and installed by README's own commands."""

import pytest

from .pages import Installed, copy_checkout, readme_block, run_shell, user_env


@pytest.fixture(scope="session")
def installed(tmp_path_factory):
    """README's Install block run in a copy of the checkout (its `git clone` line is the copy)."""
    base = tmp_path_factory.mktemp("readme")
    clone = copy_checkout(base / "clone")
    home = base / "home"
    home.mkdir()
    env = user_env(home)
    block = readme_block("bash", "ansible-galaxy collection build")
    script = "\n".join(line for line in block.splitlines() if not line.startswith("git clone "))
    proc = run_shell(script, clone, env)
    assert proc.returncode == 0, proc.stdout
    result = Installed(clone, home, env, proc.stdout)
    assert (result.collection / "MANIFEST.json").is_file(), proc.stdout
    return result
