"""Run the project's test suites and report what each tested, suite by suite.

Usage: run_suites.py [-j N] [SUITE ...]   (default: every suite; SUITE is a name below, such as
                                        `units`, which means every core, or one row: `units/2.19`)
       run_suites.py --list
       run_suites.py --core-venvs          (the virtual environment of each supported core)

Sanity, units and integration run through ansible-test once per supported ansible-core (the
oldest and the newest, each from its own virtual environment: see CORES), except the unit tests
that do not depend on the core (CORE_INDEPENDENT_UNITS), which run with the newest only; molecule,
lint, changelog and docs once. Each suite runs in a copy of one snapshot of the working tree, in a
network and PID namespace of its own (inside tests/harness/loopback-only), so that independent
suites run side by side (-j, default 3: much of a suite is waiting, for a container, a daemon or
the mock, so three keep this 2-core machine busy).

Each suite's full output goes to tests/output/harness/<suite>.log. While a suite runs, a line says
which test, target or scenario it is at (at least every 30 s). A suite fails when its command
fails, when it ran nothing, or when its tool reports a skip: nothing is skipped silently.

The closing line counts tests only: each sanity test, unit test, integration target and molecule
scenario, and each of the lint, changelog and docs checks as one; a suite with one failed target
counts that target as failed and the others as passed. CI reads that last line.
"""

import glob
import hashlib
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET

import collection_path  # beside this script

ROOT = collection_path.ROOT
# AZURE_IMDS_BUILD_DIR lets two runs on one checkout keep apart (each copies the tree there).
BUILD = os.environ.get("AZURE_IMDS_BUILD_DIR") or os.path.join(ROOT, "build")
LOGS = os.path.join(BUILD, "logs") if os.environ.get("AZURE_IMDS_BUILD_DIR") else os.path.join(ROOT, "tests", "output", "harness")
BIN = os.path.dirname(sys.executable)
# The supported range of ansible-core, oldest first: the virtual environment of each (built by
# `make venvs` from the pins named in the Makefile). meta/runtime.yml's requires_ansible names
# exactly this range.
CORES = (os.path.join(ROOT, ".cache", "venv-oldest-core"), os.path.join(ROOT, ".venv"))
# AZURE_IMDS_INTEGRATION_TARGETS="scheduled_event_wait ..." narrows the integration suites (default: all).
TARGETS = os.environ.get("AZURE_IMDS_INTEGRATION_TARGETS", "").split()
PROGRESS_EVERY = 30.0
# Colour codes, which some tools print whatever they are told, are taken out before matching.
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# Roughly how many minutes each suite takes in a full run on this 2-core machine (-j 3, beside the
# others), from the harness's own summary (its time column; the run of 2026-11-27 with other
# engineers' tests beside it): the longest start first, so that no long suite starts late and runs
# alone at the end. The units suites are the critical path (each about 60% of its time on the CPU,
# together 60% of the run's CPU); molecule/watcher_systemd mostly waits for its container, so it
# runs beside them. Keyed by suite name, else by kind; update it from a full run's summary.
WEIGHTS = {
    "units": 21, "units/2.19": 12, "molecule/watcher_systemd": 20, "integration": 4, "molecule/watcher_local": 4, "sanity": 1.2,
    "molecule/rolling_maintenance": 1, "ee": 1, "lint": 0.7, "docsite": 0.3, "changelog": 0, "docs": 0,
}

# ansible-test's shared directory: tests/harness/prepare builds the sanity environments there
# holding this lock exclusively; sanity suites hold it shared while they use them.
ANSIBLE_TEST_LOCK = os.path.expanduser("~/.ansible/test/azure_imds.lock")


def weight(suite):
    return WEIGHTS.get(suite["name"], WEIGHTS.get(suite["kind"], 3))


