"""Recovery methods as Gymnasium wrappers, one module per method (B0 `retry`, B1
`checkpoint`, B2 `keys`, B3 `saga`, B5/B5-P `journal`, B6 `verify`) over `base`
(`RecoveryWrapper`) and `derive` (reads and compensations from the public schemas).
`agents.methods` registers them by name; `table` prints what each does on real stacks."""

from undobench_gym.agents.recovery.base import RecoveryWrapper
from undobench_gym.agents.recovery.checkpoint import CheckpointResume
from undobench_gym.agents.recovery.journal import ClientJournal
from undobench_gym.agents.recovery.keys import IdempotencyKeys
from undobench_gym.agents.recovery.retry import NaiveRetry
from undobench_gym.agents.recovery.saga import Saga
from undobench_gym.agents.recovery.verify import VerifyBeforeRetry

__all__ = [
    "CheckpointResume",
    "ClientJournal",
    "IdempotencyKeys",
    "NaiveRetry",
    "RecoveryWrapper",
    "Saga",
    "VerifyBeforeRetry",
]
