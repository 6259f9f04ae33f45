"""The watcher daemon's files import each other and _imds by plain name, as on a VM where the role
installs them into one directory. Here they come from the checkout."""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
WATCHER_FILES = os.path.join(ROOT, "roles", "watcher", "files")
MODULE_UTILS = os.path.join(ROOT, "plugins", "module_utils")
DAEMON = os.path.join(WATCHER_FILES, "scheduled_events_watcher.py")

for path in (MODULE_UTILS, WATCHER_FILES):
    if path not in sys.path:
        sys.path.insert(0, path)
