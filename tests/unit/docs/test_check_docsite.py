# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""docs/check_docsite.py: the offline pieces (the whole render is a suite of `make test`)."""

import os
import posixpath

import pytest
from sphinx.util.inventory import InventoryFile

from ansible_collections.azure_imds.scheduled_events.docs import check_docsite
from ansible_collections.azure_imds.scheduled_events.tests.harness.collection_path import ROOT

SPHINX_INIT_CONF = """project = 'Ansible collections'
intersphinx_mapping = {
    'python3': ('https://docs.python.org/3/', (None, '../python3.inv')),
    'ansible_devel': ('https://docs.ansible.com/projects/ansible/devel/', (None, '../ansible_devel.inv')),
}
default_role = 'any'
"""


def test_the_local_inventory_is_one_sphinx_reads_with_the_pages_at_their_addresses(tmp_path):
    path = tmp_path / "ansible_devel.inv"
    check_docsite.write_inventory(str(path))
    with open(str(path), "rb") as handle:
        inventory = InventoryFile.load(handle, check_docsite.ANSIBLE_DOCSITE, posixpath.join)
    labels = inventory["std:label"]
    assert labels["common_return_values"].uri == \
        check_docsite.ANSIBLE_DOCSITE + "reference_appendices/common_return_values.html#common-return-values"
    assert labels["ansible_collections.ansible.builtin.wait_for_module"].uri == check_docsite.ANSIBLE_DOCSITE + \
        "collections/ansible/builtin/wait_for_module.html#ansible-collections-ansible-builtin-wait-for-module"


def test_the_sphinx_init_conf_reads_that_inventory_and_nothing_from_the_network(tmp_path):
    (tmp_path / "conf.py").write_text(SPHINX_INIT_CONF)
    check_docsite.offline_conf(str(tmp_path))
    conf = (tmp_path / "conf.py").read_text()
    namespace = {}
    exec(compile(conf, "conf.py", "exec"), namespace)  # pylint: disable=exec-used
    assert namespace["intersphinx_mapping"] == {
        "ansible_devel": (check_docsite.ANSIBLE_DOCSITE, str(tmp_path / "ansible_devel.inv"))}
    assert namespace["default_role"] == "any"
    assert (tmp_path / "ansible_devel.inv").is_file()


def test_a_conf_without_the_block_it_replaces_is_an_error_that_says_so(tmp_path):
    (tmp_path / "conf.py").write_text("project = 'x'\n")
    with pytest.raises(check_docsite.CheckError, match="no intersphinx_mapping block to replace"):
        check_docsite.offline_conf(str(tmp_path))


def test_every_page_of_extra_docs_exists():
    pages = check_docsite.extra_pages()
    assert ("Guides", "getting_started") in pages and ("Background", "azure_facts") in pages
    for _section, page in pages:
        assert os.path.isfile(os.path.join(ROOT, "docs", "docsite", "rst", page + ".rst")), page
