#!/usr/bin/env bash
# The base image of our execution environment (execution-environment.yml names it): Debian 13
# (trixie) from Debian packages, with the Python 3.13 that the newest supported ansible-core (2.21,
# Python 3.12+) runs on, pip and the ssh client bindep.txt asks for. mmdebstrap fetches the packages
# from this machine's own apt mirror (its sources, with the machine's own release name changed to
# trixie when it runs another release); no image registry is involved.
#
#   extensions/ee/base-image.sh           # builds localhost/azure-imds-ee-base:trixie if needed
#   extensions/ee/base-image.sh --check   # only says whether it is there and current (exit 1 if not)
#
# The image carries a label with a hash of its recipe: when an image with the current recipe is
# there already, nothing is rebuilt. A missing podman or mmdebstrap is an error.
# CONTAINERS_CONF, if set, is honoured (tests/ee/run sets one that works on its test machines).
set -euo pipefail

image=localhost/azure-imds-ee-base:trixie
suite=trixie
packages=python3,python3-pip,openssh-client
# ansible-core refuses a locale that is not UTF-8; C.UTF-8 is part of Debian's libc.
changes=("ENV LANG=C.UTF-8" 'CMD ["/bin/bash"]')
# Everything that shapes the image is in the recipe, so that editing any of it rebuilds.
recipe="mmdebstrap --variant=minbase --include=$packages $suite; sources=host; ${changes[*]}; v1"
recipe_hash=$(printf '%s' "$recipe" | sha256sum | cut -c1-16)
label=io.azure-imds.ee-base.recipe

for tool in podman mmdebstrap; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "base-image: $tool is not installed; install it with: apt-get install -y podman runc mmdebstrap uidmap" >&2
    exit 1
  fi
done

current=$(podman image inspect --format "{{ index .Labels \"$label\" }}" "$image" 2>/dev/null || true)
if [ "$current" = "$recipe_hash" ]; then
  echo "base-image: $image is current (recipe $recipe_hash)"
  exit 0
fi
if [ "${1:-}" = --check ]; then
  state="missing"
  [ -z "$current" ] || state="not current (recipe $current, wanted $recipe_hash)"
  echo "base-image: $image is $state; build it with extensions/ee/base-image.sh" >&2
  exit 1
fi

have_sources=()
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
  [ -f "$f" ] && have_sources+=("$f")
done
if [ "${#have_sources[@]}" -eq 0 ]; then
  echo "base-image: no apt sources configured on this machine (/etc/apt/sources.list*); mmdebstrap needs one" >&2
  exit 1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/ee-base-image.XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "base-image: building $image with mmdebstrap (recipe $recipe_hash, packages $packages)"
# Mirror "-": the machine's own apt sources on standard input, so that no host is named here; a
# bookworm machine's "bookworm", "bookworm-updates" and "bookworm-security" become trixie's.
host_release=$( (. /etc/os-release && echo "${VERSION_CODENAME:-}") 2>/dev/null || true)
rename=(cat)
if [ -n "$host_release" ] && [ "$host_release" != "$suite" ]; then
  rename=(sed -E "s/\b$host_release(-updates|-security|-backports)?\b/$suite\1/g")
fi
if ! cat "${have_sources[@]}" | "${rename[@]}" | mmdebstrap --variant=minbase --include="$packages" \
    --format=tar "$suite" "$work/rootfs.tar" - >"$work/log" 2>&1; then
  echo "base-image: mmdebstrap failed; its last lines:" >&2
  tail -20 "$work/log" >&2
  exit 1
fi
import_args=()
for change in "${changes[@]}" "LABEL $label=$recipe_hash"; do
  import_args+=(--change "$change")
done
if ! podman import "${import_args[@]}" "$work/rootfs.tar" "$image" >"$work/log" 2>&1; then
  echo "base-image: podman import failed:" >&2
  tail -20 "$work/log" >&2
  exit 1
fi
echo "base-image: $image built ($(podman image inspect --format '{{.Size}}' "$image") bytes)"
