"""Helpers the messaging routes share: typed parameters, row views and lookups."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Header, Path
from pydantic import Field
from sqlalchemy.orm import Session

from .._service.context import ServiceContext, get_ctx
from .._service.db import row as row  # re-exported for the domain modules
from .._service.mutation import error

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]*$"
PHONE_PATTERN = r"^\+[1-9][0-9]{7,14}$"
EMAIL_PATTERN = r"^[^@\s]+@[^@\s]+\.[^@\s]+$"

Ctx = Annotated[ServiceContext, Depends(get_ctx)]
Id = Annotated[str, Field(min_length=1, max_length=64, pattern=ID_PATTERN)]
PathId = Annotated[str, Path(min_length=1, max_length=64, pattern=ID_PATTERN)]
KeyHeader = Annotated[str | None, Header(alias="Idempotency-Key", max_length=255)]


def get_or_404(s: Session, model: type[Any], ident: str, what: str) -> Any:
    obj = s.get(model, ident)
    if obj is None:
        raise error(404, "resource_missing", f"No such {what}: {ident}")
    return obj
