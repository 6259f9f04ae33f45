#!/usr/bin/env bash
# for: molecule
# The Debian bookworm image with real systemd that extensions/molecule/watcher_systemd boots with
# podman. Built here, outside the loopback-only namespace, because mmdebstrap downloads Debian
# packages from the machine's configured apt sources; no image registry is involved.
#
# The image carries a label with the hash of its recipe: when an image with the current recipe is
# already there, nothing is rebuilt. A missing podman or mmdebstrap is an error, never a skip: the
# molecule suite cannot run without this image.
set -euo pipefail
cd "$(dirname "$0")/../../.."

image=localhost/azure-imds-watcher-systemd:bookworm
suite=bookworm
packages=python3,systemd,systemd-sysv,dbus
# Anything that changes the resulting file system belongs in the recipe, so that editing it
# rebuilds the image.
recipe="mmdebstrap --variant=minbase --include=$packages $suite; sources=host; cmd=/sbin/init; v1"
recipe_hash=$(printf '%s' "$recipe" | sha256sum | cut -c1-16)
label=io.azure-imds.watcher.recipe

for tool in podman runc mmdebstrap; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "prepare: $tool is not installed; the watcher_systemd molecule scenario needs it." >&2
    echo "prepare: install it with: apt-get install -y podman runc mmdebstrap uidmap (make test does this as root: tests/harness/system-deps)" >&2
    exit 1
  fi
done

export CONTAINERS_CONF="$PWD/extensions/molecule/watcher_systemd/containers.conf"

current=$(podman image inspect --format "{{ index .Labels \"$label\" }}" "$image" 2>/dev/null || true)
if [ "$current" = "$recipe_hash" ]; then
  echo "prepare: $image is current (recipe $recipe_hash)"
  exit 0
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/watcher-image.XXXXXX")
trap 'rm -rf "$work"' EXIT
sources=(/etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources)
have_sources=()
for f in "${sources[@]}"; do
  [ -f "$f" ] && have_sources+=("$f")
done
if [ "${#have_sources[@]}" -eq 0 ]; then
  echo "prepare: no apt sources configured on this machine (/etc/apt/sources.list*); mmdebstrap needs one" >&2
  exit 1
fi

echo "prepare: building $image with mmdebstrap (recipe $recipe_hash), log: tests/output/prepare-watcher-image.log"
mkdir -p tests/output
log=tests/output/prepare-watcher-image.log
# Mirror "-": read the machine's own apt sources from standard input instead of naming a host.
if ! cat "${have_sources[@]}" | mmdebstrap --variant=minbase --include="$packages" \
    --format=tar "$suite" "$work/rootfs.tar" - >"$log" 2>&1; then
  echo "prepare: mmdebstrap failed; last lines of $log:" >&2
  tail -20 "$log" >&2
  exit 1
fi
if ! podman import --change 'CMD ["/sbin/init"]' --change "LABEL $label=$recipe_hash" \
    --change 'STOPSIGNAL SIGRTMIN+3' "$work/rootfs.tar" "$image" >>"$log" 2>&1; then
  echo "prepare: podman import failed; last lines of $log:" >&2
  tail -20 "$log" >&2
  exit 1
fi
echo "prepare: $image built"
