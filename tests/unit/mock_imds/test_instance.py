# -*- coding: utf-8 -*-
"""/metadata/instance and its route parameters, json and text formats."""

import pytest

V = "?api-version=2021-02-01"


def test_full_document_has_compute_and_network(start):
    _mock, client = start()
    doc = client.get("/metadata/instance" + V).json()
    assert set(doc) == {"compute", "network"}
    assert doc["compute"]["name"] == "vm0"
    assert doc["network"]["interface"][0]["ipv4"]["ipAddress"][0]["privateIpAddress"].startswith("10.0.")


def test_every_primitive_is_a_string(start):
    _mock, client = start()

    def walk(node):
        if isinstance(node, dict):
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)
        else:
            assert isinstance(node, str), node

    walk(client.get("/metadata/instance" + V).json())


def test_sub_path_filters_json(start):
    _mock, client = start()
    compute = client.get("/metadata/instance" + V).json()["compute"]
    assert client.get("/metadata/instance/compute" + V).json() == compute
    assert client.get("/metadata/instance/compute/osProfile" + V).json() == compute["osProfile"]


def test_array_index_in_path(start):
    _mock, client = start()
    answer = client.get("/metadata/instance/network/interface/0/ipv4/ipAddress/0/privateIpAddress" + V +
                        "&format=text")
    assert answer.status == 200 and answer.text.startswith("10.0.")
    assert client.get("/metadata/instance/network/interface/1" + V).status == 404


def test_leaf_with_format_text_is_plain_text(start):
    _mock, client = start()
    answer = client.get("/metadata/instance/compute/name" + V + "&format=text")
    assert (answer.status, answer.body, answer.headers.getheader("Content-Type")) == (
        200, b"vm0", "text/plain; charset=utf-8")


def test_empty_leaf_is_empty_text(start):
    _mock, client = start()
    answer = client.get("/metadata/instance/compute/zone" + V + "&format=text")
    assert (answer.status, answer.body) == (200, b"")


def test_non_leaf_with_format_text_is_400(start):
    _mock, client = start()
    for path in ("/metadata/instance", "/metadata/instance/compute", "/metadata/instance/compute/tagsList"):
        answer = client.get(path + V + "&format=text")
        assert answer.status == 400
        assert "leaf" in answer.json()["error"]


def test_leaf_without_format_text_is_400(start):
    """The IMDS docs: for a leaf node format=json does not work, format=text must be given."""
    _mock, client = start()
    for query in (V, V + "&format=json"):
        answer = client.get("/metadata/instance/compute/name" + query)
        assert answer.status == 400
        assert "format=text" in answer.json()["error"]


@pytest.mark.parametrize("path", ["/metadata/instance/compute/Name", "/metadata/instance/nothing",
                                  "/metadata/instance/compute/name/deeper", "/metadata/instance/"])
def test_unknown_or_miscased_sub_path_is_404(start, path):
    _mock, client = start()
    assert client.get(path + V + "&format=text").status == 404


def test_unknown_format_is_400(start):
    _mock, client = start()
    assert client.get("/metadata/instance" + V + "&format=xml").status == 400


def test_group_compute_overrides(start):
    _mock, client = start(scenario="spot_preempt")
    compute = client.get("/metadata/instance/compute" + V).json()
    assert (compute["name"], compute["priority"], compute["evictionPolicy"]) == ("myspotvm", "Spot", "Delete")
