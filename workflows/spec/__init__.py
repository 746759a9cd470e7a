"""OSMO workflow spec v2: templating, parsing, validation, GPU accounting (no Django).

Entry point: :func:`parse_workflow_spec`; invalid specs raise :class:`SpecError`
(``errors``: field path → messages). The scheduling extensions are described in EXTENSIONS.md.
"""

from workflows.spec.errors import SpecError
from workflows.spec.model import (
    FileSpec,
    GroupSpec,
    ResourceSpec,
    SubGroupSpec,
    TaskSpec,
    TopologyRequirement,
    TopologySpec,
    WorkflowSpec,
)
from workflows.spec.parser import parse_workflow_spec
from workflows.spec.templating import RenderResult, render_template

__all__ = [
    "FileSpec",
    "GroupSpec",
    "RenderResult",
    "ResourceSpec",
    "SpecError",
    "SubGroupSpec",
    "TaskSpec",
    "TopologyRequirement",
    "TopologySpec",
    "WorkflowSpec",
    "parse_workflow_spec",
    "render_template",
]
