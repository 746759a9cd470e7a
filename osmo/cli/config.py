"""Login profiles in `$OSMO_CONFIG` or `~/.config/osmo/config.json`; `OSMO_URL` and `OSMO_TOKEN`
override the profile (CI jobs and containers set them instead of logging in)."""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .errors import usage_error

DEFAULT_PROFILE = "default"


def config_path() -> Path:
    configured = os.environ.get("OSMO_CONFIG")
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(base) / "osmo" / "config.json"


def load() -> dict:
    path = config_path()
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {"current": DEFAULT_PROFILE, "profiles": {}}
    except (OSError, ValueError) as error:
        raise usage_error(f"cannot read {path}: {error}") from error
    if not isinstance(data, dict) or not isinstance(data.get("profiles", {}), dict):
        raise usage_error(f"{path} is not an osmo config file")
    data.setdefault("profiles", {})
    data.setdefault("current", DEFAULT_PROFILE)
    return data


def stored_profile(profile: str | None) -> dict | None:
    """What `save_profile` would replace: the stored profile of that name, if any."""
    return load()["profiles"].get(profile or DEFAULT_PROFILE)


def save_profile(*, url: str, token: str, user: str | None, profile: str | None) -> Path:
    """Store the profile and make it current; the file is private (it holds a token)."""
    data = load()
    name = profile or DEFAULT_PROFILE
    data["profiles"][name] = {"url": url, "token": token, "user": user}
    data["current"] = name
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    # Write beside the target, then rename: a crash never leaves half a file.
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".config-", suffix=".json")
    try:
        os.fchmod(handle, 0o600)
        with os.fdopen(handle, "w") as stream:
            json.dump(data, stream, indent=2)
            stream.write("\n")
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


@dataclass(frozen=True)
class Credentials:
    url: str
    token: str


def credentials(profile: str | None = None) -> Credentials:
    env_url, env_token = os.environ.get("OSMO_URL"), os.environ.get("OSMO_TOKEN")
    stored: dict = {}
    if not (env_url and env_token):
        data = load()
        name = profile or data["current"]
        stored = data["profiles"].get(name) or {}
        if profile and not stored:
            raise usage_error(f"no profile '{profile}' in {config_path()}")
    url, token = env_url or stored.get("url"), env_token or stored.get("token")
    if not url or not token:
        raise usage_error("not logged in: run `osmo login --url URL --token TOKEN` "
                          "(or set OSMO_URL and OSMO_TOKEN)")
    return Credentials(url=url, token=token)
