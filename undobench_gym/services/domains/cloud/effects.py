"""The cloud domain's effects, declared once: each gives its route's OpenAPI labels and
the commit-log rows it writes. Kept apart from the routes: the step helpers in `common`
write the rows of a deployment, a rollback, a registration and a traffic change, for
their own routes and for the cutover's steps alike."""

from __future__ import annotations

from undobench_gym.services.domains._service.kit import Effect

#: Which image in which slot with how many replicas: every call is a new revision.
DEPLOY = Effect(
    "deployment.create", "additive", ("service_id", "colour", "image", "replicas"), "native"
)
SCALE = Effect("deployment.scale", "set", ("deployment_id", "replicas"))
#: The reason is free text: a restart re-sent with another reason restarts again.
RESTART = Effect("deployment.restart", "additive", ("deployment_id",))
SET_TRAFFIC = Effect("traffic.set", "set", ("service_id", "blue", "green"))
REGISTER = Effect(
    "endpoint.register", "create_unique", ("service_id", "deployment_id"), "constraint"
)
DEREGISTER = Effect(
    "endpoint.deregister", "set", ("service_id", "deployment_id"), compensation=True
)
START_CUTOVER = Effect(
    "cutover.start", "create_unique", ("service_id", "change_id", "image", "replicas"), "constraint"
)
RESUME_CUTOVER = Effect("cutover.resume", "set", ("cutover_id",), resumption=True)
#: Which slot goes back one revision; the image it restores is the service's choice.
ROLLBACK = Effect("deployment.rollback", "additive", ("service_id", "colour"), compensation=True)
