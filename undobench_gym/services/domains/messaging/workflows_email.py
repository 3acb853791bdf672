"""Messaging workflow: email a maintenance notice as one batch (a composite)."""

from __future__ import annotations

from typing import Any

from undobench_gym.contract.seeding import rng_for
from undobench_gym.contract.specs import FaultScenario, GoldStep, WorkflowSpec
from undobench_gym.services.domains.messaging.batches import CRASH_MID_BATCH
from undobench_gym.services.domains.messaging.fixture import ADMINS
from undobench_gym.services.domains.messaging.workflows_common import B, E, P

N_RECIPIENTS = 4


def _batch_params(seed: int, fx: dict[str, Any]) -> dict[str, Any]:
    rng = rng_for("msg-maintenance-email", seed)
    recipients = rng.sample(ADMINS, N_RECIPIENTS)
    day = rng.randint(10, 28)
    hour = rng.choice([1, 2, 3, 22, 23])
    params: dict[str, Any] = {
        "reference": f"MAINT-2026-02-{day}-{rng.randint(100, 999)}",
        "subject": f"Scheduled maintenance on 2026-02-{day} at {hour:02d}:00 UTC",
        "recipients": recipients,
        "recipients_text": ", ".join(recipients),
    }
    for i, r in enumerate(recipients):
        params[f"recipient{i}"] = r
    return params


BATCH_REF = {"reference": "{reference}"}
BATCH = WorkflowSpec(
    id="msg-maintenance-email",
    domain="messaging",
    split="dev",
    kind="composite",
    instruction=(
        'Email the maintenance notice "{subject}" as email batch {reference} to the '
        "customer admins {recipients_text}. Every one of them must get it exactly once."
    ),
    tools=["list_email_batches", "get_email_batch", "send_email_batch", "resume_email_batch"],
    required_effects=[
        E(op="email_batch.create", identity=BATCH_REF),
        *[
            E(
                op="email.send",
                identity={"reference": "{reference}", "recipient": f"{{recipient{i}}}"},
            )
            for i in range(N_RECIPIENTS)
        ],
    ],
    # Finishing a batch that a crash left `sending` completes the required emails.
    allowed_effects=[E(op="email_batch.resume", identity={})],
    # The reference is new (the history's batch is from December): rows with it are the
    # episode's.
    invariants=[
        P.count("one sent batch", "msg_email_batches", {**BATCH_REF, "status": "sent"}),
        P.count("no second batch", "msg_email_batches", BATCH_REF),
        P.field_is(
            "the batch has the subject", "msg_email_batches", BATCH_REF, "subject", "{subject}"
        ),
        *[
            P.count(
                f"recipient {i} emailed once",
                "msg_emails",
                {**BATCH_REF, "recipient": f"{{recipient{i}}}"},
            )
            for i in range(N_RECIPIENTS)
        ],
        P.count("no other email in the batch", "msg_emails", BATCH_REF, N_RECIPIENTS),
    ],
    gold_plan=[
        GoldStep(tool="list_email_batches", arguments={"reference": "{reference}"}),
        GoldStep(
            tool="send_email_batch",
            arguments={
                "reference": "{reference}",
                "subject": "{subject}",
                "recipients": "{recipients}",
            },
        ),
    ],
    scenarios=[
        FaultScenario.on(
            "crash-mid-batch",
            B.DURING_MUTATION,
            "send_email_batch",
            crash_point=CRASH_MID_BATCH,
            description="the first recipient is emailed, the others are not",
        ),
        FaultScenario.on("lost-ack", B.POST_MUTATION_PRE_ACK, "send_email_batch"),
    ],
    draw_params=_batch_params,
)
