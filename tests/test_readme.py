"""The README's first five minutes, typed as they are into a fresh shell (bash with next to no
environment) against a real `osmo standalone --demo`: every command must work and say what the
README says it shows. Only the address and the data folder differ (a free port and a throwaway
folder in place of 8000 and the checkout's `.osmo/`)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from osmo.embedded import free_port

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


def first_five_minutes() -> list[str]:
    """The shell blocks of the README's section "The first five minutes", in order."""
    text = README.read_text()
    section = text[text.index("## The first five minutes"):]
    section = section[:section.index("\n## ", 1)]
    blocks = re.findall(r"^( *)```bash\n(.*?)^\1```", section, flags=re.S | re.M)
    return ["".join(line.removeprefix(indent) for line in body.splitlines(keepends=True))
            for indent, body in blocks]


def test_the_readme_has_the_two_commands_and_the_five_steps():
    text = README.read_text()
    assert "make standalone" in text and "make test" in text
    blocks = first_five_minutes()
    assert len(blocks) == 4  # the dashboard step has no command
    # Nothing a fresh shell lacks: the CLI by its path, the token from its file.
    commands = "\n".join(blocks)
    assert re.search(r"(^|[\s$(])osmo ", commands) is None, "a bare `osmo` is not on PATH"
    assert commands.index("export TOKEN=") < commands.index("$TOKEN")


@pytest.fixture
def standalone():
    work = Path(tempfile.mkdtemp(prefix="osmo-readme-test-"))
    data, port = work / "data", free_port()
    env = {k: v for k, v in os.environ.items()
           if k not in {"DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "SECRET_KEY"}}
    console = work / "console.txt"
    with console.open("w") as stream:
        process = subprocess.Popen(
            [str(ROOT / ".venv" / "bin" / "osmo"), "standalone", "--demo", "--port", str(port),
             "--data-dir", str(data), "--web-workers", "2"],
            stdout=stream, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + 150
        while "(the admin token" not in console.read_text():
            assert process.poll() is None and time.monotonic() < deadline, console.read_text()
            time.sleep(0.3)
        yield work, data, port
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(60)
        shutil.rmtree(work, ignore_errors=True)


@pytest.mark.timeout(400)
def test_the_first_five_minutes_work_typed_into_a_fresh_shell(standalone):
    if not (ROOT / ".venv" / "bin" / "osmo").exists():
        pytest.skip("the README's commands need the checkout's .venv (make install)")
    work, data, port = standalone
    # The newcomer's shell: in the checkout, nothing exported but the basics. (A copy of the
    # checkout's entry points: the steps write hello.yaml where they run.)
    shell_dir = work / "checkout"
    shell_dir.mkdir()
    (shell_dir / ".venv").symlink_to(ROOT / ".venv")
    (shell_dir / "manage.py").symlink_to(ROOT / "manage.py")
    script = "\n".join(first_five_minutes())
    script = script.replace("http://127.0.0.1:8000", f"http://127.0.0.1:{port}")
    script = script.replace(".osmo/", f"{data}/")
    home = work / "home"
    home.mkdir()
    done = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", script], cwd=shell_dir,
        env={"HOME": str(home), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8",
             # where `manage.py` finds the data folder the README's `.osmo/` stands for
             "OSMO_DATA_DIR": str(data)},
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    assert f"Logged in to http://127.0.0.1:{port} as admin" in out
    assert "Logged in to" in out and "as ml-user" in out
    assert re.search(r"^team\s", out, flags=re.M)
    assert "Submitted hello-1 in pool team--a" in out
    assert "Submitted hello-2" not in out  # 16 GPUs on 8-GPU nodes: refused, with the reason
    assert "needs 16 GPUs, but the largest node" in done.stdout + done.stderr
    assert "sleep 30" in out  # the log of hello-1
    # ml-user's profile sees the team pools only; the admin's, kept beside it, every pool.
    mine, admins = out.split("as ml-user")[1].split("\nPool ")[1:3]
    assert "team--a" in mine and "inference" not in mine and "inference" in admins
    # The second login went under its own profile: nothing was replaced, nothing warned of.
    assert "warning" not in done.stderr
    assert (shell_dir / "hello.yaml").exists() and (shell_dir / "hello16.yaml").exists()
