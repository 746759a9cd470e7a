"""The cluster page and `dashboard.queries.cluster_overview`: nodes by zone and rack with
GPUs held per priority, the queues' shares and the pending gangs with their reasons."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from dashboard import presenters, queries
from osmo.accounts.roles import Roles
from scheduler import services as scheduler_services
from scheduler.models import Node, SchedulerCycle
from tests import factories
from tests.dashboard.conftest import session_client

pytestmark = pytest.mark.django_db

ZONE, RACK = presenters.ZONE_LABEL, presenters.RACK_LABEL

QUEUES = [{"name": "osmo-pool-osmo-team", "parent": "osmo-default-osmo", "deserved_gpus": 100,
           "fair_share_gpus": 60, "allocated_gpus": 64, "allocated_non_preemptible_gpus": 50,
           "requested_gpus": 80}]


def node(name, gpus, zone=None, rack=None):
    labels = {k: v for k, v in ((ZONE, zone), (RACK, rack)) if v}
    scheduler_services.node_register(name=name, gpus=gpus, cpu_millis=64000,
                                     memory_bytes=2**40, labels=labels)


def last_cycle(pending_gangs):
    """What the scheduler records after a cycle (test data, as factories write workflows)."""
    SchedulerCycle.objects.update_or_create(pk=1, defaults={
        "at": datetime(2026, 1, 1, tzinfo=UTC), "duration_ms": 12.0, "bound": 3, "evicted": 1,
        "pending": len(pending_gangs), "queues": QUEUES, "pending_gangs": pending_gangs})


def test_no_nodes_registered(db):
    viewer = session_client("viewer", "osmo-team-user")
    assert queries.cluster_overview() == presenters.ClusterOverview()
    html = viewer.get("/cluster/").content.decode()
    assert "No nodes registered." in html
    assert "the scheduler has not run a cycle" in html
    fragment = viewer.get("/cluster/fragment/").content.decode()
    assert "No nodes registered." in fragment and "<html" not in fragment


def test_overview_groups_nodes_and_usage(db):
    team = factories.pool("team", 100)
    factories.running_workflow(team, 6, "HIGH", tasks=2)  # node-0: 3 HIGH, node-1: 3 HIGH
    factories.running_workflow(team, 2, "LOW")  # node-0: 2 LOW
    factories.pending_workflow(team, 4)  # holds nothing
    node("node-1", 8, "z1", "r2")
    node("node-0", 8, "z1", "r1")
    node("node-9", 4)
    node("node-5", 8, "z1", "r1")
    overview = queries.cluster_overview()
    layout = [(z.name, [(r.name, [n.name for n in r.nodes]) for r in z.racks])
              for z in overview.zones]
    assert layout == [("z1", [("r1", ["node-0", "node-5"]), ("r2", ["node-1"])]),
                      ("(none)", [("(none)", ["node-9"])])]
    by_name = {n.name: n for n in overview.nodes}
    assert by_name["node-0"].used_by_priority == {"HIGH": 3, "LOW": 2}
    assert (by_name["node-0"].free_gpus, by_name["node-1"].free_gpus) == (3, 5)
    assert (overview.gpus, overview.free_gpus) == (28, 20)
    assert overview.used_by_priority == {"HIGH": 6, "NORMAL": 0, "LOW": 2}


def test_pending_gangs_follow_visibility(db):
    team, other = factories.pool("team", 100), factories.pool("other", 10)
    mine = factories.pending_workflow(team, 16)
    theirs = factories.pending_workflow(other, 16)
    reasons = [{"code": "not_enough_gpus_in_rack", "message": "No rack has 16 free GPUs."}]
    last_cycle([{"podgroup": f"{w.name}-group", "workflow": w.name, "group": "group",
                 "queue": "q", "reasons": reasons} for w in (mine, theirs)])
    viewer = session_client("viewer", "osmo-team-user")
    overview = queries.cluster_overview(roles=Roles(
        "viewer", False, False, (), ("team",)), user=viewer.user)
    assert [g.workflow for g in overview.pending] == [mine.name]
    assert [g.workflow for g in queries.cluster_overview().pending] == [mine.name, theirs.name]
    assert overview.queues == [presenters.QueueRow("osmo-pool-osmo-team", "osmo-default-osmo",
                                                   100, 60, 64, 50, 80)]


def test_cluster_page_renders_everything(db, django_assert_max_num_queries):
    team = factories.pool("team", 100)
    train = factories.pending_workflow(team, 16)
    factories.running_workflow(team, 6, "HIGH", tasks=2)
    node("node-0", 8, "z1", "r1")
    node("node-1", 8, "z1", "r2")
    scheduler_services.node_set_schedulable(
        node=Node.objects.get(name="node-1"), schedulable=False)
    last_cycle([{"podgroup": "train-group", "workflow": train.name, "group": "group",
                 "queue": "q", "reasons": [{"code": "not_enough_gpus_in_rack",
                                            "message": "No rack has 16 free GPUs (largest: 8)."}]}])
    viewer = session_client("viewer", "osmo-team-user")
    with django_assert_max_num_queries(11):  # the charts end with the pool tree's use now
        html = viewer.get("/cluster/?tables=on").content.decode()  # node tables on demand
    flat = " ".join(re.sub(r"<[^>]+>", " ", html).split())
    assert "2 nodes, 16 GPUs, 10 free. Held: 6 HIGH, 0 NORMAL, 0 LOW." in flat
    assert "Zone z1 · 16 GPUs, 10 free" in flat and "Rack r2 · 8 GPUs, 5 free" in flat
    assert "node-1 default 8 5 3 0 0 cordoned" in flat
    assert 'aria-label="3 of 8 GPUs used (3 HIGH)"' in html
    assert "osmo-pool-osmo-team osmo-default-osmo 100 60 64 (above fair share) 50 80" in flat
    assert (f"train-group (workflow {train.name}) not_enough_gpus_in_rack No rack has 16 free "
            f"GPUs (largest: 8)." in flat)
    assert ("Last scheduling cycle: 1 Jan 2026, 00:00:00 UTC , 12.0 ms, 3 bound, 1 evicted, "
            "1 pending." in flat)
    assert ('<time datetime="2026-01-01T00:00:00Z" title="2026-01-01T00:00:00Z">1 Jan 2026, '
            '00:00:00 UTC</time>') in html


def test_the_heat_map_filters_and_usage_charts(db):
    from django.utils import timezone

    from pools import services as pool_services

    team = factories.pool("team", 16)
    factories.pool("other", 8)
    factories.running_workflow(team, 6, "HIGH", tasks=2)
    for index, (zone, rack) in enumerate([("z1", "r1"), ("z1", "r2"), ("z2", "r3")]):
        node(f"node-{index}", 8, zone, rack)
    scheduler_services.node_set_schedulable(node=Node.objects.get(name="node-2"),
                                            schedulable=False)
    now = timezone.now()
    for minutes in (30, 20, 10):
        pool_services.usage_samples_record(now=now - timezone.timedelta(minutes=minutes),
                                           retention_hours=48)
    viewer = session_client("viewer", "osmo-team-user")
    html = viewer.get("/cluster/").content.decode()
    cells = re.findall(r'class="cell (heat-\d)( cordoned)?" data-node="([^"]+)"', html)
    assert cells == [("heat-2", "", "node-0"), ("heat-2", "", "node-1"),
                     ("heat-0", " cordoned", "node-2")]
    assert 'title="node-0: 3 of 8 GPUs used (3 HIGH)"' in html
    assert '<table class="nodes">' not in html  # tables only on demand
    charts = re.findall(r'<figure class="usage-chart" data-pool="([^"]+)"', html)
    assert charts == ["team"]  # not the other tenant's pool
    assert ("(3 samples and the current figures): now 6 GPUs used at HIGH/NORMAL and 0 at LOW, "
            "quota 16; peak 6 GPUs in use.") in html

    page = viewer.get("/cluster/?state=cordoned&tables=on").content.decode()
    assert re.findall(r'data-node="([^"]+)"', page) == ["node-2", "node-2"]  # cell + row
    page = viewer.get("/cluster/?zone=z1&node=-1").content.decode()
    assert re.findall(r'class="cell[^"]*" data-node="([^"]+)"', page) == ["node-1"]
    assert viewer.get("/cluster/?state=melting").status_code == 200  # refused filter: all


def test_a_usage_chart_ends_with_the_use_now():
    start = datetime(2026, 1, 1, 12, tzinfo=UTC)
    sample = {"top": "demo", "at": start, "used": 0, "low": 0, "quota": 100}
    now = {"top": "demo", "at": start.replace(minute=1), "used": 16, "low": 4, "quota": 100}
    # Nothing ran when the one sample was taken; 16 GPUs (and 4 at LOW) run now.
    (chart,) = presenters.usage_charts([sample], [now])
    assert (chart.pool, chart.scale, chart.peak, chart.now_used, chart.now_low) == (
        "demo", 100, 20, 16, 4)
    assert chart.used == "M0.0,120 L0.0,120.0 L600.0,100.8 L600.0,120 Z"
    assert chart.total == "M0.0,120 L0.0,120.0 L600.0,96.0 L600.0,120 Z"
    assert chart.quota == "M0.0,0.0 L600.0,0.0"
    # No sample yet (a fresh start): the use now spans the box; one GPU of 1,000 still shows.
    (lone,) = presenters.usage_charts([], [{**now, "used": 1, "low": 0, "quota": 1000}])
    assert lone.used == "M0.0,120 L0.0,118.0 L600.0,118.0 L600.0,120 Z"
    assert (lone.scale, lone.peak) == (1000, 1)


@pytest.mark.parametrize(("zone", "rack", "label"), [
    ("zone-0", "zone-0-rack-3", "rack-3"),  # the demo's racks: the zone's name is repeated
    ("z1", "r1", "r1"),
    ("zone-1", "zone-10-rack-0", "zone-10-rack-0"),  # another zone's prefix: kept whole
    ("zone-1", "zone-1", "zone-1"),
    (presenters.NO_LABEL, presenters.NO_LABEL, presenters.NO_LABEL),
])
def test_a_rack_is_labelled_by_what_tells_it_apart(zone, rack, label):
    assert presenters.rack_label(zone, rack) == label


def test_the_heat_map_draws_low_held_gpus_apart_with_a_legend(db):
    from workflows.models import Task

    team = factories.pool("team", 16)
    for index in range(3):
        node(f"node-{index}", 8, "z1", "r1")
    factories.running_workflow(team, 8, "LOW")  # all of node-0, preemptible
    mixed = factories.running_workflow(team, 4, "HIGH", tasks=2)
    Task.objects.filter(workflow=mixed).update(node_name="node-1")
    low = factories.running_workflow(team, 2, "LOW")
    Task.objects.filter(workflow=low).update(node_name="node-1")
    viewer = session_client("viewer", "osmo-team-user")
    html = viewer.get("/cluster/").content.decode()
    cells = re.findall(r'<a class="cell ([^"]+)" data-node="([^"]+)"( style="[^"]*")?', html)
    assert cells == [("heat-0 has-low", "node-0", ' style="--low-share: 100.00%"'),
                     ("heat-2 has-low", "node-1", ' style="--low-share: 25.00%"'),
                     ("heat-0", "node-2", "")]
    assert 'title="node-0: 8 of 8 GPUs used (8 LOW)"' in html
    legend = re.search(r'<ul class="legend heat-legend"[^>]*>(.*?)</ul>', html, re.S).group(1)
    assert re.sub(r"<[^>]+>", "", legend).split("\n") == [
        "", "     Held at HIGH/NORMAL: the darker, the more of the node's GPUs",
        "     Held at LOW (preemptible, HIGH/NORMAL work can take it back): the striped part, "
        "from the bottom", "     Cordoned", "  "]
