"""Every status the API answers is in its OpenAPI document: schemathesis sends each operation
generated requests (valid and not) and checks each answer's status against the operation's
documented ones (`status_code_conformance`). A few examples per operation and mode keep it
short (about a minute)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, Phase, given
from hypothesis import settings as examples
from hypothesis.errors import Unsatisfiable

pytestmark = pytest.mark.django_db(transaction=True)

EXAMPLES = 10


def test_every_answer_has_a_documented_status(transactional_db, broker_url, settings):
    import schemathesis
    from schemathesis import GenerationMode
    from schemathesis.specs.openapi.checks import status_code_conformance

    from osmo.wsgi import application
    from tests.conftest import make_client

    settings.OSMO_LOG_FOLLOW_SECONDS = 1  # a followed log ends soon
    admin = make_client("schema-admin", "osmo-admin")
    auth = {"Authorization": admin._credentials["HTTP_AUTHORIZATION"]}
    schema = schemathesis.openapi.from_wsgi("/api/schema", application)
    failures: dict[str, str] = {}
    operations = 0

    def checker(operation, mode):
        @given(case=operation.as_strategy(generation_mode=mode))
        @examples(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
                  phases=[Phase.generate], suppress_health_check=list(HealthCheck))
        def check(case):
            response = case.call(headers=auth)
            try:
                case.validate_response(response, checks=[status_code_conformance])
            except (AssertionError, BaseExceptionGroup) as error:
                failures.setdefault(operation.label, f"{response.status_code} "
                                    f"{response.text[:200]} :: {error}"[:600])
        return check

    for result in schema.get_all_operations():
        operations += 1
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            try:
                checker(result.ok(), mode)()
            except Unsatisfiable:  # nothing to make invalid (no parameters, no body)
                assert mode is GenerationMode.NEGATIVE
    assert operations > 50
    assert failures == {}, "\n\n".join(f"{k}: {v}" for k, v in failures.items())
