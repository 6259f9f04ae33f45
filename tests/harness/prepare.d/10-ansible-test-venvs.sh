#!/usr/bin/env bash
# for: sanity
# ansible-test sanity runs each test in a virtual environment of its own under
# ~/.ansible/test/venv, built with pip from the package registry. Build them here, for every
# supported ansible-core, outside the loopback-only namespace, so the suites themselves never need
# the network.
#
# ansible-test bootstraps pip in those environments with a get-pip script it downloads from a
# host this machine cannot reach. Our stand-in does the same job with the interpreter's own
# ensurepip followed by pip from the configured registry; it is written to the cache path that
# ansible-test reads before it would download anything.
#
# ~/.ansible/test is shared by every run on this machine: the whole step holds an exclusive lock
# on it (the sanity suites hold it shared), so that two preparations never build the same
# environment at once.
set -euo pipefail
cd "$(dirname "$0")/../../.."
root=$PWD
lock="$HOME/.ansible/test/azure_imds.lock"
mkdir -p "$(dirname "$lock")" tests/output
exec 9>"$lock"
if ! flock --exclusive --nonblock 9; then
  echo "prepare: another run is preparing ~/.ansible/test (or running sanity); waiting for it"
  flock --exclusive 9
fi

build=${AZURE_IMDS_BUILD_DIR:-$root/build}/prepare
copy=$(.venv/bin/python tests/harness/collection_path.py copy "$build")
mapfile -t venvs < <(.venv/bin/python tests/harness/run_suites.py --core-venvs)
for venv in "${venvs[@]}"; do
  venv_py=$venv/bin/python
  core=$("$venv_py" -c 'import ansible.release as r; print(r.__version__)')
  # Each core's sanity runs on its own environment's Python (2.21 needs 3.12+; 2.19 runs on 3.11).
  python=$("$venv_py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  pip_version=$("$venv_py" -c '
import sys
from ansible_test._internal.python_requirements import get_venv_packages
from ansible_test._internal.host_configs import NativePythonConfig
print(get_venv_packages(NativePythonConfig(version=sys.argv[1]))["pip"])' "$python")
  cache="$HOME/.ansible/test/cache/get_pip_${pip_version//./_}.py"
  mkdir -p "$(dirname "$cache")"
  cat > "$cache" <<'PY'
"""Offline stand-in for get-pip.py (written by azure_imds.scheduled_events tests/harness)."""
import subprocess
import sys

args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
subprocess.check_call([sys.executable, "-m", "ensurepip", "--default-pip"])
subprocess.check_call([sys.executable, "-m", "pip", "install", "--quiet"] + args)
PY
  log=$root/tests/output/prepare-ansible-test-venvs-$core.log
  (cd "$copy" && ANSIBLE_COLLECTIONS_PATH="$build/collections" PATH="$venv/bin:$PATH" "$venv/bin/ansible-test" sanity \
      --prime-venvs --local --python "$python" --color no) >"$log" 2>&1 || {
    echo "prepare: priming ansible-test $core sanity environments failed; see $log" >&2
    tail -20 "$log" >&2
    exit 1
  }
  echo "prepare: ansible-test $core sanity environments ready (Python $python)"
done
