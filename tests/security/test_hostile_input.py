"""Hostile input: each request answers with its 4xx code in the contract's shape, after
bounded work, and changes nothing.

Work is counted, not timed (tests/work.py): a ten times larger attack must not cost ten times
the lines of Python (or, where it grows with the body, a hundred times)."""

from __future__ import annotations

import pytest

from tests.security.conftest import refused, stored
from tests.work import cpu_run, lines_run


def alias_bomb(levels: int) -> str:
    """YAML whose last anchor, ``*a{levels - 1}``, expands to 9**levels scalars."""
    return "\n".join([f"a0: &a0 [{', '.join(['x'] * 9)}]"]
                     + [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]"
                        for i in range(1, levels)])


ALIAS_BOMB = alias_bomb(9)


def spec(tasks: str, **extra) -> str:
    lines = ["workflow:", "  name: hostile", "  tasks:", tasks]
    return "\n".join(lines) + "\n" + "".join(f"{k}: {v}\n" for k, v in extra.items())


def task(name="t", replicas=None, gpu=1, command='["sleep", "1"]') -> str:
    text = (f"  - name: {name}\n    image: ubuntu\n    command: {command}\n"
            f"    resource: default\n")
    return text + (f"    replicas: {replicas}\n" if replicas is not None else "")


def submit(client, text: str, content_type: str = "application/yaml"):
    return client.generic("POST", "/api/pool/team/workflow", text.encode(), content_type)


# --- denial of service by one request ---------------------------------------------------------

def test_deeply_nested_yaml_is_refused_at_once(user):
    before = stored()
    work = {}
    for depth in (5_000, 50_000):
        response, work[depth] = lines_run(submit, user, "[" * depth + "]" * depth)
        refused(response, 400, "too_deep")
    assert work[50_000] < 2 * work[5_000] and stored() == before


def test_a_yaml_alias_bomb_in_a_command_is_refused(user):
    before = stored()
    work = {}
    for levels in (6, 9):  # 9**6 and 9**9 scalars
        text = alias_bomb(levels) + "\n" + spec(task(command=f"*a{levels - 1}"))
        response, work[levels] = lines_run(submit, user, text)
        body = refused(response, 400, "too_large")
        assert len(response.content) < 2_000  # the error never renders the expanded list
        assert "aliases expanded" in body["detail"]
    assert work[9] < 2 * work[6] and stored() == before


def test_a_yaml_alias_bomb_in_a_workload_is_refused(user):
    before = stored()
    text = ALIAS_BOMB + "\napiVersion: batch/v1\nkind: Job\n"
    response = user.generic("POST", "/api/pool/team/workload", text.encode(), "application/yaml")
    refused(response, 400, "too_large")
    assert stored() == before


def test_deeply_nested_json_is_refused(user):
    before = stored()
    body = '{"file": ' + "[" * 100_000 + "]" * 100_000 + "}"
    response = user.generic("POST", "/api/pool/team/workflow", body.encode(), "application/json")
    refused(response, 400, "too_deep")
    assert stored() == before


def test_too_many_tasks_groups_and_replicas(user):
    before = stored()
    refused(submit(user, spec(task(replicas=1_001))), 400, "too_many_replicas")
    refused(submit(user, spec("".join(task(f"t{i}", replicas=100) for i in range(11)))),
            400, "too_many_tasks")
    groups = "\n".join(f"  - name: g{i}\n    tasks:\n  " + task().replace("\n  ", "\n    ")
                       for i in range(101))
    response = submit(user, f"workflow:\n  name: many\n  groups:\n{groups}\n")
    refused(response, 400, "too_many_groups")
    assert stored() == before


def test_a_template_that_loops_too_long_is_refused(user):
    before = stored()
    work = {}
    for n in (100_000, 1_000_000):
        text = (f"default-values:\n  n: {n}\n"
                + spec("  {% for i in range(n) %}\n" + task("t{{ i }}") + "  {% endfor %}"))
        response, work[n] = lines_run(submit, user, text)
        refused(response, 400, "template_too_large")
    assert work[1_000_000] < 2 * work[100_000] and stored() == before


# What a template may compute, not only what it outputs (the rest: tests/unit/workflow_spec/
# test_template_bounds.py).
COSTLY_TEMPLATES = {
    "400 MB string": "{{ ('a' * 400000000)|length }}u",
    "huge power": "{{ (9**(9**7)) % 7 }}u",
}


@pytest.mark.parametrize("expression", COSTLY_TEMPLATES.values(), ids=COSTLY_TEMPLATES.keys())
@pytest.mark.parametrize("query", ["?dry_run=true", ""])
def test_a_template_that_would_compute_too_much_is_refused_at_once(user, expression, query):
    submit(user, spec(task("first")))  # a counter row to see unchanged
    before = stored()
    text = spec(task().replace("image: ubuntu", f'image: "{expression}"'))
    # The cost would be inside C (one multiplication or power), where no line is counted.
    response, seconds = cpu_run(user.generic, "POST", f"/api/pool/team/workflow{query}",
                                text.encode(), "application/yaml")
    body = refused(response, 400, "template_too_large")
    assert body["errors"]["workflow"][0].startswith(("template repeats a value to more than",
                                                     "template makes an integer of more than"))
    assert seconds < 1 and stored() == before


