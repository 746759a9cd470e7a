"""A bounded, reproducible fuzz of the REST API from its own OpenAPI document: every operation
gets schema-driven requests — ones that fit the schema (positive) and ones that break it
(negative) — as a platform admin and as a pool user without admin rights; no answer may be a
5xx or break the documented response schema. Fixed seed (derandomized) and example budget;
every operation must get at least a floor of requests in each mode, so an operation the fuzz
silently skips fails the test."""

from __future__ import annotations

from collections import Counter

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from osmo.wsgi import application
from tests import factories
from tests.conftest import make_client

EXAMPLES_PER_OPERATION = 10  # per mode and caller: as many requests in all as one mode had
FLOOR_PER_OPERATION = 5  # an operation that takes no input has one request to make
CHECKS = [not_a_server_error, response_schema_conformance]


def _checks(response) -> list:
    """Our YAML answers (`?format=yaml`) are documented as text, a multi-document stream that
    schemathesis would read as one document: for them only the status is checked."""
    content_type = {k.lower(): v for k, v in response.headers.items()}.get("content-type", "")
    content_type = content_type[0] if isinstance(content_type, list) else content_type
    return CHECKS if "yaml" not in content_type else [not_a_server_error]


def _takes_input(operation) -> bool:
    """Whether requests to this operation can differ, and so break its schema."""
    return any(len(getattr(operation, part)) for part in
               ("path_parameters", "query", "headers", "body"))


def _fuzz(auth: dict, mode: GenerationMode) -> tuple[Counter, list[str], dict[str, int]]:
    """Requests sent per operation, the failures, and the floor of each operation fuzzed."""
    schema = schemathesis.openapi.from_wsgi("/api/schema", application)
    sent: Counter = Counter()
    failures: list[str] = []
    operations: dict[str, int] = {}
    for result in schema.get_all_operations():
        operation = result.ok()
        if mode is GenerationMode.NEGATIVE and not _takes_input(operation):
            continue
        operations[operation.label] = FLOOR_PER_OPERATION if _takes_input(operation) else 1

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(max_examples=EXAMPLES_PER_OPERATION, derandomize=True, deadline=None,
                  database=None, suppress_health_check=list(HealthCheck))
        def call(case):
            response = case.call(headers=auth)
            sent[case.operation.label] += 1
            case.validate_response(response, checks=_checks(response))

        try:
            call()
        except (Exception, BaseExceptionGroup) as error:  # noqa: BLE001 - all reported together
            failures.append(f"{mode} {operation.label}: {type(error).__name__}: {error}"[:3000])
    return sent, failures, operations


@pytest.mark.parametrize("caller", ["admin", "pool user"])
@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE],
                         ids=["positive", "negative"])
def test_no_server_errors_and_only_documented_responses(transactional_db, broker_url, caller,
                                                        mode):
    # A workflow of the pool: a list with an item is checked against the item's schema too.
    factories.pending_workflow(factories.pool("team", 16), 1)
    client = (make_client("fuzz-admin", "osmo-admin") if caller == "admin"
              else make_client("fuzz-user", "osmo-team-user"))
    sent, failures, operations = _fuzz(
        {"Authorization": client._credentials["HTTP_AUTHORIZATION"]}, mode)
    print(f"fuzz {mode} as {caller}: {sum(sent.values())} requests over {len(operations)} "
          f"operations")
    assert failures == [], "\n\n".join(failures)
    starved = {label: sent[label] for label, floor in operations.items() if sent[label] < floor}
    assert starved == {}, "operations with fewer requests than their floor"
