"""Domain services and their workflows, one sub-package per domain."""

DOMAIN_MODULES: dict[str, str] = {
    "payments": "undobench_gym.envs.payments",
    "database": "undobench_gym.envs.database",
}