def job(parallelism: int) -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "big"},
            "spec": {"parallelism": parallelism, "template": {"spec": {"containers": [
                {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 0}}}]}}}}


def test_a_job_with_huge_parallelism_is_refused_before_it_is_built(user):
    before = stored()
    work = {}
    for parallelism in (1_001, 2**31 - 1):
        response, work[parallelism] = lines_run(
            user.post, "/api/pool/team/workload", job(parallelism), format="json")
        refused(response, 400, "too_many_pods")
    refused(user.post("/api/pool/team/workload", job(2**31), format="json"), 400,
            "invalid_spec")
    assert work[2**31 - 1] < 2 * work[1_001] and stored() == before


def test_a_workload_of_too_many_pods_is_refused(user):
    before = stored()
    pods = [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}"},
             "spec": {"containers": [{"name": "c", "image": "x"}]}} for i in range(1_001)]
    response = user.post("/api/pool/team/workload",
                         {"apiVersion": "v1", "kind": "List", "items": pods}, format="json")
    refused(response, 400, "too_many_pods")
    assert stored() == before


def chain(length: int) -> dict:
    subgroups = [{"name": f"s{i}", **({"parent": f"s{i - 1}"} if i else {}),
                  **({"minSubGroup": 1} if i < length - 1 else {"minMember": 1})}
                 for i in range(length)]
    return {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
            "metadata": {"name": "chain"}, "spec": {"queue": "q", "minSubGroup": 1,
                                                   "subGroups": subgroups}}


def test_a_long_subgroup_chain_at_the_unauthenticated_webhook(client, db):
    """Refused by its count: the work grows with the body read, never with the chain walked
    (a walk up the chain from every subgroup would cost 100 times more for 10 times more)."""
    work = {}
    for length in (2_000, 20_000):
        review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                  "request": {"uid": "u-1", "operation": "CREATE",
                              "kind": {"group": "scheduling.run.ai", "version": "v2alpha2",
                                       "kind": "PodGroup"}, "object": chain(length)}}
        response, work[length] = lines_run(
            client.post, "/webhooks/podgroups/validate", review, content_type="application/json")
        answer = response.json()["response"]
        assert (response.status_code, answer["allowed"]) == (200, False)
        assert f"{length} subGroups; at most 256" in answer["status"]["message"]
    assert work[20_000] < 20 * work[2_000]


def test_a_chain_within_the_limit_validates_in_linear_time(user):
    """Four times the chain, at most five times the work (a quadratic walk: about ten)."""
    work = {}
    for length in (64, 64, 256):  # the first request pays for what runs only once
        response, work[length] = lines_run(
            user.post, "/api/kai/podgroups/validate", chain(length), format="json")
        assert (response.status_code, response.json()["allowed"]) == (200, True)
    assert work[256] < 5 * work[64]
    refused(user.post("/api/kai/podgroups/validate", chain(257), format="json"), 400,
            "too_many_subgroups")


@pytest.mark.parametrize("content_type", ["application/json", "application/yaml"])
def test_one_body_limit_for_every_content_type(user, settings, content_type):
    settings.OSMO_MAX_BODY_BYTES = 1_000_000
    before = stored()
    body = b'{"file": "' + b"x" * 1_000_001 + b'"}'
    response = user.generic("POST", "/api/pool/team/workflow", body, content_type)
    refused(response, 413, "request_too_large")
    assert stored() == before


# --- integers, NUL and control characters -----------------------------------------------------

BIG = 2**31


@pytest.mark.parametrize("path,body", [
    ("/api/configs/pool/team", {"quota_gpus": BIG}),
    ("/api/configs/pool/team", {"quota_gpus": 10, "limit_gpus": BIG}),
    ("/api/configs/pool/team", {"quota_gpus": 10, "weight": BIG}),
    ("/api/configs/pool/team", {"quota_gpus": 10, "priority": BIG}),
])
def test_integers_beyond_the_columns_are_400(admin, team, path, body):
    before = stored()
    response = admin.put(path, body, format="json")
    assert response.status_code == 400 and response.json()["code"].startswith("invalid_")
    assert stored() == before


def test_node_figures_beyond_the_columns_are_400(admin):
    before = stored()
    for body in ({"name": "n", "gpus": BIG}, {"name": "n", "gpus": 8, "memory": "1e30Gi"},
                 {"name": "n", "gpus": 8, "cpu": str(2**70)}):
        response = admin.post("/api/cluster/nodes", body, format="json")
        assert response.status_code == 400, (body, response.json())
    assert stored() == before