def core_version(venv):
    """(major.minor of the ansible-core in venv, major.minor of its Python), or None when that
    environment is missing. Each core runs ansible-test on its own environment's Python: the newest
    core needs a newer Python than the oldest one runs on."""
    python = os.path.join(venv, "bin", "python")
    if not os.path.exists(python):
        return None
    out = subprocess.run([python, "-c", "import sys, ansible.release as r; print(r.__version__, '%d.%d' % sys.version_info[:2])"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=False).stdout.decode().split()
    if len(out) != 2:
        return None
    return ".".join(out[0].split(".")[:2]), out[1]


# -- counting what a suite tested: (passed, failed) ----------------------------------------------

def _listed_failures(text, kind):
    """Names ansible-test lists after 'The N <kind> test(s) listed below (out of M) failed'."""
    found = re.search(r"The (\d+) %s test\(s\) listed below \(out of (\d+)\) failed[^\n]*\n((?:[^\n]+\n?)*)" % kind,
                      text)
    if not found:
        return None
    return [line.strip() for line in found.group(3).splitlines()[:int(found.group(1))]]


def count_sanity(text, rc, _copy):
    # ansible-test quotes the name with ' (2.19) or " (2.17).
    ran = set(re.findall(r"^Running sanity test [\"']([^\"']+)[\"']", text, re.M))
    failed = set(_listed_failures(text, "sanity") or [])
    return len(ran - failed), len(failed)


def count_integration(text, rc, _copy):
    ran = set(re.findall(r"^Running (\S+) integration test role", text, re.M))
    failed = _listed_failures(text, "integration")
    if failed is None:
        # Without the summary (a stop before the end), the target that was running failed.
        failed = re.findall(r"^Running (\S+) integration test role", text, re.M)[-1:] if rc else []
    return len(ran - set(failed)), len(set(failed))


def count_junit(text, rc, copy):
    """Unit tests from the junit files ansible-test writes (one per context: modules, controller)."""
    passed = failed = 0
    for path in glob.glob(os.path.join(copy, "tests", "output", "junit", "*.xml")):
        root = ET.parse(path).getroot()
        for case in root.iter("testcase"):
            bad = [c for c in case if c.tag in ("failure", "error", "skipped")]
            if bad:
                failed += 1
            else:
                passed += 1
    return passed, failed


def count_check(text, rc, _copy):
    return (1, 0) if rc == 0 else (0, 1)


# What a failed suite shows below its line: the first lines that name a failure (an ansible task's
# fatal result, a pytest assertion, an ansible-test error), then the end of its log. A failure in
# the middle of a molecule scenario is otherwise buried under its cleanup.
FAILURE_LINE = re.compile(r"fatal: \[|FAILED! =>|^E {2,}|^FAILED (?!- RETRYING)|^ERROR: ")
FAILURE_LINES = 12
TAIL_LINES = 30
LINE_WIDTH = 400


def failure_excerpt(lines):
    first = [line for line in lines if FAILURE_LINE.search(ANSI.sub("", line))][:FAILURE_LINES]
    excerpt = (["the first failure lines:"] + first + ["...", "the end of the log:"]) if first else []
    return [line[:LINE_WIDTH] for line in excerpt + lines[-TAIL_LINES:]]


# -- the suites --------------------------------------------------------------------------------

def molecule_scenarios():
    base = os.path.join(ROOT, "extensions", "molecule")
    if not os.path.isdir(base):
        return []
    return sorted(d for d in os.listdir(base) if os.path.isfile(os.path.join(base, d, "molecule.yml")))


# Unit tests that run with the newest core only; every other unit test (the modules, the action
# plugin, the playbooks and roles, the rulebooks, AWX's definitions) runs on every core. Two kinds:
# - tests that load nothing of ansible-core beyond the collection loader and run no Ansible program
#   (the mock, the watcher daemon, the pure event and wait-state code, the docs' own checks), and the
#   EE test, which runs the image's own ansible-core whichever core runs the test: what they test does
#   not change with the core;
# - the docs' walkthroughs and the demo (the README, the guides' playbooks, `make demo`, the
#   control-plane demo): they check that our docs say what the collection does, which is the same on
#   every core, while the modules' and roles' own tests, which do run on every core, hold each core to
#   the same behaviour;
# - the roles' own cases beyond their main path (rolling_maintenance's failed drains, timeouts, gate
#   mode...; the watcher role without systemd and its notify wiring) and the rulebooks under the real
#   ansible-rulebook (the engine's decisions and throttles): every playbook's main path runs on every
#   core (tests/unit/playbooks/test_playbook_runs.py, deploy_watcher included), and the cases add the
#   role's own decisions on the same tasks. This keeps `make test` within its time on two cores.
# The hardening tables stay on every core: their bad input goes through each core's argument spec
# handling before it reaches our checks.
# A path named here that no longer exists fails the run, and a new test file runs on every core until
# it is named here.
CORE_INDEPENDENT_UNITS = (
    "tests/unit/demo",
    "tests/unit/docs/test_readme_walkthrough.py", "tests/unit/docs/test_event_driven_guide.py",
    "tests/unit/docs/test_install_docs.py",
    "tests/unit/docs/test_azure_facts.py", "tests/unit/docs/test_check_docsite.py",
    "tests/unit/docs/test_generate_reference.py", "tests/unit/docs/test_mock_pages.py",
    "tests/unit/docs/test_support_range.py", "tests/unit/docs/test_troubleshooting_guide.py",
    "tests/unit/docs/test_windows_guide.py",
    "tests/unit/eda/test_central_event_grid.py", "tests/unit/eda/test_eda_configuration.py",
    "tests/unit/eda/test_event_grid_source.py", "tests/unit/eda/test_rulebooks.py", "tests/unit/eda/test_transitions.py",
    "tests/unit/ee",
    "tests/unit/mock_imds", "tests/unit/monitoring",
    "tests/unit/playbooks/test_control_plane.py", "tests/unit/playbooks/test_mixed_inventory.py",
    "tests/unit/playbooks/test_rolling_maintenance_cases.py",
    "tests/unit/plugins/module_utils/test_imds_client.py", "tests/unit/plugins/module_utils/test_imds_edges.py",
    "tests/unit/plugins/module_utils/test_imds_events.py", "tests/unit/plugins/module_utils/test_imds_http.py",
    "tests/unit/plugins/module_utils/test_imds_schema.py", "tests/unit/plugins/plugin_utils",
    # The win_uri path end to end (minutes of real time against the mock; the module path's own
    # targets run on every core) and the stand-in against win_uri's documentation.
    "tests/unit/plugins/action/test_win_uri_standin.py", "tests/unit/plugins/action/test_windows_path_targets.py",
    "tests/unit/test_defaults.py", "tests/unit/test_isolation.py",
    "tests/unit/watcher/test_clock_steps.py", "tests/unit/watcher/test_config_state.py",
    "tests/unit/watcher/test_daemon.py", "tests/unit/watcher/test_decisions.py", "tests/unit/watcher/test_e2e_mock.py",
    "tests/unit/watcher/test_handlers.py", "tests/unit/watcher/test_hardening_config.py",
    "tests/unit/watcher/test_hardening_files.py", "tests/unit/watcher/test_hardening_loop.py",
    "tests/unit/watcher/test_hardening_metrics_port.py", "tests/unit/watcher/test_install_files.py", "tests/unit/watcher/test_hardening_processes.py",
    "tests/unit/watcher/test_lifecycle.py", "tests/unit/watcher/test_log_reentrancy.py",
    "tests/unit/watcher/test_notify.py", "tests/unit/watcher/test_notify_e2e.py", "tests/unit/watcher/test_notify_role.py",
    "tests/unit/watcher/test_operations.py", "tests/unit/watcher/test_pid_file.py",
    "tests/unit/watcher/test_policy_auto_approved.py", "tests/unit/watcher/test_role_without_systemd.py",
)


def core_dependent_units():
    """The unit test files (relative paths) the older cores run: every test file but the core-independent ones."""
    missing = [path for path in CORE_INDEPENDENT_UNITS if not os.path.exists(os.path.join(ROOT, path))]
    if missing:
        raise SystemExit("run_suites.py: CORE_INDEPENDENT_UNITS names paths that do not exist: %s" % ", ".join(missing))
    found = []
    for top, dirs, files in os.walk(os.path.join(ROOT, "tests", "unit")):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            path = os.path.relpath(os.path.join(top, name), ROOT)
            if name.startswith("test_") and name.endswith(".py") and not any(
                    path == skip or path.startswith(skip + os.sep) for skip in CORE_INDEPENDENT_UNITS):
                found.append(path)
    return found


def core_suites(venv, version, python, newest):
    ansible_test = os.path.join(venv, "bin", "ansible-test")
    common = ["--local", "--python", python, "--color", "no"]
    unit_targets = [] if newest else core_dependent_units()
    return [
        dict(name="integration/%s" % version, kind="integration", unit="targets", venv=venv,
             cmd=[ansible_test, "integration"] + common + ["--continue-on-error"] + TARGETS, counter=count_integration,
             progress=[r"^Running (\S+) integration test role", r"^TASK \[(.+?)\]"],
             forbid=[r"All targets skipped", r"Skipping \S+ integration"]),
        dict(name="sanity/%s" % version, kind="sanity", unit="sanity tests", venv=venv, lock=True,
             cmd=[ansible_test, "sanity"] + common, counter=count_sanity,
             progress=[r"^Running sanity test [\"']([^\"']+)[\"']"],
             forbid=[r"Required program \S+ not found", r"Skipping sanity test", r"All targets skipped"]),
        dict(name="units/%s" % version, kind="units", unit="tests", venv=venv,
             cmd=[ansible_test, "units"] + common + ["--num-workers", "2"] + unit_targets, counter=count_junit,
             progress=[r"^Unit test (\S+ with Python \S+)", r"\[\s*(\d+%)\]"],
             forbid=[r"\d+ skipped", r"\d+ xfailed", r"\d+ deselected"]),
    ]


def suite_table():
    suites = []
    for venv in CORES:
        versions = core_version(venv)
        newest = venv == CORES[-1]
        if versions is None:
            suites += [dict(name="%s/%s" % (kind, os.path.basename(venv)), kind=kind, unit="tests", missing=venv)
                       for kind in ("integration", "sanity", "units")]
        else:
            suites += core_suites(venv, versions[0], versions[1], newest)
    # One suite per molecule scenario, so that the scenarios run beside the other suites.
    suites += [
        dict(name="molecule/%s" % scenario, kind="molecule", unit="scenarios",
             cwd="extensions", cmd=[os.path.join(BIN, "molecule"), "test", "-s", scenario], counter=count_check,
             progress=[r"(?:INFO|WARNING)\s+(\S+ ➜ \w+)", r"TASK \[([^\]]+)\]?"])
        for scenario in molecule_scenarios()]
    suites += [
        # As from a plain checkout: .ansible-lint holds the profile, and ansible-lint installs this
        # checkout into .ansible/collections itself (no collections path is given).
        dict(name="lint", kind="lint", unit="check", cwd="root", own_netns=False,
             cmd=[os.path.join(BIN, "ansible-lint"), "--nocolor"], counter=count_check,
             unset=("ANSIBLE_COLLECTIONS_PATH", "MOLECULE_COLLECTIONS_PATH"), importable=False),
        dict(name="changelog", kind="changelog", unit="check", cwd="root", own_netns=False,
             cmd=[os.path.join(BIN, "antsibull-changelog"), "lint"], counter=count_check),
        dict(name="docs", kind="docs", unit="check", cwd="root", own_netns=False,
             cmd=[sys.executable, os.path.join(ROOT, "docs", "generate_reference.py"), "--check"],
             counter=count_check),
        # antsibull-docs lints every documented thing and renders the docsite, built by sphinx -W.
        dict(name="docsite", kind="docsite", unit="check", cwd="root",
             cmd=[sys.executable, os.path.join(ROOT, "docs", "check_docsite.py")], counter=count_check,
             progress=[r"^docsite: +(.{0,60})"]),
        # The execution environment built from Debian packages and run with ansible-navigator
        # against the mock (the build has no network; the playbooks use the suite's loopback).
        dict(name="ee", kind="ee", unit="check", cwd="root",
             cmd=[os.path.join(ROOT, "tests", "ee", "run")], counter=count_check,
             progress=[r"^ee: +([^:]+)"]),
    ]
    return suites


def environment(collections, venv=None, importable=True):
    env = dict(os.environ)
    env["ANSIBLE_COLLECTIONS_PATH"] = collections
    env["MOLECULE_COLLECTIONS_PATH"] = collections
    # Python imports the suite's copy too, in place of the checkout that tests/harness/loopback-only
    # put on PYTHONPATH (a suite that must not find the collection there gets importable=False).
    python_path = [collections] if importable else []
    python_path += [collection_path.python_path_without_collections(env) or ""]
    env["PYTHONPATH"] = os.pathsep.join(entry for entry in python_path if entry)
    if not env["PYTHONPATH"]:
        del env["PYTHONPATH"]
    env["PATH"] = os.path.join(venv or os.path.dirname(BIN), "bin") + os.pathsep + env.get("PATH", "")
    env.setdefault("ANSIBLE_NOCOLOR", "1")
    env.setdefault("NO_COLOR", "1")
    env.setdefault("PY_COLORS", "0")
    env["PYTHONUNBUFFERED"] = "1"  # progress lines as they happen, not when a pipe buffer fills
    env["ANSIBLE_HOME"] = os.path.join(os.path.dirname(collections), "ansible-home")
    env.pop("AZURE_IMDS_URL", None)  # every test names its mock explicitly
    # Container names are global on the machine: the watcher_systemd scenario's container carries
    # this run's tag, so that two checkouts testing at once never remove each other's container.
    env["AZURE_IMDS_RUN_TAG"] = "-" + hashlib.sha256(BUILD.encode()).hexdigest()[:8]
    return env


def in_own_namespace(cmd):
    """cmd in a network (loopback only) and PID namespace of its own, so that suites side by side
    never meet on a port, and nothing a suite starts outlives it."""
    if os.environ.get("AZURE_IMDS_TEST_ISOLATION") not in ("netns", "userns"):
        return cmd
    return ["unshare", "--net", "--pid", "--fork", "--mount-proc", "--", "bash", "-c",
            'ip link set lo up; "$@"; exit $?', "bash"] + cmd


# -- running ------------------------------------------------------------------------------------

class Printer:
    """One line at a time on stdout, from every suite's thread."""
    lock = threading.Lock()

    @classmethod
    def say(cls, line):
        with cls.lock:
            print(line, flush=True)


def run_command(suite, cmd, cwd, log, env):
    """Run cmd with its output into log; say where it is at least every PROGRESS_EVERY seconds.
    Answers (exit status, CPU seconds): the user and system time of cmd and of every process under
    it that was waited for (in a PID namespace of its own, that is all of them; containers that
    podman runs are not its children and are not counted)."""
    patterns = [re.compile(p) for p in suite.get("progress", ())]
    start = time.monotonic()
    state = dict(at=None, said_at=None, said=start)
    with open(log, "ab") as handle:
        handle.write(("$ %s   (in %s)\n" % (" ".join(cmd), cwd)).encode())
        handle.flush()
        proc = subprocess.Popen(in_own_namespace(cmd) if suite.get("own_netns", True) else cmd, cwd=cwd, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

        def read():
            for raw in proc.stdout:
                handle.write(raw)
                line = ANSI.sub("", raw.decode("utf-8", "replace")).rstrip()
                for pattern in patterns:
                    found = pattern.search(line)
                    if found:
                        state["at"] = found.group(1)
                        break

        reader = threading.Thread(target=read)
        reader.start()
        while reader.is_alive():
            reader.join(1.0)
            now = time.monotonic()
            if now - state["said"] >= PROGRESS_EVERY or (state["at"] != state["said_at"] and now - state["said"] >= 10):
                Printer.say("harness: %-18s %5.0fs  at: %s" % (suite["name"], now - start, state["at"] or "(starting)"))
                state.update(said=now, said_at=state["at"])
        _pid, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        return proc.returncode, usage.ru_utime + usage.ru_stime


def prepare_copy(snapshot, suite):
    """A private copy of the snapshot for this suite: tools write tests/output and caches there."""
    place = os.path.join(BUILD, "suites", suite["name"].replace("/", "-"))
    if os.path.isdir(place):
        shutil.rmtree(place)
    copy = os.path.join(place, "collections", *collection_path.TAIL)
    shutil.copytree(snapshot, copy, symlinks=True)
    return copy


def run_suite(suite, snapshot):
    log = os.path.join(LOGS, suite["name"].replace("/", "-") + ".log")
    open(log, "w").close()
    if "missing" in suite:
        with open(log, "a") as handle:
            handle.write("harness: %s is missing; `make venvs` builds it\n" % suite["missing"])
        return 1, 0, 1, log, 0.0
    copy = prepare_copy(snapshot, suite)
    collections = os.path.dirname(os.path.dirname(os.path.dirname(copy)))
    env = environment(collections, suite.get("venv"), suite.get("importable", True))
    for name in suite.get("unset", ()):
        env.pop(name, None)
    cwd = {"root": ROOT, "extensions": os.path.join(ROOT, "extensions")}.get(suite.get("cwd"), copy)
    cmd = suite["cmd"]
    if suite.get("lock"):
        os.makedirs(os.path.dirname(ANSIBLE_TEST_LOCK), exist_ok=True)
        cmd = ["flock", "--shared", ANSIBLE_TEST_LOCK] + cmd
    rc, cpu = run_command(suite, cmd, cwd, log, env)
    with open(log, encoding="utf-8", errors="replace") as handle:
        text = handle.read()
    passed, failed = suite["counter"](text, rc, copy)
    if rc and not failed:
        failed = 1  # the tool failed before it could say what: one failure, not none
    for pattern in suite.get("forbid", ()):
        found = re.search(pattern, text, re.M)
        if found:
            # Nothing is skipped to get green: a skip the tool reports is a failure here.
            with open(log, "a") as handle:
                handle.write("harness: the log says %r: this suite skipped something\n" % found.group(0))
            return rc or 1, passed, max(failed, 1), log, cpu
    return rc, passed, failed, log, cpu


def wanted_suites(suites, argv):
    if not argv:
        return suites, []
    chosen, unknown = [], []
    for word in argv:
        matches = [s for s in suites if word in (s["name"], s["kind"])]
        if not matches:
            unknown.append(word)
        chosen += [s for s in matches if s not in chosen]
    return [s for s in suites if s in chosen], unknown


def run_all(suites, jobs, snapshot):
    """Run suites on `jobs` workers, heaviest first; answers the results in table order."""
    queue = sorted(suites, key=lambda s: -weight(s))
    began = time.monotonic()
    results = {}
    lock = threading.Lock()

    def worker():
        while True:
            with lock:
                if not queue:
                    return
                suite = queue.pop(0)
            Printer.say("harness: %-18s started" % suite["name"])
            start = time.monotonic()
            rc, passed, failed, log, cpu = run_suite(suite, snapshot)
            took = time.monotonic() - start
            ok = rc == 0 and failed == 0 and passed > 0
            if ok or failed:
                why = ""
            else:
                why = " (exit %d)" % rc if rc else " (ran nothing)"
                failed = max(failed, 1)
            results[suite["name"]] = dict(suite=suite, ok=ok, passed=passed, failed=failed, took=took, log=log,
                                          cpu=cpu, at=start - began)
            Printer.say("harness: %-18s %s  %d passed, %d failed  %6.1fs (cpu %.0fs)%s  log: %s" % (
                suite["name"], "PASS" if ok else "FAIL", passed, failed, took, cpu, why, os.path.relpath(log, ROOT)))
            if not ok:
                with open(log, encoding="utf-8", errors="replace") as handle:
                    lines = handle.read().splitlines()
                Printer.say("\n".join("    | " + line for line in failure_excerpt(lines)))

    threads = [threading.Thread(target=worker) for dummy in range(max(1, jobs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return [results[s["name"]] for s in suites]


def main(argv):
    jobs = 3
    if argv[:1] == ["-j"]:
        jobs, argv = int(argv[1]), argv[2:]
    if "--core-venvs" in argv:
        print("\n".join(CORES))
        return 0
    suites = suite_table()
    if "--list" in argv:
        print("\n".join(s["name"] for s in suites))
        return 0
    suites, unknown = wanted_suites(suites, argv)
    if unknown:
        print("run_suites: unknown suite(s) %s; choose from: %s"
              % (", ".join(unknown), ", ".join(s["name"] for s in suite_table())))
        return 2
    isolation = os.environ.get("AZURE_IMDS_TEST_ISOLATION", "none")
    if isolation == "none":
        print("harness: refusing to run outside tests/harness/loopback-only (no isolation)")
        return 2
    if isolation == "guard" and jobs > 1:
        # Without namespaces, suites side by side would meet on the mock's fixed port.
        print("harness: no network namespace here: one suite at a time", flush=True)
        jobs = 1
    print("harness: network isolation: %s; %d suites, %d at a time" % (isolation, len(suites), jobs), flush=True)
    os.makedirs(LOGS, exist_ok=True)
    began = time.monotonic()
    snapshot = collection_path.copy_for_ansible_test(os.path.join(BUILD, "snapshot"))
    results = run_all(suites, jobs, snapshot)
    print("")
    # started: seconds after the first suite; cpu: see run_command (the time column's weights are WEIGHTS).
    print("harness: %-18s %-6s %7s %7s  %-13s %8s %8s %7s" % (
        "suite", "result", "passed", "failed", "counting", "started", "time", "cpu"))
    for r in results:
        print("harness: %-18s %-6s %7d %7d  %-13s %7.0fs %7.1fs %6.0fs" % (
            r["suite"]["name"], "PASS" if r["ok"] else "FAIL", r["passed"], r["failed"], r["suite"]["unit"],
            r.get("at", 0), r["took"], r.get("cpu", 0)))
    print("harness: wall time %.1fs, cpu %.0fs" % (time.monotonic() - began, sum(r.get("cpu", 0) for r in results)))
    # CI reads this plain line.
    print("%d passed, %d failed" % (sum(r["passed"] for r in results), sum(r["failed"] for r in results)))
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
