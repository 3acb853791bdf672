"""Response models of the CRM routes: the output schemas agents read, built once.

Each is typed `Any` because mypy does not take a class built at run time as a type (in
`list[...]`), while FastAPI needs the class itself.
"""

from __future__ import annotations

from typing import Any

from undobench_gym.services.domains._service.kit import row_model
from undobench_gym.services.domains.crm import models

LeadOut: Any = row_model(models.Lead)
AccountOut: Any = row_model(models.Account)
ContactOut: Any = row_model(models.Contact)
OpportunityOut: Any = row_model(models.Opportunity)
SlaContractOut: Any = row_model(models.SlaContract)
SlaRenewalOut: Any = row_model(models.SlaRenewal)
InvoiceOut: Any = row_model(models.Invoice)
SequenceOut: Any = row_model(models.Sequence)
EmailOut: Any = row_model(models.Email)
#: `lead_view`: a lead with the rows its conversion created so far.
LeadDetail: Any = row_model(
    models.Lead,
    "LeadDetail",
    account=(AccountOut | None, ...),
    contact=(ContactOut | None, ...),
    opportunity=(OpportunityOut | None, ...),
)
#: `account_view`: an account with its contacts, opportunities and SLA contracts.
AccountDetail: Any = row_model(
    models.Account,
    "AccountDetail",
    contacts=(list[ContactOut], ...),
    opportunities=(list[OpportunityOut], ...),
    sla_contracts=(list[SlaContractOut], ...),
)
#: `contract_view`: an SLA contract with its renewals.
SlaContractDetail: Any = row_model(
    models.SlaContract, "SlaContractDetail", renewals=(list[SlaRenewalOut], ...)
)
#: `enrollment_view`: an enrollment with the emails it has sent.
EnrollmentDetail: Any = row_model(
    models.Enrollment, "EnrollmentDetail", emails_sent=(list[EmailOut], ...)
)
#: What renew_sla answers: the renewal, its invoice, and the contract after it.
RenewalOut: Any = row_model(
    models.SlaContract,
    "RenewalOut",
    renewals=(list[SlaRenewalOut], ...),
    renewal=(SlaRenewalOut, ...),
    invoice=(InvoiceOut, ...),
)
