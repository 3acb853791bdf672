"""Payouts: the payments composite. A payout commits in several transactions (the payout,
then one per transfer), with a crash point after the first transfer, so a DURING_MUTATION
fault leaves a real `processing` payout behind; resume_payout finishes it."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from sqlalchemy import select
from sqlalchemy.orm import Session

from undobench_gym.services.domains._service.kit import (
    Effect,
    error,
    get_ctx,
    get_or_404,
    maybe_crash,
    new_id,
    now,
    run_composite,
    write_route,
)
from undobench_gym.services.domains.payments.common import Currency, PayoutOut, debit, payout_view
from undobench_gym.services.domains.payments.models import Balance, Payout, Transfer

router = APIRouter(prefix="/v1")

#: Who is paid how much in which currency; the reference is the caller's label, and a
#: re-sent payout under another reference pays every recipient again.
CREATE_PAYOUT = Effect("payout.create", "additive", ("currency", "recipients"))
#: One recipient paid: written by the payout's steps, so it has no route of its own.
PAY_TRANSFER = Effect("payout.transfer", "additive", ("account", "amount", "currency"))
RESUME_PAYOUT = Effect("payout.resume", "set", ("payout_id",), resumption=True)


class Recipient(BaseModel):
    account: str = Field(min_length=1, max_length=64)
    amount: int = Field(gt=0, le=10_000_000)


class PayoutIn(BaseModel):
    reference: str = Field(min_length=1, max_length=64)
    currency: Currency
    recipients: list[Recipient] = Field(min_length=1, max_length=20)


def _recipients_key(recipients: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Recipients in account order: the same payout listed in another order is the same."""
    return sorted(
        ({"account": r["account"], "amount": r["amount"]} for r in recipients),
        key=lambda r: str(r["account"]),
    )


def _pay_transfers(request: Request, payout_id: str, resume: bool) -> None:
    """Pay each missing transfer in its own transaction, as a batch payout system does.

    A resume that finds the payout `processing` and finishes it records `payout.resume`; a
    resume of a paid payout changes nothing and records nothing."""
    engine = get_ctx(request).engine
    with Session(engine) as s:
        p = get_or_404(s, Payout, payout_id, "payout")
        recipients, currency = list(p.recipients), p.currency
    for i, rec in enumerate(recipients):
        if i == 1:
            maybe_crash(request, "payout.after_first_transfer")
        with Session(engine) as s, s.begin():
            done = s.scalar(
                select(Transfer).where(
                    Transfer.payout_id == payout_id, Transfer.account == rec["account"]
                )
            )
            if done is not None:
                continue
            debit(s, currency, rec["amount"])
            s.add(
                Transfer(
                    id=new_id(s, "tr"),
                    payout_id=payout_id,
                    account=rec["account"],
                    amount=rec["amount"],
                    created=now(s),
                )
            )
            identity = {"account": rec["account"], "amount": rec["amount"], "currency": currency}
            PAY_TRANSFER.commit(s, {"payout_id": payout_id, **rec}, None, identity)
    with Session(engine) as s, s.begin():
        p = get_or_404(s, Payout, payout_id, "payout")
        if p.status == "paid":
            return
        p.status = "paid"
        if resume:
            RESUME_PAYOUT.commit(s, {"payout_id": payout_id}, None)


def _open_payout(s: Session, body: PayoutIn, key: str | None) -> str:
    """The payout row, `processing`, and its commit row: the first transaction."""
    total = sum(r.amount for r in body.recipients)
    bal = s.get(Balance, body.currency)
    if bal is None or bal.available < total:
        raise error(402, "insufficient_funds", "Platform balance is too low for payout")
    recipients = [r.model_dump() for r in body.recipients]
    p = Payout(
        id=new_id(s, "po"),
        reference=body.reference,
        currency=body.currency,
        recipients=recipients,
        status="processing",
        created=now(s),
    )
    s.add(p)
    identity = {"currency": body.currency, "recipients": _recipients_key(recipients)}
    CREATE_PAYOUT.commit(s, body.model_dump(), key, identity)
    return p.id


@write_route(router, "POST", "/payouts", "create_payout", CREATE_PAYOUT, PayoutOut, 201)
def create_payout(request: Request, body: PayoutIn) -> JSONResponse:
    """Split a payout across recipients. Transfers are paid one by one; a payout left in
    `processing` can be finished with resume_payout."""
    accounts = [r.account for r in body.recipients]
    if len(set(accounts)) != len(accounts):
        raise error(400, "duplicate_recipient", "Each recipient account may appear only once")
    return run_composite(
        request,
        route="create_payout",
        payload=body.model_dump(),
        start=lambda s, key: _open_payout(s, body, key),
        advance=lambda payout_id: _pay_transfers(request, payout_id, resume=False),
        view=lambda s, payout_id: payout_view(s, get_or_404(s, Payout, payout_id, "payout")),
        native=CREATE_PAYOUT.native,
    )


@write_route(
    router, "POST", "/payouts/{payout_id}/resume", "resume_payout", RESUME_PAYOUT, PayoutOut
)
def resume_payout(request: Request, payout_id: str) -> dict[str, Any]:
    """Pay the transfers a `processing` payout still owes; a paid payout is left as it is."""
    # No Idempotency-Key claim (a resume is a `set`): not a composite for `run_composite`.
    _pay_transfers(request, payout_id, resume=True)
    with Session(get_ctx(request).engine) as s:
        return payout_view(s, get_or_404(s, Payout, payout_id, "payout"))
