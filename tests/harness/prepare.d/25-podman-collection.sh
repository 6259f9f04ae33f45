#!/usr/bin/env bash
# for: molecule
# The containers.podman collection, which the podman driver of molecule-plugins runs (its create
# and destroy playbooks, and the `containers.podman.podman` connection), for the
# watcher_systemd scenario. Galaxy cannot be reached from these machines: the `ansible` package
# on the Python registry bundles the collection, so pip downloads that one wheel (no
# dependencies) and only ansible_collections/containers/podman is taken out of it, into
# .cache/molecule-collections, which extensions/molecule/watcher_systemd/molecule.yml puts on the
# collections path. Done here, outside the loopback-only namespace, because pip needs the
# registry. Nothing is downloaded when the pinned version is already there.
set -euo pipefail
cd "$(dirname "$0")/../../.."

# The ansible release that bundles the containers.podman version we test with.
ansible_pin=12.3.0
podman_version=1.18.0
target=.cache/molecule-collections/ansible_collections/containers/podman

installed=$(.venv/bin/python -c 'import json, sys; print(json.load(open(sys.argv[1]))["collection_info"]["version"])' \
  "$target/MANIFEST.json" 2>/dev/null || true)
if [ "$installed" = "$podman_version" ]; then
  echo "prepare: containers.podman $podman_version is in .cache/molecule-collections"
  exit 0
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/podman-collection.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p tests/output
log=tests/output/prepare-podman-collection.log
echo "prepare: containers.podman $podman_version from the ansible $ansible_pin wheel, log: $log"
if ! .venv/bin/python -m pip download --quiet --no-deps --disable-pip-version-check \
    --dest "$work" "ansible==$ansible_pin" >"$log" 2>&1; then
  echo "prepare: pip could not download ansible==$ansible_pin; last lines of $log:" >&2
  tail -20 "$log" >&2
  exit 1
fi
rm -rf "$target"
mkdir -p "$(dirname "$target")"
.venv/bin/python - "$work" "$target" "$podman_version" <<'PY'
import glob
import json
import os
import sys
import zipfile

work, target, expected = sys.argv[1:]
prefix = "ansible_collections/containers/podman/"
wheel = glob.glob(os.path.join(work, "ansible-*.whl"))[0]
with zipfile.ZipFile(wheel) as archive:
    members = [name for name in archive.namelist() if name.startswith(prefix) and not name.endswith("/")]
    for name in members:
        dest = os.path.join(target, name[len(prefix):])
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        with archive.open(name) as source, open(dest, "wb") as out:
            out.write(source.read())
with open(os.path.join(target, "MANIFEST.json")) as handle:
    found = json.load(handle)["collection_info"]["version"]
if found != expected:
    sys.exit("prepare: the wheel holds containers.podman %s, not %s: update the pins together" % (found, expected))
print("prepare: containers.podman %s installed in %s (%d files)" % (found, os.path.dirname(os.path.dirname(target)), len(members)))
PY
