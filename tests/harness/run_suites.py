"""Run the project's test suites one after the other and report each with its test count.

Usage: run_suites.py [SUITE ...]     (default: every suite, in the order below)
       run_suites.py --list

Each suite's full output goes to tests/output/harness/<suite>.log. A suite fails when its
command fails or when it ran no test: nothing is ever skipped silently. The last line is the
plain "N passed, N failed" that CI reads.
"""

import os
import re
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# AZURE_IMDS_BUILD_DIR lets two runs on one checkout keep apart (each copies the tree there).
BUILD = os.environ.get("AZURE_IMDS_BUILD_DIR") or os.path.join(ROOT, "build")
COLLECTIONS = os.path.join(BUILD, "collections")
COLLECTION_COPY = os.path.join(COLLECTIONS, "ansible_collections", "azure_imds", "scheduled_events")
LOGS = os.path.join(ROOT, "tests", "output", "harness")
PY = "%d.%d" % sys.version_info[:2]
BIN = os.path.dirname(sys.executable)


def collection_files():
    """Files of the working tree that git tracks or would track (untracked, not ignored)."""
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                         cwd=ROOT, check=True, stdout=subprocess.PIPE).stdout.decode()
    return [f for f in out.split("\0") if f and os.path.exists(os.path.join(ROOT, f))]


def sync_collection():
    """ansible-test wants the tree at .../ansible_collections/azure_imds/scheduled_events/."""
    if os.path.isdir(COLLECTION_COPY):
        shutil.rmtree(COLLECTION_COPY)
    for rel in collection_files():
        src = os.path.join(ROOT, rel)
        dst = os.path.join(COLLECTION_COPY, rel)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copy2(src, dst, follow_symlinks=False)
    # The copy sits inside this checkout's work tree, where git ignores it; ansible-test asks git
    # which files exist, so the copy gets a repository of its own.
    subprocess.run(["git", "init", "-q"], cwd=COLLECTION_COPY, check=True)
    subprocess.run(["git", "add", "-A"], cwd=COLLECTION_COPY, check=True)
    return COLLECTION_COPY


def count(pattern, text):
    return len(re.findall(pattern, text, re.M))


def last_int(pattern, text):
    found = re.findall(pattern, text, re.M)
    return int(found[-1]) if found else 0


def parse_pytest(text):
    passed = last_int(r"(\d+) passed", text)
    return passed


def count_linted_fragments(text):
    """antsibull-changelog lint prints nothing when all is well: count what it linted then."""
    if [line for line in text.splitlines()[1:] if line.strip()]:
        return 0
    fragments = os.listdir(os.path.join(ROOT, "changelogs", "fragments"))
    return len([f for f in fragments if f.endswith((".yml", ".yaml"))])


def molecule_scenarios():
    base = os.path.join(ROOT, "extensions", "molecule")
    if not os.path.isdir(base):
        return []
    return sorted(d for d in os.listdir(base) if os.path.isfile(os.path.join(base, d, "molecule.yml")))


def suite_table():
    ansible_test = os.path.join(BIN, "ansible-test")
    return [
        dict(name="sanity", unit="sanity tests", cwd=COLLECTION_COPY, sync=True,
             cmd=[ansible_test, "sanity", "--local", "--python", PY, "--color", "no"],
             counter=lambda text: count(r"^Running sanity test [\"'][^\"']+[\"']", text),
             forbid=[r"Required program \S+ not found", r"Skipping sanity test", r"All targets skipped"]),
        dict(name="units", unit="tests", cwd=ROOT, sync=True,
             cmd=[sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/unit"],
             counter=parse_pytest,
             forbid=[r"\d+ skipped", r"\d+ xfailed", r"\d+ deselected"]),
        dict(name="integration", unit="targets", cwd=COLLECTION_COPY, sync=True,
             cmd=[ansible_test, "integration", "--local", "--python", PY, "--color", "no"],
             counter=lambda text: count(r"^Running \S+ integration test role", text),
             forbid=[r"All targets skipped", r"Skipping \S+ integration"]),
        dict(name="molecule", unit="scenarios", cwd=os.path.join(ROOT, "extensions"), sync=True,
             cmd=None, counter=None),
        dict(name="lint", unit="files linted", cwd=ROOT, sync=True,
             cmd=[os.path.join(BIN, "ansible-lint"), "--offline", "--profile", "production", "--nocolor"],
             counter=lambda text: last_int(r"Passed: 0 failure\(s\), 0 warning\(s\) (?:in|on) (\d+) files", text)),
        dict(name="changelog", unit="fragments", cwd=ROOT, sync=False,
             cmd=[os.path.join(BIN, "antsibull-changelog"), "lint"],
             counter=count_linted_fragments),
        dict(name="docs", unit="pages current", cwd=ROOT, sync=True,
             cmd=[sys.executable, os.path.join(ROOT, "docs", "generate_reference.py"), "--check"],
             counter=lambda text: last_int(r"^docs: (\d+) reference pages current", text)),
    ]


def environment():
    env = dict(os.environ)
    env["ANSIBLE_COLLECTIONS_PATH"] = COLLECTIONS
    env["PATH"] = BIN + os.pathsep + env.get("PATH", "")
    env.setdefault("ANSIBLE_NOCOLOR", "1")
    env["ANSIBLE_HOME"] = os.path.join(BUILD, "ansible-home")
    env["MOLECULE_COLLECTIONS_PATH"] = COLLECTIONS
    env.pop("AZURE_IMDS_URL", None)  # every test names its mock explicitly
    return env


def run_command(cmd, cwd, log, env):
    with open(log, "ab") as handle:
        handle.write(("$ %s   (in %s)\n" % (" ".join(cmd), cwd)).encode())
        handle.flush()
        proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=handle, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL, check=False)
    return proc.returncode


