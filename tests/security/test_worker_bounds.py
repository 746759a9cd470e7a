"""The hostile requests against a real gunicorn: every one is answered with its 4xx code, no
worker dies, and none makes the worker's peak memory (VmHWM: the most it ever held, however
briefly) grow by 256 MiB or costs it 5 s of CPU."""

from __future__ import annotations

import time

import httpx
import psutil
import pytest

from osmo.accounts import services as accounts
from tests import factories
from tests.security.gunicorn import gunicorn
from tests.security.test_hostile_input import ALIAS_BOMB, chain, job, spec, task

MAX_PEAK_GROWTH = 256 * 1024**2
MAX_CPU_SECONDS = 5.0


def peak_rss(pid: int) -> int:
    """The process's peak resident memory (VmHWM), in bytes: a spike between two samples of
    the current RSS would be missed, the peak is not."""
    status = open(f"/proc/{pid}/status").read()  # noqa: SIM115 - read at once
    kib = next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:"))
    return int(kib) * 1024


@pytest.fixture
def server(transactional_db, tmp_path):
    factories.pool("team", 100)
    user = accounts.user_ensure(username="alice", groups=["osmo-team-user"])
    token = accounts.token_issue(user=user)
    with gunicorn(tmp_path) as (base, pid):
        yield base, {"Authorization": f"Bearer {token}"}, psutil.Process(pid)


HOSTILE = [
    ("nested YAML", "/api/pool/team/workflow", "application/yaml",
     ("[" * 50_000 + "]" * 50_000).encode(), 400, "too_deep"),
    ("alias bomb", "/api/pool/team/workflow", "application/yaml",
     (ALIAS_BOMB + "\n" + spec(task(command="*a8"))).encode(), 400, "too_large"),
    ("nested JSON", "/api/pool/team/workflow", "application/json",
     ('{"file": ' + "[" * 100_000 + "]" * 100_000 + "}").encode(), 400, "too_deep"),
    ("template making 400 MB", "/api/pool/team/workflow?dry_run=true", "application/yaml",
     spec(task().replace("image: ubuntu", "image: \"{{ ('a' * 400000000)|length }}u\""))
     .encode(), 400, "template_too_large"),
    ("template making a huge integer", "/api/pool/team/workflow?dry_run=true",
     "application/yaml",
     spec(task().replace("image: ubuntu", 'image: "{{ (9**(9**7)) % 7 }}u"')).encode(),
     400, "template_too_large"),
    ("template loop", "/api/pool/team/workflow", "application/yaml",
     ("default-values:\n  n: 100000\n" + spec("  {% for i in range(n) %}\n" + task("t{{ i }}")
                                              + "  {% endfor %}")).encode(),
     400, "template_too_large"),
    ("huge parallelism", "/api/pool/team/workload", "application/json",
     httpx.Request("POST", "http://x", json=job(2**31 - 1)).content, 400, "too_many_pods"),
    ("long chain", "/api/kai/podgroups/validate", "application/json",
     httpx.Request("POST", "http://x", json=chain(20_000)).content, 400, "too_many_subgroups"),
    ("5 MB body", "/api/pool/team/workflow", "application/yaml", b"x" * (5 * 1024**2),
     413, "request_too_large"),
]


def test_hostile_requests_stay_within_bounds_on_a_real_server(server):
    base, auth, master = server
    worker = master.children()[0]
    httpx.get(f"{base}/api/workflow", headers=auth)  # the worker has loaded what it serves with
    baseline = peak_rss(worker.pid)
    for what, path, content_type, body, status, code in HOSTILE:
        cpu_before, started = sum(worker.cpu_times()[:2]), time.monotonic()
        response = httpx.post(base + path, content=body, timeout=30,
                              headers={**auth, "Content-Type": content_type})
        cpu = sum(worker.cpu_times()[:2]) - cpu_before
        growth = peak_rss(worker.pid) - baseline
        print(f"{what}: {response.status_code} in {time.monotonic() - started:.3f} s, "
              f"worker CPU {cpu:.3f} s, peak memory +{growth / 1024**2:.0f} MiB")
        assert (response.status_code, response.json()["code"]) == (status, code), what
        assert worker.is_running() and master.children() == [worker], f"{what}: worker died"
        assert cpu < MAX_CPU_SECONDS and growth < MAX_PEAK_GROWTH, what
    assert httpx.get(f"{base}/api/workflow", headers=auth).json()["count"] == 0


def test_what_gunicorn_refuses_itself_is_answered_in_json(server):
    base, auth, _ = server
    too_long = httpx.get(f"{base}/api/workflow?" + "pool=team&" * 1_000, headers=auth)
    assert (too_long.status_code, too_long.headers["content-type"]) == (414, "application/json")
    assert too_long.json()["code"] == "uri_too_long"
    headers = {**auth, **{f"X-Filler-{i}": "x" for i in range(200)}}
    too_many = httpx.get(f"{base}/api/workflow", headers=headers)
    assert (too_many.status_code, too_many.json()["code"]) == (431, "headers_too_large")
    assert httpx.get(f"{base}/api/workflow?pool=team", headers=auth).status_code == 200


def test_its_control_socket_is_in_its_data_folder(server, tmp_path):
    _, _, master = server
    control = tmp_path / "gunicorn.ctl"
    assert control.is_socket()
    assert str(control) in {c.laddr for c in master.net_connections(kind="unix")}
