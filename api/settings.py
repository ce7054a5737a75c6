"""The coordinator's settings, read from the environment once at start.

Plain pydantic rather than pydantic-settings: four variables do not justify a dependency, and
`from_env` keeps tests free to build `Settings` directly. Secrets are `SecretStr` and the Redis
URL, which may carry Redis's password, is left out of the repr, so printing or logging the
settings never shows them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, Field, SecretStr

from fleet.control.deliveries import MAX_AGE

ENV = {
    "redis_url": "GITFLEET_REDIS_URL",
    "admin_token": "GITFLEET_ADMIN_TOKEN",
    "secret_key": "GITFLEET_SECRET_KEY",
    "webhook_secret": "GITFLEET_WEBHOOK_SECRET",
    "insecure_git_hosts": "GITFLEET_INSECURE_GIT_HOSTS",
    "notify_allow_hosts": "GITFLEET_NOTIFY_ALLOW_HOSTS",
    "admin_token_file": "GITFLEET_ADMIN_TOKEN_FILE",
    "body_limit": "GITFLEET_BODY_LIMIT",
    "webhook_body_limit": "GITFLEET_WEBHOOK_BODY_LIMIT",
    "import_body_limit": "GITFLEET_IMPORT_BODY_LIMIT",
    "webhook_max_age_s": "GITFLEET_WEBHOOK_MAX_AGE",
}
MiB = 1 << 20


def default_admin_token_file() -> Path:
    """Where a generated bootstrap admin token is written: the user's state directory."""
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "gitfleet" / "admin-token"


class Settings(BaseModel):
    redis_url: str = Field(default="redis://127.0.0.1:6379/0", repr=False)  # may hold a password
    admin_token: SecretStr | None = None
    secret_key: SecretStr | None = None
    webhook_secret: SecretStr | None = None
    diff_timeout_s: float = Field(default=30.0, gt=0)
    prefix: str = "gitfleet"
    insecure_git_hosts: str = ""  # comma-separated hosts apps may fetch over plain http
    scheduler: bool = False  # the `gitfleet api` process turns it on (see from_env)
    notifications: bool = False  # post queued notifications (on with the scheduler, from_env)
    notify_allow_hosts: str = ""  # hosts notifications may reach over http or inside addresses
    insecure_dev: bool = False  # `gitfleet api --insecure-dev`: may run without secret_key
    require_impersonation: bool = False  # GITFLEET_REQUIRE_IMPERSONATION (`fleet.control.policy`)
    in_cluster: bool = False  # GITFLEET_IN_CLUSTER: register `in-cluster` (`api.incluster`)
    freeze_gc: bool = False  # `gitfleet api`: load the registry, then freeze it (`api.app`)
    admin_token_file: Path = Field(default_factory=default_admin_token_file)  # mode 0600
    body_limit: int = Field(default=MiB, ge=1024)  # bytes of a request body (`api.gate`)
    webhook_body_limit: int = Field(default=5 * MiB, ge=1024)  # bytes of a webhook delivery
    import_body_limit: int = Field(default=256 * MiB, ge=1024)  # a registry import (admin)
    webhook_max_age_s: float = Field(default=MAX_AGE, gt=0)  # `fleet.control.deliveries`

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        values: dict[str, object] = {
            field: env[name] for field, name in ENV.items() if env.get(name)
        }
        flag = env.get("GITFLEET_SCHEDULER", "true").strip().lower()
        values["scheduler"] = flag not in ("0", "false", "no", "off")
        values["notifications"] = values["scheduler"]
        required = env.get("GITFLEET_REQUIRE_IMPERSONATION", "").strip().lower()
        values["require_impersonation"] = required in ("1", "true", "yes", "on")
        in_cluster = env.get("GITFLEET_IN_CLUSTER", "true").strip().lower()
        values["in_cluster"] = in_cluster not in ("0", "false", "no", "off")
        return cls.model_validate(values)

    @staticmethod
    def reveal(value: SecretStr | None) -> str | None:
        return value.get_secret_value() if value is not None else None
