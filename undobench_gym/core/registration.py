"""One flat registration list: `UndoBench/<Domain>-v0` for every domain."""

from __future__ import annotations

from gymnasium.envs.registration import register, registry

from undobench_gym.services.domains import DOMAIN_MODULES, DOMAIN_NAMES

ENTRY_POINT = "undobench_gym.core.env:UndoBenchEnv"
ENV_IDS: dict[str, str] = {
    f"UndoBench/{DOMAIN_NAMES[d]}-v0": d for d in DOMAIN_NAMES if d in DOMAIN_MODULES
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
