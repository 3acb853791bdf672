"""One flat registration list: `UndoBench/<Domain>-v0` for every domain."""

from __future__ import annotations

from gymnasium.envs.registration import register, registry

ENTRY_POINT = "undobench_gym.env:UndoBenchEnv"
ENV_IDS: dict[str, str] = {
    "UndoBench/Payments-v0": "payments",
    "UndoBench/Database-v0": "database",
}


def register_all() -> None:
    for env_id, domain in ENV_IDS.items():
        if env_id not in registry:
            register(
                id=env_id,
                entry_point=ENTRY_POINT,
                kwargs={"domain": domain},
                disable_env_checker=True,
            )