def test_task_figures_beyond_the_columns_are_400(user):
    before = stored()
    for resources in (f"gpu: {BIG}", "gpu: 1\n      cpu: 99999999999999999", "memory: 1e30Gi"):
        text = spec(task()) + f"  resources:\n    default:\n      {resources}\n"
        response = submit(user, text)
        assert response.status_code == 400, (resources, response.json())
    assert stored() == before


def test_an_exit_code_beyond_the_column_is_400(team):
    from tests import factories
    from tests.conftest import make_client

    workflow = factories.running_workflow(team, 1)
    backend = make_client("listener", "osmo-backend")
    response = backend.post(f"/api/workflow/{workflow.name}/task/task-0/status",
                            {"status": "FAILED", "exit_code": BIG}, format="json")
    refused(response, 400, "invalid_request")
    assert workflow.tasks.get().status == "RUNNING"


def test_huge_page_sizes_and_offsets_are_bounded(user, team):
    from tests import factories

    factories.pending_workflow(team, 1)
    pages = {query: user.get(f"/api/workflow?{query}") for query in (
        "limit=1e20", "limit=100000000000000000000", "offset=100000000000000000000")}
    assert {query: (r.status_code, len(r.json()["results"])) for query, r in pages.items()} == {
        "limit=1e20": (200, 1), "limit=100000000000000000000": (200, 1),
        "offset=100000000000000000000": (200, 0)}


def test_nul_in_a_path_query_or_body_is_400(user, admin, team):
    before = stored()
    refused(user.get("/api/workflow/bad%00name"), 400, "invalid_request")
    refused(user.get("/api/workflow?pool=te%00am"), 400, "invalid_request")
    refused(admin.put("/api/configs/pool/team", {"quota_gpus": 10, "description": "a\x00b"},
                      format="json"), 400, "invalid_request")
    response = user.post("/api/pool/team/workload",
                         {"apiVersion": "batch/v1", "kind": "Job",
                          "metadata": {"name": "x\u0000y"}}, format="json")
    refused(response, 400, "invalid_request")
    assert stored() == before


def test_groups_and_tasks_are_counted_before_the_yaml_is_built(user):
    before = stored()
    work = {}
    for count in (1_000, 10_000):
        groups = "".join(f"  - name: g{i}\n    tasks:\n    - {{name: t, image: x, command: [x]}}\n"
                         for i in range(count))
        response, work[count] = lines_run(
            submit, user, f"workflow:\n  name: many\n  groups:\n{groups}")
        body = refused(response, 400, "too_many_groups")
        assert body["errors"] == {"workflow.groups": ["more than 100 groups"]}  # the 101st
    tasks = "".join(f"  - {{name: t{i}, image: x, command: [x]}}\n" for i in range(5_000))
    body = refused(submit(user, f"workflow:\n  name: many\n  tasks:\n{tasks}"), 400,
                   "too_many_tasks")
    assert body["errors"] == {"workflow": ["more than 1000 tasks"]}
    assert work[10_000] < 2 * work[1_000] and stored() == before


# --- query strings and bodies that say nothing ------------------------------------------------

@pytest.mark.parametrize("query", ["/api/workflow?all_pools=", "/api/workflow?user=",
                                   "/api/workflow?users=", "/api/workflow?pool=",
                                   "/api/workflow?all_users=", "/api/pool_quota?all_pools=",
                                   "/api/configs/pool/team/history?limit=\uff18"])
def test_a_parameter_given_empty_or_in_other_digits_is_refused(user, query):
    body = refused(user.get(query), 400, "invalid_request")
    assert set(body["errors"]) == {query.split("?")[1].split("=")[0]}


def test_the_same_parameters_given_a_value_still_filter(user):
    from tests import factories

    factories.pending_workflow(factories.pool("other", 10), 1)
    assert user.get("/api/workflow?all_pools=true&user=alice").json()["count"] == 0
    assert user.get("/api/pool_quota?all_pools=true").status_code == 200
    page = user.get("/api/workflow?limit=\uff18").json()  # not a number: the default page
    assert (page["count"], page["next"]) == (0, None)


def test_a_bodyless_podgroup_check_is_refused(user):
    body = refused(user.post("/api/kai/podgroups/validate"), 400, "invalid_request")
    assert list(body["errors"]) == ["podgroup"]
    refused(user.post("/api/kai/podgroups/validate", {}, format="json"), 400, "invalid_request")


@pytest.mark.parametrize("path", ["/api/health", "/api/version", "/api/schema", "/api/docs"])
def test_public_endpoints_never_read_credentials(db, broker_url, path):
    from rest_framework.test import APIClient

    from tests.conftest import make_client

    answers = {}
    for who, client in (("no token", APIClient()), ("a token", make_client("alice")),
                        ("a bad token", APIClient()), ("a malformed header", APIClient())):
        if who == "a bad token":
            client.credentials(HTTP_AUTHORIZATION="Bearer osmo_not-a-token")
        if who == "a malformed header":
            client.credentials(HTTP_AUTHORIZATION="Bearer two words")
        answers[who] = client.get(path).status_code
    assert answers == dict.fromkeys(answers, 200)
