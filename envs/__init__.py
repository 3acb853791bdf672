"""Domain services and their workflows, one sub-package per domain.

A domain is a sub-package with `service.py` (its FastAPI routes and `DOMAIN`),
`fixture.py` (`build_fixture(seed)`) and `workflows.py` (`WORKFLOWS`). Discovery only
lists folders, so importing this package imports no service code.
"""

from __future__ import annotations

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


DOMAIN_MODULES: dict[str, str] = _discover()