def run_suite(suite, env):
    log = os.path.join(LOGS, suite["name"] + ".log")
    open(log, "w").close()
    if suite["sync"]:
        sync_collection()
    if suite["name"] == "molecule":
        scenarios = molecule_scenarios()
        rc = 0
        passed = 0
        for scenario in scenarios:
            code = run_command([os.path.join(BIN, "molecule"), "test", "-s", scenario], suite["cwd"], log, env)
            if code == 0:
                passed += 1
            rc = rc or code
        return rc, passed, log
    rc = run_command(suite["cmd"], suite["cwd"], log, env)
    with open(log, encoding="utf-8", errors="replace") as handle:
        text = handle.read()
    for pattern in suite.get("forbid", ()):
        found = re.search(pattern, text, re.M)
        if found:
            # Nothing is skipped to get green: a skip the tool reports is a failure here.
            with open(log, "a") as handle:
                handle.write("harness: the log says %r: this suite skipped something\n" % found.group(0))
            return rc or 1, suite["counter"](text), log
    return rc, suite["counter"](text), log


def main(argv):
    suites = suite_table()
    names = [s["name"] for s in suites]
    if "--sync-only" in argv:
        sync_collection()
        return 0
    if "--list" in argv:
        print("\n".join(names))
        return 0
    wanted = argv or names
    unknown = [w for w in wanted if w not in names]
    if unknown:
        print("run_suites: unknown suite(s) %s; choose from: %s" % (", ".join(unknown), ", ".join(names)))
        return 2
    os.makedirs(LOGS, exist_ok=True)
    env = environment()
    isolation = os.environ.get("AZURE_IMDS_TEST_ISOLATION", "none")
    print("harness: network isolation: %s" % isolation, flush=True)
    if isolation == "none":
        print("harness: refusing to run outside tests/harness/loopback-only (no isolation)")
        return 2
    results = []
    for suite in suites:
        if suite["name"] not in wanted:
            continue
        start = time.monotonic()
        print("harness: %-12s running ..." % suite["name"], flush=True)
        rc, tests, log = run_suite(suite, env)
        took = time.monotonic() - start
        ok = rc == 0 and tests > 0
        why = "" if ok else (" (exit %d)" % rc if rc else " (ran no test)")
        results.append(dict(name=suite["name"], ok=ok, tests=tests))
        print("harness: %-12s %s  %4d %-13s %6.1fs%s  log: %s"
              % (suite["name"], "PASS" if ok else "FAIL", tests, suite["unit"], took, why, os.path.relpath(log, ROOT)),
              flush=True)
        if not ok:
            with open(log, encoding="utf-8", errors="replace") as handle:
                tail = handle.read().splitlines()[-40:]
            print("\n".join("    | " + line for line in tail), flush=True)
    passed = sum(r["tests"] for r in results if r["ok"])
    failed = sum(max(r["tests"], 1) for r in results if not r["ok"])
    print("harness: suites: %s" % ", ".join("%s=%s" % (r["name"], "ok" if r["ok"] else "FAILED") for r in results))
    # CI reads this plain line; a failed suite counts its tests (at least one) as failed.
    print("%d passed, %d failed" % (passed, failed))
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
