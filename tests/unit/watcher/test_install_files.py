"""The installer of a role's program files (roles/watcher/files/install_files.py), which the watcher
role runs for the daemon and the mock_imds role for the mock's package, run as each role runs it: the
bootstrap of the role's vars/main.yml with the program and the files on stdin. It writes only what
differs, with the mode asked for, replaces a symbolic link without following it, writes nothing in
check mode, and names the role and the path it cannot write."""
import json
import os
import stat
import subprocess
import sys

import pytest
import yaml

from .conftest import ROOT

INSTALLER = os.path.join(ROOT, "roles", "watcher", "files", "install_files.py")
# Each role that runs the installer: (its name, the variable of its vars/main.yml holding the bootstrap).
ROLES = {"watcher": "_watcher_install_bootstrap", "mock_imds": "_mock_imds_install_bootstrap"}


def role_vars(role):
    with open(os.path.join(ROOT, "roles", role, "vars", "main.yml"), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def install(files, check=False, role="watcher"):
    """(exit status, stdout lines, stderr) of one run over {path: text}, as role runs it."""
    bootstrap = role_vars(role)[ROLES[role]]
    with open(INSTALLER, encoding="utf-8") as handle:
        wanted = {"program": handle.read(), "role": role, "mode": "0644",
                  "files": dict((str(k), v) for k, v in files.items())}
    proc = subprocess.run([sys.executable, "-c", bootstrap] + (["--check"] if check else []), cwd="/",
                          input=json.dumps(wanted), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, check=False)
    return proc.returncode, proc.stdout.splitlines(), proc.stderr


def test_only_what_differs_is_written_and_check_mode_writes_nothing(tmp_path):
    same, other, missing = tmp_path / "same.py", tmp_path / "other.py", tmp_path / "missing.py"
    same.write_text("x = 1\n")
    os.chmod(str(same), 0o644)
    other.write_text("old\n")
    os.chmod(str(other), 0o644)
    files = {same: "x = 1\n", other: "new é\n", missing: "y = 2\n"}
    assert install(files, check=True) == (0, ["changed %s" % missing, "changed %s" % other], "")
    assert other.read_text() == "old\n" and not missing.exists()
    assert install(files) == (0, ["changed %s" % missing, "changed %s" % other], "")
    assert other.read_text(encoding="utf-8") == "new é\n" and missing.read_text() == "y = 2\n"
    assert all(stat.S_IMODE(os.stat(str(path)).st_mode) == 0o644 for path in files)
    assert install(files) == (0, [], "")
    assert sorted(os.listdir(str(tmp_path))) == ["missing.py", "other.py", "same.py"]   # no temporary left


def test_a_wrong_mode_is_fixed(tmp_path):
    path = tmp_path / "a.py"
    path.write_text("a\n")
    os.chmod(str(path), 0o666)
    assert install({path: "a\n"}) == (0, ["changed %s" % path], "")
    assert stat.S_IMODE(os.stat(str(path)).st_mode) == 0o644


def test_a_symbolic_link_is_replaced_never_followed(tmp_path):
    victim, path = tmp_path / "victim", tmp_path / "a.py"
    victim.write_text("victim\n")
    os.symlink(str(victim), str(path))
    assert install({path: "a\n"}, check=True)[1] == ["changed %s" % path]
    assert install({path: "a\n"})[1] == ["changed %s" % path]
    assert not path.is_symlink() and path.read_text() == "a\n"
    assert victim.read_text() == "victim\n"


@pytest.mark.parametrize("role", sorted(ROLES))
def test_a_directory_in_a_files_place_is_named_without_a_traceback(tmp_path, role):
    path = tmp_path / "a.py"
    path.mkdir()
    rc, lines, err = install({path: "a\n"}, role=role)
    assert rc == 1 and lines == []
    assert err.startswith("%s role: cannot install %s: Is a directory." % (role, path)) and "Traceback" not in err
    assert os.listdir(str(tmp_path)) == ["a.py"]


def test_the_mock_imds_role_installs_its_package_with_the_watchers_installer(tmp_path):
    """mock_imds reads the one installer from the watcher role beside it, and its bootstrap installs
    the package's files (here into tmp_path), then finds nothing left to change."""
    role_path = os.path.join(ROOT, "roles", "mock_imds")
    installer = role_vars("mock_imds")["_mock_imds_installer"].replace("{{ role_path }}", role_path)
    assert os.path.samefile(installer, INSTALLER)
    package = os.path.join(role_path, "files", "mock_imds")
    files = {}
    for name in sorted(os.listdir(package)):
        if name.endswith(".py"):
            with open(os.path.join(package, name), encoding="utf-8") as handle:
                files[tmp_path / name] = handle.read()
    rc, lines, err = install(files, role="mock_imds")
    assert (rc, err) == (0, "") and len(lines) == len(files) > 10
    assert install(files, role="mock_imds") == (0, [], "")
