# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The execution environment suite: our EE built here and the playbooks run in it.

    tests/ee/run prepare   # the steps that need the network (Debian and Python packages) or root
    tests/ee/run           # prepare (unless already network-isolated), then the suite, loopback only

prepare:
  1. /dev/mqueue exists (ansible-navigator refuses podman without it; systemd mounts it, this
     machine has no systemd): mounted here when root.
  2. the Debian base image of extensions/ee/base-image.sh (mmdebstrap; rebuilt only when its
     recipe changes);
  3. a wheelhouse of every Python package the build installs, made on this machine with pip from
     the Containerfile ansible-builder writes (kept under .cache/ee/, keyed on the package list).
the suite, with no network at all (inside tests/harness/loopback-only; the build gets
`--network none` and pip sees only the wheelhouse):
  4. the collection tarball (ansible-galaxy collection build) in a scratch tree shaped like the
     repository, and `ansible-builder build` of extensions/ee/execution-environment.yml on it, from
     scratch every time: its introspection must find the collection's jmespath;
  5. the image carries the collection of this checkout, at galaxy.yml's version;
  6. ansible-navigator runs azure_imds.scheduled_events.report inside the image against the mock
     on 127.0.0.1 (host network): the report table lists the mock's events;
  7. ansible-navigator runs azure_imds.scheduled_events.rolling_maintenance the same way: the hosts
     with events are drained and recovered, and the mock's audit shows each event approved by the
     VM it names and started by that approval.
  8. ansible-navigator runs azure_imds.scheduled_events.fleet_maintenance the same way against the
     mock's control-plane face (TLS with its test CA, signed in by the AZURE_* variables AWX's Azure
     credential sets): the image's Azure libraries read Resource Graph, the event of the three VMs is
     drained, acknowledged once through the Maintenance Resource Provider, seen Completed, recovered.
