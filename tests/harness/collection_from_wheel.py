"""Take one collection out of the `ansible` wheel from the Python registry, since Galaxy cannot be
reached from these machines: prepare.d's steps download the pinned wheel (pip, no dependencies) and
call this to copy ansible_collections/NAMESPACE/NAME into a collections directory of .cache/.

    python collection_from_wheel.py WHEEL_DIR NAMESPACE.NAME EXPECTED_VERSION TARGET_DIR

Fails when the wheel holds another version of the collection than the one pinned. Standard library only.
"""

import glob
import json
import os
import shutil
import sys
import zipfile


def extract(work, fqcn, expected, target):
    namespace, name = fqcn.split(".")
    prefix = "ansible_collections/%s/%s/" % (namespace, name)
    wheel = glob.glob(os.path.join(work, "ansible-*.whl"))[0]
    if os.path.isdir(target):
        shutil.rmtree(target)
    with zipfile.ZipFile(wheel) as archive:
        members = [entry for entry in archive.namelist() if entry.startswith(prefix) and not entry.endswith("/")]
        for entry in members:
            dest = os.path.join(target, entry[len(prefix):])
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            with archive.open(entry) as source, open(dest, "wb") as out:
                out.write(source.read())
    with open(os.path.join(target, "MANIFEST.json")) as handle:
        found = json.load(handle)["collection_info"]["version"]
    if found != expected:
        sys.exit("prepare: the wheel holds %s %s, not %s: update the pins together" % (fqcn, found, expected))
    print("prepare: %s %s installed in %s (%d files)"
          % (fqcn, found, os.path.dirname(os.path.dirname(target)), len(members)))


if __name__ == "__main__":
    extract(*sys.argv[1:5])
