"""A topologyConstraint as KAI v0.17 reads it: it names the Topology, its levels by node label."""

from scheduler.core.kai_names import DEFAULT_TOPOLOGY_LEVELS, RACK_LABEL, ZONE_LABEL
from scheduler.core.kai_topology import constraint_for_kai

LEVELS = [{"alias": alias, "nodeLabel": label} for alias, label in DEFAULT_TOPOLOGY_LEVELS]


def test_an_alias_becomes_its_node_label_and_the_topology_is_named() -> None:
    assert constraint_for_kai({"requiredTopologyLevel": "rack",
                               "preferredTopologyLevel": "zone"}, LEVELS) == {
        "requiredTopologyLevel": RACK_LABEL, "preferredTopologyLevel": ZONE_LABEL,
        "topology": "osmo-topology"}


def test_a_node_label_stays_and_another_topology_is_left_as_it_is() -> None:
    assert constraint_for_kai({"requiredTopologyLevel": RACK_LABEL}, LEVELS) == {
        "requiredTopologyLevel": RACK_LABEL, "topology": "osmo-topology"}
    other = {"requiredTopologyLevel": "rack", "topology": "theirs"}
    assert constraint_for_kai(other, LEVELS) == other


def test_a_constraint_without_a_level_is_left_as_it_is() -> None:
    assert constraint_for_kai({"topology": "osmo-topology"}, LEVELS) == {
        "topology": "osmo-topology"}
    assert constraint_for_kai({}, LEVELS) == {}
