"""_fleet: rows to events through _event's normaliser, ids, the VMs of an event, the query."""

from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _event, _fleet

SUB = "00000000-0000-0000-0000-00000000000a"
EVENT = "C7061BAC-AFDC-4513-B24B-AA5F13A16123"
RG = "/subscriptions/%s/resourceGroups/RG/providers/Microsoft.Compute/" % SUB


def row(scope, resources, **properties):
    raw = {"EventId": EVENT, "EventType": "Reboot", "ResourceType": "VirtualMachine", "Resources": resources,
           "EventStatus": "Scheduled", "NotBefore": "Mon, 11 Apr 2022 22:26:58 GMT", "Description": "",
           "EventSource": "Platform", "DurationInSeconds": 5}
    raw.update(properties)
    return {"id": scope + "/providers/Microsoft.Maintenance/scheduledevents/" + EVENT, "location": "westeurope",
            "zones": None, "resourceGroup": "rg", "subscriptionId": SUB, "properties": raw}


def test_an_event_has_scheduled_event_info_keys_plus_where_it_lives():
    warnings = []
    event = _fleet.event_from_row(row(RG + "virtualMachines/web_0", ["web_0"]), 1, warnings)
    expected = [key for _field, key in _event.EVENT_FIELDS] + [
        "id", "subscription_id", "resource_group", "location", "zones", "scope_id", "virtual_machine_ids"]
    assert list(event) == expected and warnings == []
    assert event["not_before"] == "2022-04-11T22:26:58Z" and event["duration_in_seconds"] == 5


def test_blank_not_before_is_null_and_absent_duration_is_minus_one():
    raw = row(RG + "virtualMachines/web_0", ["web_0"], NotBefore="")
    del raw["properties"]["DurationInSeconds"]
    event = _fleet.event_from_row(raw, 1, [])
    assert event["not_before"] is None and event["duration_in_seconds"] == -1


def test_virtual_machine_ids_for_vm_uniform_flexible_and_availability_set():
    def ids(scope, resources):
        return _fleet.event_from_row(row(scope, resources), 1, [])["virtual_machine_ids"]
    assert ids(RG + "virtualMachines/web_0", ["web_0"]) == [RG + "virtualMachines/web_0"]
    assert ids(RG + "virtualMachineScaleSets/Web", ["web_0", "web_3"]) == [
        RG + "virtualMachineScaleSets/Web/virtualMachines/0", RG + "virtualMachineScaleSets/Web/virtualMachines/3"]
    assert ids(RG + "virtualMachineScaleSets/web", ["web_a1b2"]) == [RG + "virtualMachines/web_a1b2"]
    assert ids(RG + "availabilitySets/as1", ["a", "b"]) == [RG + "virtualMachines/a", RG + "virtualMachines/b"]


def test_ids_are_parsed_without_case_and_others_refused():
    parsed = _fleet.parse_event_id((RG + "VIRTUALMACHINES/web_0/providers/microsoft.maintenance/scheduledEvents/"
                                    + EVENT.lower()))
    assert parsed["scope_id"] == RG + "virtualMachines/web_0" and parsed["subscription_id"] == SUB
    assert _fleet.parse_event_id(RG + "virtualMachines/web_0") is None
    assert _fleet.parse_event_id(None) is None


def test_resource_names_match_without_case():
    rows = [row(RG + "virtualMachines/Web_0", ["Web_0"]), row(RG + "virtualMachines/web_1", ["web_1"])]
    assert [e["resources"] for e in _fleet.events_from_rows(rows, ["WEB_0"])] == [["Web_0"]]


def test_query_has_one_filter_a_line_and_projects_id():
    query = _fleet.build_query(["Scheduled"], ["rg1"], ["Reboot"], ["User"])
    assert query.splitlines() == [
        "maintenanceresources", "| where type =~ 'microsoft.maintenance/scheduledevents'",
        "| where properties.EventStatus in~ ('Scheduled')", "| where resourceGroup in~ ('rg1')",
        "| where properties.EventType in~ ('Reboot')", "| where properties.EventSource in~ ('User')",
        _fleet.PROJECTION]
