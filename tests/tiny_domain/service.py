"""Checklist step 3: routes on the kit. Reads take a `DbSession`; the one mutation goes
through `run_mutation`; its `Effect` (op, class, identity, idempotency) gives both its
OpenAPI labels and its commit-log row, so the two agree."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from sqlalchemy import select
from sqlalchemy.orm import Session

from undobench_gym.services.domains._service.kit import (
    READ_ONLY,
    DbSession,
    DomainService,
    Effect,
    KeyHeader,
    PathId,
    get_or_404,
    new_id,
    now,
    row,
    row_model,
    run_mutation,
    write_route,
)

from .fixture import build_fixture
from .models import TABLES, Note

router = APIRouter(prefix="/v1")
NoteOut = row_model(Note)
#: Who wrote which note: the body is free text, a reworded re-send is the same note.
CREATE_NOTE = Effect("note.create", "additive", ("author", "title"), "native")


@router.get(
    "/notes", operation_id="list_notes", openapi_extra=READ_ONLY, response_model=list[NoteOut]
)
def list_notes(s: DbSession, author: str | None = Query(None, max_length=64)) -> Any:
    """List notes, optionally by one author."""
    q = select(Note).order_by(Note.id)
    if author:
        q = q.where(Note.author == author)
    return [row(n) for n in s.scalars(q)]


@router.get(
    "/notes/{note_id}", operation_id="get_note", openapi_extra=READ_ONLY, response_model=NoteOut
)
def get_note(s: DbSession, note_id: PathId) -> Any:
    """Retrieve one note."""
    return row(get_or_404(s, Note, note_id, "note"))


class NoteIn(BaseModel):
    author: str = Field(min_length=1, max_length=64)
    title: str = Field(min_length=1, max_length=128)
    body: str = Field(min_length=1, max_length=1000)


@write_route(router, "POST", "/notes", "create_note", CREATE_NOTE, NoteOut, 201)
def create_note(request: Request, body: NoteIn, idempotency_key: KeyHeader = None) -> JSONResponse:
    """Write a note. Accepts an Idempotency-Key header."""

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        note = Note(id=new_id(s, "nt"), created=now(s), **body.model_dump())
        s.add(note)
        CREATE_NOTE.commit(s, body.model_dump(), key)
        s.flush()
        return 201, row(note)

    return run_mutation(
        request,
        route="create_note",
        native=CREATE_NOTE.native,
        payload=body.model_dump(),
        apply=apply,
    )


DOMAIN = DomainService(
    name="notes",
    title="UndoBench Notes (tiny test domain)",
    routers=[router],
    tables=TABLES,
    fixture=build_fixture,
    fixture_order=(("notes", Note),),
)
