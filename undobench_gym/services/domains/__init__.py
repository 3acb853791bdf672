"""Domain services and their workflows, one sub-package per domain.

A domain is a sub-package with `service.py` (its FastAPI routes and `DOMAIN`),
`fixture.py` (`build_fixture(seed)`) and `workflows.py` (`WORKFLOWS`). Discovery only
lists folders, so importing this package imports no service code.

A domain may also live in another package (a user's own, or a test's): `register_domain`
adds it in this process and, through the `UNDOBENCH_DOMAINS` environment variable
(`name=module,...`), in the service and proxy processes the runtime starts.
"""

from __future__ import annotations

import os
from pathlib import Path

#: Display names for env ids: UndoBench/<Name>-v0. Order is the catalogue's order.
DOMAIN_NAMES: dict[str, str] = {
    "payments": "Payments",
    "database": "Database",
    "storage": "Storage",
    "git": "Git",
    "cloud": "Cloud",
    "crm": "CRM",
    "ticketing": "Ticketing",
    "messaging": "Messaging",
}
_REQUIRED = ("service.py", "fixture.py", "workflows.py")


def _discover() -> dict[str, str]:
    here = Path(__file__).parent
    found = {}
    for name in DOMAIN_NAMES:
        if all((here / name / f).is_file() for f in _REQUIRED):
            found[name] = f"{__name__}.{name}"
    return found


ENV_VAR = "UNDOBENCH_DOMAINS"


def _from_environment() -> dict[str, str]:
    pairs = [p.split("=", 1) for p in os.environ.get(ENV_VAR, "").split(",") if "=" in p]
    return {name.strip(): module.strip() for name, module in pairs}


DOMAIN_MODULES: dict[str, str] = {**_discover(), **_from_environment()}


def register_domain(name: str, module: str) -> None:
    """Add a domain from another package (`module` has service.py, fixture.py and
    workflows.py); child processes started from now on see it too."""
    if name in DOMAIN_MODULES and DOMAIN_MODULES[name] != module:
        raise ValueError(f"domain {name!r} is already {DOMAIN_MODULES[name]}")
    DOMAIN_MODULES[name] = module
    extra = _from_environment()
    extra[name] = module
    os.environ[ENV_VAR] = ",".join(f"{n}={m}" for n, m in extra.items())


def unregister_domain(name: str) -> None:
    """Remove a domain added by `register_domain`."""
    DOMAIN_MODULES.pop(name, None)
    extra = {n: m for n, m in _from_environment().items() if n != name}
    if extra:
        os.environ[ENV_VAR] = ",".join(f"{n}={m}" for n, m in extra.items())
    else:
        os.environ.pop(ENV_VAR, None)
