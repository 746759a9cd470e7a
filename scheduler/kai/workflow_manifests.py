"""The KAI PodGroup and Pod manifests of a workflow (dry runs and `GET .../kai`)."""

from __future__ import annotations

import yaml

from osmo.bounded import SAFE_LOADER
from osmo.text_keyed import TextKeyed
from scheduler.backends.spec import default_spec
from scheduler.batch_reads import once
from scheduler.core.kai_names import POOL_LABEL, WORKFLOW_LABEL, label_value, queue_name_for
from scheduler.kai.podgroups import build_workflow_manifests
from scheduler.kai.selectors import cluster_topology
from workflows.spec import WorkflowSpec, parse_workflow_spec

# Stored specs are kept parsed, by their text (the model is immutable): a workflow submitted
# again and again from one file — a stream of small jobs — is parsed once per process at
# dispatch. At most 256 of them, of at most 1 MiB of text in all (about 26 MB parsed).
PARSED = TextKeyed(entries=256, characters=1024 * 1024, longest=64 * 1024)


def stored_spec(workflow) -> WorkflowSpec:
    """Re-read a stored workflow's spec: the rendered text, so no template runs again, loaded
    as YAML data at once — its size, depth and aliases were bounded when it was admitted, and
    bounding it again was a third of the parse (dispatch parses every workflow it sends)."""
    rendered = bool(workflow.rendered_spec)
    text = workflow.rendered_spec if rendered else workflow.spec
    spec = PARSED.get((text, rendered))
    if spec is None:
        spec = _parse(text, rendered)
        PARSED.put((text, rendered), spec)
    return spec


def _parse(text: str, rendered: bool) -> WorkflowSpec:
    if rendered:
        return parse_workflow_spec(yaml.load(text, Loader=SAFE_LOADER))
    return parse_workflow_spec(text)


def manifests_for(*, spec: WorkflowSpec, workflow_name: str, pool, priority: str) -> list[dict]:
    settings_pool = pool.parent if pool.is_subpool else pool
    backend = default_spec()  # the manifests a workflow stores: the default cluster's names
    groups = build_workflow_manifests(
        spec, workflow_name=workflow_name, namespace=backend.namespace,
        queue=queue_name_for(pool, backend.namespace), priority=priority,
        scheduler_name=backend.scheduler_name,
        platforms=settings_pool.platforms or {},
        labels={WORKFLOW_LABEL: label_value(workflow_name), POOL_LABEL: label_value(pool.name)},
        topology=once("cluster_topology", cluster_topology),
    )
    return [manifest for group in groups for manifest in group.all()]
