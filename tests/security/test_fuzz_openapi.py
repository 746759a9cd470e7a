"""A bounded, reproducible fuzz of the REST API from its own OpenAPI document: every operation
gets schema-driven requests, valid and invalid, as a platform admin; no answer may be a 5xx
or break the documented response schema. Fixed seed (derandomized) and example budget."""

from __future__ import annotations

import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from osmo.wsgi import application
from tests import factories
from tests.conftest import make_client

EXAMPLES_PER_OPERATION = 40
CHECKS = [not_a_server_error, response_schema_conformance]


def _checks(response) -> list:
    """Our YAML answers (`?format=yaml`) are documented as text, a multi-document stream that
    schemathesis would read as one document: for them only the status is checked."""
    content_type = {k.lower(): v for k, v in response.headers.items()}.get("content-type", "")
    content_type = content_type[0] if isinstance(content_type, list) else content_type
    return CHECKS if "yaml" not in content_type else [not_a_server_error]


def test_no_server_errors_and_only_documented_responses(transactional_db, broker_url):
    factories.pool("team", 16)
    auth = {"Authorization": make_client("fuzz-admin", "osmo-admin")._credentials[
        "HTTP_AUTHORIZATION"]}
    schema = schemathesis.openapi.from_wsgi("/api/schema", application)
    sent, failures = [0], []
    for result in schema.get_all_operations():
        operation = result.ok()

        @given(case=operation.as_strategy())
        @settings(max_examples=EXAMPLES_PER_OPERATION, derandomize=True, deadline=None,
                  database=None, suppress_health_check=list(HealthCheck))
        def call(case):
            response = case.call(headers=auth)
            sent[0] += 1
            case.validate_response(response, checks=_checks(response))

        try:
            call()
        except (Exception, BaseExceptionGroup) as error:  # noqa: BLE001 - all reported together
            failures.append(f"{operation.label}: {type(error).__name__}: {error}"[:3000])
    print(f"fuzz: {sent[0]} requests over {len(list(schema.get_all_operations()))} operations")
    assert failures == [], "\n\n".join(failures)
    assert sent[0] > 100
