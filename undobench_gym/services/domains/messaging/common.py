"""What the messaging routes share: the id and address patterns, the typed id parameters
built from them, read routes and their optional filters, and the unique-constraint 409."""

from __future__ import annotations

from undobench_gym.services.domains._service.kit import id_types

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]*$"
PHONE_PATTERN = r"^\+[1-9][0-9]{7,14}$"
EMAIL_PATTERN = r"^[^@\s]+@[^@\s]+\.[^@\s]+$"

#: A body-field id and a path-parameter id, both of the messaging id shape.
Id, PathId = id_types(ID_PATTERN)
