# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the docs' tests share: the code blocks of a page, a fresh copy of the checkout (what a clone
holds), and the collection built and installed from it by README's own commands.

Commands run with this interpreter's directory first on PATH (its ansible-core, ansible-galaxy,
ansible-playbook and python3, as `pip install` into a fresh environment would give), HOME in a
temporary directory (so ~/.ansible/collections is a new, empty collections path) and no ANSIBLE_*
variable from the caller: the collection is found where README's install put it, nowhere else.
"""

import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
README = os.path.join(ROOT, "README.md")
RST = os.path.join(ROOT, "docs", "docsite", "rst")
BIN = os.path.dirname(sys.executable)
# What a clone does not hold (git metadata, environments, outputs of earlier runs).
NOT_IN_A_CLONE = (".git", ".venv", ".cache", ".ansible", ".pytest_cache", "build", os.path.join("tests", "output"))
MARKDOWN_BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
RST_BLOCK = re.compile(r"^\.\. code(?:-block)?:: *(\w+)\n((?:[ \t]*\n)*(?:(?: {3,}.*)?\n)+)", re.M)


def read(path):
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def code_blocks(path, language):
    """The code blocks of a Markdown or RST page in that language, in page order, dedented."""
    text = read(path)
    if path.endswith(".md"):
        return [body for lang, body in MARKDOWN_BLOCK.findall(text) if lang == language]
    blocks = []
    for lang, body in RST_BLOCK.findall(text):
        if lang == language:
            lines = body.strip("\n").splitlines()
            indent = min(len(line) - len(line.lstrip()) for line in lines if line.strip())
            blocks.append("\n".join(line[indent:] for line in lines) + "\n")
    return blocks


def readme_block(language, containing):
    """The one README block of that language that contains the text."""
    found = [block for block in code_blocks(README, language) if containing in block]
    assert len(found) == 1, "README.md has %d %s blocks with %r, expected one" % (len(found), language, containing)
    return found[0]


def copy_checkout(destination):
    """The files of this checkout that a clone would hold, copied to destination."""

    def ignore(directory, names):
        relative = os.path.relpath(directory, ROOT)
        return [name for name in names
                if os.path.normpath(os.path.join(relative, name)) in NOT_IN_A_CLONE
                or name == "__pycache__" or name.endswith(".tar.gz")]

    shutil.copytree(ROOT, str(destination), symlinks=True, ignore=ignore)
    return destination


def user_env(home):
    """The environment of a user who followed README: its tools on PATH, a fresh HOME."""
    env = dict((key, value) for key, value in os.environ.items()
               if not key.startswith("ANSIBLE_") and key != "AZURE_IMDS_URL")
    env.update(HOME=str(home), PATH=BIN + os.pathsep + env.get("PATH", ""), ANSIBLE_NOCOLOR="1")
    return env


def run_shell(script, cwd, env, timeout=600):
    """Run a shell block as a user pastes it, stopping at the first failing command."""
    return subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=str(cwd), env=env,
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          timeout=timeout, check=False, universal_newlines=True)


class Installed(object):
    """A clone with the collection built and installed by README's commands."""

    def __init__(self, clone, home, env, output):
        self.clone = clone
        self.home = home
        self.env = env
        self.output = output
        self.collection = home / ".ansible" / "collections" / "ansible_collections" / "azure_imds" / "scheduled_events"
