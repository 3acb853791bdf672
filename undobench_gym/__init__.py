"""UndoBench Gym: does a tool-using agent recover from infrastructure faults without harm?

Importing the package registers the environments and starts nothing. A stack's own
processes (a domain service, its proxy) never make an environment: started with
`UNDOBENCH_STACK_PROCESS=1` (the runtimes and the stack image set it) they skip the
registration, and with it Gymnasium and NumPy (~16 MiB per process, measured).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

STACK_PROCESS_ENV = "UNDOBENCH_STACK_PROCESS"

if TYPE_CHECKING or os.environ.get(STACK_PROCESS_ENV) != "1":
    from undobench_gym.core.registration import ENV_IDS, register_all

    register_all()


def __getattr__(name: str) -> Any:
    if name == "ENV_IDS":  # in a stack process, on demand
        from undobench_gym.core.registration import ENV_IDS

        return ENV_IDS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__version__ = "0.1.0"
__all__ = ["ENV_IDS", "STACK_PROCESS_ENV", "__version__"]
