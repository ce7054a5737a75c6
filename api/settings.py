"""The coordinator's settings, read from the environment once at start.

Plain pydantic rather than pydantic-settings: four variables do not justify a dependency, and
`from_env` keeps tests free to build `Settings` directly. Secrets are `SecretStr`, so printing
or logging the settings never shows them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from pydantic import BaseModel, Field, SecretStr

ENV = {
    "redis_url": "GITFLEET_REDIS_URL",
    "admin_token": "GITFLEET_ADMIN_TOKEN",
    "secret_key": "GITFLEET_SECRET_KEY",
    "webhook_secret": "GITFLEET_WEBHOOK_SECRET",
}


class Settings(BaseModel):
    redis_url: str = "redis://127.0.0.1:6379/0"
    admin_token: SecretStr | None = None
    secret_key: SecretStr | None = None
    webhook_secret: SecretStr | None = None
    diff_timeout_s: float = Field(default=30.0, gt=0)
    prefix: str = "gitfleet"
    scheduler: bool = False  # the `gitfleet api` process turns it on (see from_env)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        values: dict[str, object] = {
            field: env[name] for field, name in ENV.items() if env.get(name)
        }
        flag = env.get("GITFLEET_SCHEDULER", "true").strip().lower()
        values["scheduler"] = flag not in ("0", "false", "no", "off")
        return cls.model_validate(values)

    @staticmethod
    def reveal(value: SecretStr | None) -> str | None:
        return value.get_secret_value() if value is not None else None
