"""The one place that puts this checkout where Ansible looks for it:
<dir>/ansible_collections/azure_imds/scheduled_events.

- A checkout that already sits at such a path (clone it there: the layout ansible-test expects)
  needs nothing: collections_dir() answers <dir>.
- Any other checkout gets a symlink farm, .cache/pytest-collections/ansible_collections/
  azure_imds/scheduled_events -> the checkout (FARM; the name predates its other users), for Python
  imports, ansible-playbook and ansible-doc, so that edits show at once.
- ansible-test resolves symlinks and asks git which files exist, so it gets a copy with a git
  repository of its own: copy_for_ansible_test().

tests/harness/loopback-only puts collections_dir() on PYTHONPATH and ANSIBLE_COLLECTIONS_PATH for
everything it runs (`collection_path.py dir`); tests/harness/run_suites.py makes the copies; tests
that start ansible commands name collections_dir() themselves (ansible-test passes them no such
variable). Standard library only.
"""

import os
import shutil
import subprocess
import sys

NAMESPACE = "azure_imds"
NAME = "scheduled_events"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
TAIL = ("ansible_collections", NAMESPACE, NAME)
FARM = os.path.join(".cache", "pytest-collections")
# ansible.windows, read by the test that holds the stand-in of win_uri to the real one's documentation.
WINDOWS_COLLECTIONS = os.path.join(".cache", "windows-collections")
CACHED_FOR_TESTS = (WINDOWS_COLLECTIONS,)


def collections_dir(root=ROOT):
    """The directory that goes on ANSIBLE_COLLECTIONS_PATH (and PYTHONPATH) to find root as the collection."""
    real = os.path.realpath(root)
    parts = real.split(os.sep)
    if tuple(parts[-3:]) == TAIL:
        return os.sep.join(parts[:-3]) or os.sep
    farm = os.path.join(real, FARM)
    link = os.path.join(farm, *TAIL)
    # A copied checkout brings its .cache along, with a link to where it was copied from.
    if os.path.islink(link) and os.readlink(link) == real:
        return farm
    os.makedirs(os.path.dirname(link), exist_ok=True)
    # Replaced atomically: several test processes may get here at once.
    temporary = "%s.%d" % (link, os.getpid())
    os.symlink(real, temporary)
    os.replace(temporary, link)
    return farm


def python_path_without_collections(environ):
    """environ's PYTHONPATH without the directories that hold an ansible_collections tree (None when
    nothing is left): a program started with it finds collections only on ANSIBLE_COLLECTIONS_PATH."""
    kept = [entry for entry in environ.get("PYTHONPATH", "").split(os.pathsep)
            if entry and not os.path.isdir(os.path.join(entry, "ansible_collections"))]
    return os.pathsep.join(kept) or None


def tracked_files(root=ROOT):
    """Files of the working tree that git tracks or would track (untracked, not ignored)."""
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                         cwd=root, check=True, stdout=subprocess.PIPE).stdout.decode()
    return [f for f in out.split("\0") if f and os.path.lexists(os.path.join(root, f))]


def copy_for_ansible_test(build, root=ROOT):
    """Copy the working tree to build/collections/ansible_collections/...; answers the copy's path."""
    copy = os.path.join(build, "collections", *TAIL)
    if os.path.isdir(copy):
        shutil.rmtree(copy)
    for rel in tracked_files(root):
        dst = os.path.join(copy, rel)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copy2(os.path.join(root, rel), dst, follow_symlinks=False)
    # What tests read from the checkout's .cache besides the tree (tests/harness/prepare.d puts it there).
    for cached in CACHED_FOR_TESTS:
        if os.path.isdir(os.path.join(root, cached)):
            shutil.copytree(os.path.join(root, cached), os.path.join(copy, cached), symlinks=True)
    # The copy sits inside this checkout's work tree, where git ignores it; ansible-test asks git
    # which files exist, so the copy gets a repository of its own.
    subprocess.run(["git", "init", "-q"], cwd=copy, check=True)
    subprocess.run(["git", "add", "-A"], cwd=copy, check=True)
    return copy


def main(argv):
    """collection_path.py dir | copy BUILD: print the collections directory, or make a copy and print its path."""
    if argv[:1] == ["dir"]:
        print(collections_dir())
    elif argv[:1] == ["copy"] and len(argv) == 2:
        print(copy_for_ansible_test(argv[1]))
    else:
        print("usage: collection_path.py dir | copy BUILD", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