Every failure, a missing podman or mmdebstrap included, exits non-zero; nothing is skipped.
"""

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
try:
    from ansible_collections.azure_imds.scheduled_events.roles.mock_imds.files.mock_imds.testing import spawn_mock
    from ansible_collections.azure_imds.scheduled_events.tests.harness.collection_path import python_path_without_collections
    from ansible_collections.azure_imds.scheduled_events.tests.support.control_plane import AWX_ENV, PUBLISH, SUB1, set_up
except ModuleNotFoundError:
    spawn_mock = None  # prepare needs no mock; the suite stops with a message (main)

BIN = os.path.join(ROOT, ".venv", "bin")
EE_DIR = os.path.join(ROOT, "extensions", "ee")
BASE_IMAGE_SCRIPT = os.path.join(EE_DIR, "base-image.sh")
CACHE = os.path.join(ROOT, ".cache", "ee")
IMAGE = "localhost/azure-imds-ee:test"
PROGRESS_EVERY = 30
# The runner's event stream, which ansible-navigator's stdout mode leaves between the lines.
RUNNER_EVENT = re.compile(r"\x1b\[K[^\x1b]*\x1b\[\d+D\x1b\[K")
PIP_INSTALL = re.compile(r"^RUN \$PYCMD -m pip install --no-cache-dir (.+)$", re.M)
# Where pip looks inside the build: the wheelhouse only.
BUILD_PIP_CONF = "[global]\nno-index = true\nfind-links = /wheelhouse\n"


class SuiteError(Exception):
    """A step failed; the message says which and why."""


def say(text):
    print("ee: %s" % text, flush=True)


def environment():
    env = dict(os.environ)
    env["CONTAINERS_CONF"] = os.path.join(HERE, "containers.conf")
    env["PATH"] = BIN + os.pathsep + env.get("PATH", "")
    env.setdefault("ANSIBLE_NOCOLOR", "1")
    # The image's own collection is what runs, never one found on the host.
    env.pop("ANSIBLE_COLLECTIONS_PATH", None)
    if spawn_mock is not None and python_path_without_collections(env) is None:
        env.pop("PYTHONPATH", None)
    elif spawn_mock is not None:
        env["PYTHONPATH"] = python_path_without_collections(env)
    env.pop("AZURE_IMDS_URL", None)
    return env


def run(step, args, log=None, cwd=None, timeout=3600):
    """Run args; its output goes to log (and is answered). Every PROGRESS_EVERY s a line says how
    long the step has run and the last line of output, since image builds are slow."""
    began = time.monotonic()
    out = open(log, "w", encoding="utf-8") if log else None
    proc = subprocess.Popen(args, cwd=cwd, env=environment(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    lines = []

    def read():
        for raw in proc.stdout:
            line = RUNNER_EVENT.sub("", raw.decode("utf-8", "replace"))
            lines.append(line)
            if out:
                out.write(line)

    reader = threading.Thread(target=read)
    reader.start()
    said = began
    while reader.is_alive():
        reader.join(1.0)
        now = time.monotonic()
        if now - began > timeout:
            proc.kill()
            reader.join()
            raise SuiteError("%s: still running after %d s; stopped. Output: %s" % (step, timeout, log or "".join(lines[-30:])))
        if now - said >= PROGRESS_EVERY:
            last = next((line.strip() for line in reversed(lines) if line.strip()), "(no output yet)")
            say("  %s: %.0f s, last line: %s" % (step, now - began, last[:150]))
            said = now
    rc = proc.wait()
    if out:
        out.close()
    text = "".join(lines)
    if rc != 0:
        raise SuiteError("%s failed (exit %d); last lines:\n%s" % (step, rc, "".join(lines[-40:])))
    return text, time.monotonic() - began


def require_tools():
    missing = [tool for tool in ("podman", "runc", "mmdebstrap") if shutil.which(tool) is None]
    missing += [path for path in (os.path.join(BIN, "ansible-builder"), os.path.join(BIN, "ansible-navigator"),
                                  os.path.join(BIN, "ansible-galaxy")) if not os.path.isfile(path)]
    if missing:
        raise SuiteError("missing: %s. System tools: apt-get install -y podman runc mmdebstrap uidmap; "
                         "Python tools: tests/requirements.txt into .venv (ansible-builder, ansible-navigator)"
                         % ", ".join(missing))


def ensure_mqueue():
    if os.path.isdir("/dev/mqueue"):
        return
    if os.geteuid() != 0:
        raise SuiteError("/dev/mqueue is missing and only root can mount it: "
                         "mkdir -p /dev/mqueue && mount -t mqueue mqueue /dev/mqueue")
    os.makedirs("/dev/mqueue")
    subprocess.run(["mount", "-t", "mqueue", "mqueue", "/dev/mqueue"], check=True)
    say("mounted /dev/mqueue (POSIX message queues; ansible-navigator checks for it with podman)")


def collection_info():
    """(namespace.name, version) from galaxy.yml, read without a YAML library (stdlib only here)."""
    found = {}
    with open(os.path.join(ROOT, "galaxy.yml"), encoding="utf-8") as handle:
        for line in handle:
            match = re.match(r"^(namespace|name|version):\s*['\"]?([^'\"\s#]+)", line)
            if match:
                found[match.group(1)] = match.group(2)
    return "%s.%s" % (found["namespace"], found["name"]), found["version"]


def scratch_context(work):
    """A tree shaped like the repository (extensions/ee/ two levels below build/) with this
    checkout's tarball, and the build context ansible-builder makes of it. Answers the tarball."""
    shutil.copytree(EE_DIR, os.path.join(work, "extensions", "ee"))
    os.makedirs(os.path.join(work, "build"))
    run("ansible-galaxy collection build", [os.path.join(BIN, "ansible-galaxy"), "collection", "build",
                                            "--output-path", os.path.join(work, "build"), ROOT])
    tarballs = os.listdir(os.path.join(work, "build"))
    if len(tarballs) != 1:
        raise SuiteError("expected one collection tarball, found %s" % tarballs)
    run("ansible-builder create", [os.path.join(BIN, "ansible-builder"), "create", "-f",
                                   "extensions/ee/execution-environment.yml", "--context", "context"], cwd=work)
    return os.path.join(work, "build", tarballs[0])


