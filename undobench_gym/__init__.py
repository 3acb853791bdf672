"""UndoBench Gym: does a tool-using agent recover from infrastructure faults without harm?

Importing the package registers the environments and starts nothing.
"""

from __future__ import annotations

from .registration import ENV_IDS, register_all

register_all()

__version__ = "0.1.0"
__all__ = ["ENV_IDS", "__version__"]
