#!/usr/bin/env bash
# for: molecule
# The containers.podman collection, which the podman driver of molecule-plugins runs (its create
# and destroy playbooks, and the `containers.podman.podman` connection), for the
# watcher_systemd scenario, taken from the `ansible` package (tests/harness/bundled-collection) into
# .cache/molecule-collections, which extensions/molecule/watcher_systemd/molecule.yml puts on the
# collections path.
set -euo pipefail
cd "$(dirname "$0")/../../.."

# The ansible release that bundles the containers.podman version we test with.
exec tests/harness/bundled-collection 12.3.0 containers.podman 1.18.0 \
  .cache/molecule-collections/ansible_collections/containers/podman