def build_requirements(context):
    """Every requirement pip installs during the build, as ansible-builder wrote them."""
    with open(os.path.join(context, "Containerfile"), encoding="utf-8") as handle:
        containerfile = handle.read()
    refs = re.search(r'^ARG ANSIBLE_INSTALL_REFS="([^"]*)"', containerfile, re.M).group(1)
    wanted = []
    for match in PIP_INSTALL.finditer(containerfile):
        wanted += match.group(1).replace("$ANSIBLE_INSTALL_REFS", refs).replace("'", "").split()
    for path in (os.path.join(context, "_build", "requirements.txt"), os.path.join(ROOT, "meta", "ee-requirements.txt")):
        with open(path, encoding="utf-8") as handle:
            wanted += [line.split("#", 1)[0].strip() for line in handle if line.split("#", 1)[0].strip()]
    return sorted(set(wanted))


def python_minor_of_base_image():
    image = base_image_name()
    text = run("Python of the base image", ["podman", "run", "--rm", "--network", "none", image, "python3", "-c",
                                            "import sys; print('%d.%d' % sys.version_info[:2])"])[0]
    return text.strip().splitlines()[-1]


def base_image_name():
    with open(BASE_IMAGE_SCRIPT, encoding="utf-8") as handle:
        return re.search(r"^image=(\S+)$", handle.read(), re.M).group(1)


