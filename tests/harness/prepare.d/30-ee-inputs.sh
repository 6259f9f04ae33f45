#!/usr/bin/env bash
# for: ee
# The ee suite's inputs that need the network or root, made before the suites are isolated: the
# Debian base image of the execution environment (mmdebstrap), the wheelhouse of every Python
# package its build installs (pip on this machine), and /dev/mqueue for ansible-navigator.
set -euo pipefail
cd "$(dirname "$0")/../../.."
exec tests/ee/run prepare
