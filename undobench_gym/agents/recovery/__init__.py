"""Recovery methods as Gymnasium wrappers, one module per method (B0 `retry`, B1
`checkpoint`, B2 `keys`, B3 `saga`, B5/B5-P `journal`, B6 `verify`) over `base`
(`RecoveryWrapper`) and `derive` (reads and compensations from the public schemas).
`agents.methods` registers them by name; `table` prints what each does on real stacks."""

from .base import RecoveryWrapper
from .checkpoint import CheckpointResume
from .journal import ClientJournal
from .keys import IdempotencyKeys
from .retry import NaiveRetry
from .saga import Saga
from .verify import VerifyBeforeRetry

__all__ = [
    "CheckpointResume",
    "ClientJournal",
    "IdempotencyKeys",
    "NaiveRetry",
    "RecoveryWrapper",
    "Saga",
    "VerifyBeforeRetry",
]