def python_for_wheels(minor):
    """The interpreter of one of the project's environments whose Python is the base image's: binary
    wheels fit only the Python they were made for. .venv runs the newest core on Python 3.13; the
    oldest core's environment has the system python3, which is the Debian base image's too."""
    for venv in (os.path.join(ROOT, ".venv"), os.path.join(ROOT, ".cache", "venv-oldest-core")):
        python = os.path.join(venv, "bin", "python")
        if not os.path.isfile(python):
            continue
        found = run("Python of %s" % os.path.relpath(venv, ROOT),
                    [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"])[0].strip()
        if found == minor:
            return python
    raise SuiteError("no environment of this project has Python %s, the base image's, to make its wheels with: "
                     "`make venvs` builds .cache/venv-oldest-core with the system python3" % minor)


def wheelhouse_path(requirements, python_minor):
    key = hashlib.sha256(("python%s\n" % python_minor + "\n".join(requirements)).encode()).hexdigest()[:16]
    return os.path.join(CACHE, "wheelhouse-%s" % key)


def prepare():
    require_tools()
    ensure_mqueue()
    say("base image (extensions/ee/base-image.sh)")
    text, took = run("base image", ["bash", BASE_IMAGE_SCRIPT])
    say("  %s (%.0f s)" % (text.strip().splitlines()[-1], took))
    minor = python_minor_of_base_image()
    wheel_python = python_for_wheels(minor)
    work = tempfile.mkdtemp(prefix="ee-prepare-")
    try:
        scratch_context(work)
        requirements = build_requirements(os.path.join(work, "context"))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    wheelhouse = wheelhouse_path(requirements, minor)
    if os.path.isdir(wheelhouse):
        say("wheelhouse %s is current (%d wheels)" % (os.path.relpath(wheelhouse, ROOT), len(os.listdir(wheelhouse))))
        return
    say("wheelhouse for: %s" % " ".join(requirements))
    partial = wheelhouse + ".partial"
    shutil.rmtree(partial, ignore_errors=True)
    os.makedirs(partial)
    run("pip wheel", [wheel_python, "-m", "pip", "wheel", "--quiet", "--wheel-dir", partial] + requirements)
    os.rename(partial, wheelhouse)
    say("wheelhouse %s made (%d wheels)" % (os.path.relpath(wheelhouse, ROOT), len(os.listdir(wheelhouse))))


def image_id(name):
    proc = subprocess.run(["podman", "image", "inspect", "--format", "{{.Id}}", name], env=environment(),
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=False)
    return proc.stdout.decode().strip() if proc.returncode == 0 else None


def build_image(work, logs):
    tarball = scratch_context(work)
    context = os.path.join(work, "context")
    requirements = build_requirements(context)
    wheelhouse = wheelhouse_path(requirements, python_minor_of_base_image())
    if not os.path.isdir(wheelhouse):
        raise SuiteError("no wheelhouse for this build's packages (%s); run tests/ee/run prepare (needs the network)"
                         % " ".join(requirements))
    pip_conf = os.path.join(work, "pip.conf")
    with open(pip_conf, "w", encoding="utf-8") as handle:
        handle.write(BUILD_PIP_CONF)
    before = image_id(IMAGE)
    log = os.path.join(logs, "ansible-builder-build.log")
    say("ansible-builder build of %s with %s, no network, pip from %s (log: %s)"
        % (IMAGE, os.path.basename(tarball), os.path.relpath(wheelhouse, ROOT), log))
    text, took = run("ansible-builder build", [
        os.path.join(BIN, "ansible-builder"), "build", "-f", "extensions/ee/execution-environment.yml",
        "--context", "context", "--tag", IMAGE, "--container-runtime", "podman", "--no-cache", "-v", "3",
        "--extra-build-cli-args",
        # --layers=false: a build from scratch every time keeps no intermediate images in the storage.
        "--network none --layers=false --volume %s:/wheelhouse:ro --volume %s:/etc/pip.conf:ro" % (wheelhouse, pip_conf)],
        log=log, cwd=work)
    fqcn, _version = collection_info()
    # ansible-builder's introspection, inside the build, read the installed collection's
    # meta/execution-environment.yml.
    if "jmespath  # from collection %s" % fqcn not in text:
        raise SuiteError("the build's introspection did not report jmespath from %s; see %s" % (fqcn, log))
    # The system packages come from the base image, never from a mirror during the build.
    if not re.search(r"^\+ /usr/bin/apt-get install -y .*\n(?:.*\n)*?0 upgraded, 0 newly installed", text, re.M):
        raise SuiteError("the build's apt-get install of bindep.txt's packages did not find them all in the base image; see %s" % log)
    after = image_id(IMAGE)
    if before and before != after:
        # Only our own previous build of this tag, never anything else in the storage.
        subprocess.run(["podman", "rmi", before], env=environment(), stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=False)
    size = run("image size", ["podman", "image", "inspect", "--format", "{{.Size}}", IMAGE])[0]
    return took, int(size.strip())


def check_collection_in_image():
    fqcn, version = collection_info()
    listing = ["podman", "run", "--rm", "--network", "none", IMAGE, "ansible-galaxy", "collection", "list", fqcn]
    text = run("collections of the image", listing)[0]
    found = re.search(r"^# (/\S+)\n.*?^%s\s+(\S+)" % re.escape(fqcn), text, re.M | re.S)
    if not found or found.group(2) != version or found.group(1) != "/usr/share/ansible/collections/ansible_collections":
        raise SuiteError("the image does not carry %s %s in /usr/share/ansible/collections:\n%s" % (fqcn, version, text))
    say("the image carries %s %s in %s" % (fqcn, version, found.group(1)))


def navigator(step, playbook, project, mock, logs, extra=()):
    args = [os.path.join(BIN, "ansible-navigator"), "run", playbook, "-i", "inventory.yml", "--mode", "stdout",
            "--execution-environment-image", IMAGE, "--pull-policy", "never", "--container-engine", "podman",
            "--container-options=--network=host", "--playbook-artifact-enable", "false",
            "--log-file", os.path.join(logs, "ansible-navigator-%s.log" % step),
            "-e", "ee_mock_url=%s" % mock.url] + list(extra)
    say("ansible-navigator run %s in %s against the mock at %s" % (playbook, IMAGE, mock.url))
    return run(step, args, log=os.path.join(logs, "%s.out" % step), cwd=project)


def mock_events(mock):
    return {event["event_id"]: event for event in mock.control("GET", "events")}


def check_report(project, logs):
    with spawn_mock(["--scenario", os.path.join(HERE, "scenario.json"), "--quiet"]) as mock:
        events = mock_events(mock)
        text, took = navigator("report", "azure_imds.scheduled_events.report", project, mock, logs,
                               ["-e", "report_write_files=false"])
    table = [line.strip().strip('",') for line in text.splitlines() if re.search(r"^\s+\"(HOSTS|ee_\d)\s", line)]
    expected = sorted("%s %s" % (event["resources"][0], event_id) for event_id, event in events.items())
    shown = sorted(" ".join(line.split()[:2]) for line in table if not line.startswith("HOSTS"))
    if not table or not table[0].startswith("HOSTS") or shown != expected:
        raise SuiteError("the report table does not list the mock's events %s; it shows:\n%s" % (expected, "\n".join(table)))
    say("report printed in %.0f s:" % took)
    for line in table:
        say("  | " + line)


def check_rolling_maintenance(project, logs):
    with spawn_mock(["--scenario", os.path.join(HERE, "scenario.json"), "--speed", "5", "--quiet"]) as mock:
        events = mock_events(mock)
        text, took = navigator("rolling_maintenance", "azure_imds.scheduled_events.rolling_maintenance", project, mock,
                               logs, ["-e", "rolling_maintenance_drain_tasks=tasks/drain.yml",
                                      "-e", "rolling_maintenance_recover_tasks=tasks/recover.yml",
                                      "-e", "rolling_maintenance_poll_interval=0.5"])
        audit = mock.control("GET", "audit")
    named = {event["resources"][0]: event_id for event_id, event in events.items()}
    for host in ("ee_0", "ee_1", "ee_2"):
        for step in ("drain", "recover"):
            said = re.search(r'"msg": "ee-suite %s %s\b' % (step, host), text) is not None
            if said != (host in named):
                raise SuiteError("rolling_maintenance %s %s, but the mock has %s for it"
                                 % ("ran the %s of" % step if said else "did not run the %s of" % step, host,
                                    "event %s" % named[host] if host in named else "no event"))
    for host, event_id in sorted(named.items()):
        approvals = [a for a in audit["approvals"] if a["vm"] == host and event_id in a["event_ids"]]
        started = [t for t in audit["transitions"] if t["event_id"] == event_id and t["to"] == "Started"]
        if not approvals or [t["cause"] for t in started] != ["approval"] or event_id not in approvals[0]["started"]:
            raise SuiteError("the mock's audit does not show %s approved by %s and started by that approval: "
                             "approvals %s, started %s" % (event_id, host, approvals, started))
        say("audit: %s approved %s (%s) at sim %s; it started on that approval"
            % (host, event_id, events[event_id]["event_type"], approvals[0]["sim_time"]))
    say("rolling_maintenance drained, approved and recovered %s in %.0f s; its summary:" % (", ".join(sorted(named)), took))
    for line in playbook_summary(text):
        say("  | " + line)


def check_fleet_maintenance(project, logs):
    fleet = {"subscription_id": SUB1, "resource_group": "rg-ee", "scheduled_events_policy": PUBLISH,
             "groups": [{"name": "ee-as", "kind": "availability_set", "vms": ["ee_0", "ee_1", "ee_2"]}]}
    with spawn_mock(["--quiet", "--no-rate-limit"], arm=True) as mock:
        mock.control("POST", "fleet", fleet)
        set_up(mock, subscriptions=(SUB1,))
        event_id = mock.control("POST", "events", {"event_type": "Reboot", "resources": ["ee_0", "ee_1", "ee_2"],
                                                   "notice": 900, "duration": 0})["event_id"]
        # The container sees the project at its own path: the test CA goes there.
        ca = os.path.join(project, "mock-ca.pem")
        shutil.copyfile(mock.ca_path, ca)
        env = dict(AWX_ENV, AZURE_CLOUD_ENVIRONMENT=mock.arm_url, REQUESTS_CA_BUNDLE=ca)
        text, took = navigator("fleet_maintenance", "azure_imds.scheduled_events.fleet_maintenance", project, mock, logs,
                               ["-e", "fleet_maintenance_drain_tasks=tasks/fleet_drain.yml",
                                "-e", "fleet_maintenance_recover_tasks=tasks/fleet_recover.yml",
                                "-e", "fleet_maintenance_poll_interval=1"]
                               + [arg for name in sorted(env) for arg in ("--senv", "%s=%s" % (name, env[name]))])
        audit = mock.control("GET", "audit")
    for host in ("ee_0", "ee_1", "ee_2"):
        for step in ("drain", "recover"):
            if not re.search(r'"msg": "ee-suite fleet %s %s"' % (step, host), text):
                raise SuiteError("fleet_maintenance did not run the %s of %s" % (step, host))
    acks = [r for r in audit["arm_requests"] if r["path"].split("?")[0].endswith("/%s/acknowledge" % event_id)]
    graph = [r for r in audit["arm_requests"] if "Microsoft.ResourceGraph" in r["path"]]
    ended = [t for t in audit["transitions"] if t["event_id"] == event_id and t["to"] == "removed"]
    if [r["status"] for r in acks] != [200] or not graph or not ended:
        raise SuiteError("the mock's audit does not show %s acknowledged once through Resource Manager, read from "
                         "Resource Graph and completed: acknowledges %s, %d Resource Graph queries, completed %s"
                         % (event_id, acks, len(graph), ended))
    say("audit: %s acknowledged by %s through Resource Manager, %d Resource Graph queries, completed at sim %s"
        % (event_id, acks[0]["principal"], len(graph), ended[0]["sim_time"]))
    say("fleet_maintenance drained, approved from outside and recovered ee_0, ee_1, ee_2 in %.0f s" % took)


def playbook_summary(text):
    """The lines of rolling_maintenance's closing summary task, as the playbook printed them."""
    tail = text[text.rfind("Show what was done to each host"):]
    block = re.search(r'"msg": \[\n(.*?)\n\s*\]', tail, re.S)
    return [json.loads(line.strip().rstrip(",")) for line in block.group(1).splitlines()] if block else []


def suite():
    require_tools()
    ensure_mqueue()
    run("base image", ["bash", BASE_IMAGE_SCRIPT, "--check"])
    began = time.monotonic()
    logs = os.path.join(ROOT, "tests", "output", "ee")
    os.makedirs(logs, exist_ok=True)
    work = tempfile.mkdtemp(prefix="ee-suite-")
    try:
        build_took, size = build_image(work, logs)
        say("image %s built in %.0f s; size %.0f MB" % (IMAGE, build_took, size / 1e6))
        check_collection_in_image()
        project = os.path.join(work, "project")
        shutil.copytree(os.path.join(HERE, "project"), project)
        check_report(project, logs)
        check_rolling_maintenance(project, logs)
        check_fleet_maintenance(project, logs)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    say("passed: EE build %.0f s, image %.0f MB, suite %.0f s" % (build_took, size / 1e6, time.monotonic() - began))


def main(argv):
    if argv not in ([], ["prepare"]):
        print(__doc__)
        return 2
    try:
        if argv == ["prepare"] or not os.environ.get("AZURE_IMDS_TEST_ISOLATION"):
            prepare()
            if argv == ["prepare"]:
                return 0
            isolate = os.path.join(ROOT, "tests", "harness", "loopback-only")
            os.execv(isolate, [isolate, os.path.join(HERE, "run")])
        if spawn_mock is None:
            raise SuiteError("the collection is not importable: run it with `make test SUITES=ee` (tests/harness/loopback-only "
                             "puts this checkout on the import path)")
        suite()
    except SuiteError as exc:
        say("FAILED: %s" % exc)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
