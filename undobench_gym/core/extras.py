"""Optional extras that a command needs, checked before it starts work.

The core install is what a stack runs and what a `gym.make` loop needs; reports (intervals,
tests, plots, report.html) need the `eval` extra. `undobench run` without it records the
trials and says what the report needs; `run_sweep(report=True)` checks before its first
pair, so a library caller learns it in a second instead of after hours of recorded trials.
"""

from __future__ import annotations

import importlib.util

from undobench_gym.contract.errors import UndoBenchError

#: extra name -> the top-level modules it installs (what `find_spec` looks for). jinja2 is
#: also in the core through mitmproxy's flask; listed because the reports use it directly.
EXTRAS: dict[str, tuple[str, ...]] = {
    "eval": ("scipy", "statsmodels", "matplotlib", "jinja2"),
}


def _absent(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is None
    except ImportError:  # a finder that refuses it, as an install without it would
        return True


def missing(extra: str) -> list[str]:
    """The modules of `extra` that cannot be imported here."""
    return [m for m in EXTRAS[extra] if _absent(m)]


def require(extra: str, what: str, hint: str = "") -> None:
    """Raise a usage error naming the install command when `extra` is incomplete."""
    absent = missing(extra)
    if absent:
        raise UndoBenchError(
            f"{what} needs the '{extra}' extra (missing: {', '.join(absent)}): "
            f"pip install 'undobench-gym[{extra}]'{hint}"
        )
