"""The watcher role's installer of the daemon's program files (roles/watcher/files/install_files.py),
run as the role runs it: the bootstrap of vars/main.yml with the program and the files on stdin. It
writes only what differs, with the mode asked for, replaces a symbolic link without following it,
writes nothing in check mode, and names the path it cannot write."""
import json
import os
import stat
import subprocess
import sys

import yaml

from .conftest import ROOT

INSTALLER = os.path.join(ROOT, "roles", "watcher", "files", "install_files.py")


def install(files, check=False):
    """(exit status, stdout lines, stderr) of one run over {path: text}."""
    with open(os.path.join(ROOT, "roles", "watcher", "vars", "main.yml"), encoding="utf-8") as handle:
        bootstrap = yaml.safe_load(handle)["_watcher_install_bootstrap"]
    with open(INSTALLER, encoding="utf-8") as handle:
        wanted = {"program": handle.read(), "mode": "0644", "files": dict((str(k), v) for k, v in files.items())}
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


def test_a_directory_in_a_files_place_is_named_without_a_traceback(tmp_path):
    path = tmp_path / "a.py"
    path.mkdir()
    rc, lines, err = install({path: "a\n"})
    assert rc == 1 and lines == []
    assert err.startswith("watcher role: cannot install %s: Is a directory." % path) and "Traceback" not in err
    assert os.listdir(str(tmp_path)) == ["a.py"]
