"""Response models of the cloud routes: the output schemas agents read, built once.

Each is typed `Any` because mypy does not take a class built at run time as a type (in
`list[...]`), while FastAPI needs the class itself.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from undobench_gym.services.domains._service.kit import row_model
from undobench_gym.services.domains.cloud import models

ServiceOut: Any = row_model(models.Service)
DeploymentOut: Any = row_model(models.Deployment)
EndpointOut: Any = row_model(models.Endpoint)
EventOut: Any = row_model(models.Event)
#: `service_view`: a service with its live slots, its weights and its catalog entries.
ServiceDetail: Any = row_model(
    models.Service,
    "ServiceDetail",
    active_deployments=(dict[str, DeploymentOut], ...),
    traffic=(dict[str, int], ...),
    endpoints=(list[EndpointOut], ...),
)
#: `cutover_view`: a cutover with its deployment and the service's weights.
CutoverDetail: Any = row_model(
    models.Cutover,
    "CutoverDetail",
    deployment=(DeploymentOut | None, ...),
    traffic=(dict[str, int], ...),
)
DeregisteredOut: Any = row_model(models.Endpoint, "DeregisteredOut", deregistered=(bool, ...))
RollbackOut: Any = row_model(
    models.Deployment, "RollbackOut", rolled_back=(str, ...), restored_revision=(int, ...)
)


class TrafficOut(BaseModel):
    """What set_traffic answers: the service's weights per colour after the change."""

    service_id: str
    traffic: dict[str, int]
