#!/usr/bin/env bash
# for: units sanity
# ansible.windows, whose win_uri the modules run on Windows hosts, for the unit test that holds the
# test stand-in of win_uri (tests/support/win_uri_standin) to win_uri's own DOCUMENTATION and
# RETURN: taken from the `ansible` package (tests/harness/bundled-collection) into
# .cache/windows-collections. Only read as files; no test runs it (it is PowerShell).
# The pin: the same ansible release as containers.podman (one wheel for both, and the release that
# goes with the oldest ansible-core we support, 2.19). A later pin whose win_uri takes or returns
# other than the stand-in does fails tests/unit/plugins/action/test_win_uri_standin.py.
set -euo pipefail
cd "$(dirname "$0")/../../.."

exec tests/harness/bundled-collection 12.3.0 ansible.windows 3.3.0 \
  .cache/windows-collections/ansible_collections/ansible/windows
