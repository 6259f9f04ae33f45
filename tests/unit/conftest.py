"""Make the collection importable as ansible_collections.azure_imds.scheduled_events.

The harness copies the tree to build/collections for ansible-test; plain `pytest tests/unit`
from a checkout gets a symlink farm under .cache instead, so edits show without a copy.
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FARM = os.path.join(ROOT, ".cache", "pytest-collections")
LINK = os.path.join(FARM, "ansible_collections", "azure_imds", "scheduled_events")

if not os.path.islink(LINK):
    os.makedirs(os.path.dirname(LINK), exist_ok=True)
    os.symlink(ROOT, LINK)
if FARM not in sys.path:
    sys.path.insert(0, FARM)
for extra in (os.path.join(ROOT, "tests"), os.path.join(ROOT, "roles", "mock_imds", "files")):
    if extra not in sys.path:
        sys.path.insert(0, extra)
