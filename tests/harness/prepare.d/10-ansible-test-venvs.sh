#!/usr/bin/env bash
# ansible-test sanity runs each test in a virtual environment of its own under
# ~/.ansible/test/venv, built with pip from the package registry. Build them here, outside the
# loopback-only namespace, so the suites themselves never need the network.
#
# ansible-test bootstraps pip in those environments with a get-pip script it downloads from a
# host this machine cannot reach. Our stand-in does the same job with the interpreter's own
# ensurepip followed by pip from the configured registry; it is written to the cache path that
# ansible-test reads before it would download anything.
set -euo pipefail
cd "$(dirname "$0")/../../.."
venv_py=.venv/bin/python
pip_version=$("$venv_py" -c '
from ansible_test._internal.python_requirements import get_venv_packages
from ansible_test._internal.host_configs import NativePythonConfig
print(get_venv_packages(NativePythonConfig(version="3.11"))["pip"])')
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
mkdir -p tests/output
"$venv_py" tests/harness/run_suites.py --sync-only
cd build/collections/ansible_collections/azure_imds/scheduled_events
ANSIBLE_COLLECTIONS_PATH="$OLDPWD/build/collections" "$OLDPWD/.venv/bin/ansible-test" sanity --prime-venvs \
  --local --python 3.11 --color no >"$OLDPWD/tests/output/prepare-ansible-test-venvs.log" 2>&1 || {
  echo "prepare: priming ansible-test sanity environments failed; see tests/output/prepare-ansible-test-venvs.log" >&2
  tail -20 "$OLDPWD/tests/output/prepare-ansible-test-venvs.log" >&2
  exit 1
}
echo "prepare: ansible-test sanity environments ready"
