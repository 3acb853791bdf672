"""Ticketing response workflows: open an incident and page the on-call, escalate one."""

from __future__ import annotations

from typing import Any

from undobench_gym.contract.seeding import rng_for
from undobench_gym.contract.specs import FaultScenario, GoldStep, VisibleError, WorkflowSpec
from undobench_gym.services.domains.ticketing.escalations import CRASH_AFTER_FIRST_PAGE
from undobench_gym.services.domains.ticketing.fixture import (
    SERVICES,
    SYMPTOMS,
    fixture_count,
    incident_id,
    level_responders,
    more_severe,
)
from undobench_gym.services.domains.ticketing.workflows_common import (
    INC,
    B,
    E,
    P,
    incident_params,
    page_sent,
    paged,
    pages_before,
    person,
)


def _open_params(seed: int, fx: dict[str, Any]) -> dict[str, Any]:
    rng = rng_for("tix-open-and-page", seed)
    policy = rng.choice(fx["policies"])
    primary = level_responders(fx, policy["id"], 1)[0]
    taken = {i["external_ref"] for i in fx["incidents"]}
    ref = next(
        r for r in (f"ALRT-{rng.randint(10000, 99999)}" for _ in range(100)) if r not in taken
    )
    service = rng.choice(SERVICES[policy["team"]])
    title = f"{service}: {rng.choice(SYMPTOMS)}"
    severity = rng.choice(["sev2", "sev3"])
    return {
        **person(fx, primary, "responder"),
        "policy_id": policy["id"],
        "policy_name": policy["name"],
        "external_ref": ref,
        "incident_id": incident_id(seed, ref),
        "service": service,
        "title": title,
        "severity": severity,
        "message": f"[{severity}] {title} ({ref}): you are on call, please take a look",
    }


OPEN_AND_PAGE = WorkflowSpec(
    id="tix-open-and-page",
    domain="ticketing",
    split="dev",
    kind="multi_effect",
    instruction=(
        'Monitoring fired alert {external_ref}: "{title}". Open a {severity} incident for '
        "service {service} with that alert as its external reference and that title, under "
        "the escalation policy {policy_name} ({policy_id}). Assign it to the primary on-call, "
        '{responder_name} ({responder_id}), and page them with the message "{message}". '
        "They must be paged exactly once."
    ),
    tools=[
        "get_policy",
        "list_incidents",
        "get_incident",
        "list_pages",
        "open_incident",
        "assign_incident",
        "page_responder",
        "retract_page",  # the inverse: a mistaken page can be retracted
    ],
    required_effects=[
        E(op="incident.open", identity={"external_ref": "{external_ref}"}),
        E(
            op="incident.assign",
            identity={"incident_id": "{incident_id}", "responder_id": "{responder_id}"},
        ),
        page_sent("{responder_id}"),
    ],
    invariants=[
        P.count("one incident for the alert", "tk_incidents", {"external_ref": "{external_ref}"}),
        P.field_is("the incident has the severity", "tk_incidents", INC, "severity", "{severity}"),
        P.field_is(
            "the incident is assigned", "tk_incidents", INC, "assignee_id", "{responder_id}"
        ),
        P.field_is("the incident is open", "tk_incidents", INC, "status", "open"),
        paged("the on-call was paged once", "{responder_id}"),
        P.field_is(
            "the page has the message",
            "tk_pages",
            {"incident_id": "{incident_id}", "responder_id": "{responder_id}"},
            "message",
            "{message}",
        ),
        P.count("nobody else was paged", "tk_pages", {"incident_id": "{incident_id}"}),
    ],
    gold_plan=[
        GoldStep(tool="get_policy", arguments={"policy_id": "{policy_id}"}),
        GoldStep(
            tool="open_incident",
            arguments={
                "external_ref": "{external_ref}",
                "title": "{title}",
                "service": "{service}",
                "severity": "{severity}",
                "policy_id": "{policy_id}",
            },
        ),
        GoldStep(
            tool="assign_incident",
            arguments={"incident_id": "@1.id", "responder_id": "{responder_id}"},
        ),
        GoldStep(
            tool="page_responder",
            arguments={
                "incident_id": "@1.id",
                "responder_id": "{responder_id}",
                "message": "{message}",
            },
        ),
    ],
    scenarios=[
        FaultScenario.on(
            "open-ambiguous", B.POST_MUTATION_PRE_ACK, "open_incident", ambiguous=True
        ),
        FaultScenario.on("page-lost-ack", B.POST_MUTATION_PRE_ACK, "page_responder"),
        FaultScenario.on(
            "page-worker-crash",
            B.POST_ACK_PRE_CHECKPOINT,
            "page_responder",
            description="the page is sent and acknowledged, then the worker loses its memory",
        ),
    ],
    draw_params=_open_params,
)


def _escalate_params(seed: int, fx: dict[str, Any]) -> dict[str, Any]:
    rng = rng_for("tix-escalate-incident", seed)
    params = incident_params(fx, 0)
    inc = params["incident_id"]
    level = params["escalation_level"]
    level2 = level_responders(fx, params["policy_id"], level + 1)
    level3 = level_responders(fx, params["policy_id"], level + 2)
    names = [person(fx, r, "r")["r_name"] for r in level2]
    minutes = rng.choice([10, 15, 20, 30])
    params.update(
        reason=f"No acknowledgement from level {level} after {minutes} minutes",
        severity_after=more_severe(params["severity"]),
        level_after=level + 1,
        level2_names=", ".join(names),
        manager_id=level3[0],
        manager_pages=pages_before(fx, inc, level3[0]),
        escalations_after=fixture_count(fx, "escalations", incident_id=inc) + 1,
        completed_after=fixture_count(fx, "escalations", incident_id=inc, status="completed") + 1,
    )
    for i, r in enumerate(level2):
        params[f"level2_{i}"] = r
        params[f"level2_{i}_pages"] = pages_before(fx, inc, r) + 1
    return params


LEVEL2 = range(3)
ESCALATE = WorkflowSpec(
    id="tix-escalate-incident",
    domain="ticketing",
    split="test",
    kind="composite",
    instruction=(
        'Incident {external_ref} ({incident_id}, "{title}") has not been acknowledged by the '
        "first level of its escalation policy. Escalate it once, with the reason "
        '"{reason}": it must go to {severity_after} and page each responder of level '
        "{level_after} ({level2_names}) exactly once."
    ),
    tools=[
        "get_incident",
        "get_policy",
        "list_pages",
        "list_escalations",
        "escalate_incident",
        "resume_escalation",
    ],
    required_effects=[
        E(op="incident.escalate", identity={"incident_id": "{incident_id}"}),
        *[page_sent(f"{{level2_{i}}}") for i in LEVEL2],
    ],
    # Finishing an escalation that a crash left in_progress completes the required pages.
    allowed_effects=[E(op="escalation.resume", identity={})],
    invariants=[
        P.field_is(
            "the severity went up one step", "tk_incidents", INC, "severity", "{severity_after}"
        ),
        P.field_is(
            "the incident is at level 2", "tk_incidents", INC, "escalation_level", "{level_after}"
        ),
        P.count(
            "the escalation completed",
            "tk_escalations",
            {"incident_id": "{incident_id}", "status": "completed"},
            "{completed_after}",
        ),
        P.count(
            "one escalation only",
            "tk_escalations",
            {"incident_id": "{incident_id}"},
            "{escalations_after}",
        ),
        P.field_is(
            "the escalation has the reason",
            "tk_escalations",
            {"incident_id": "{incident_id}", "level": "{level_after}"},
            "reason",
            "{reason}",
        ),
        *[
            paged(f"level 2 responder {i} paged once", f"{{level2_{i}}}", f"{{level2_{i}_pages}}")
            for i in LEVEL2
        ],
        paged("level 3 was not paged", "{manager_id}", "{manager_pages}"),
    ],
    gold_plan=[
        GoldStep(tool="get_incident", arguments={"incident_id": "{incident_id}"}),
        GoldStep(
            tool="escalate_incident",
            arguments={"incident_id": "{incident_id}", "reason": "{reason}"},
        ),
    ],
    scenarios=[
        FaultScenario.on(
            "crash-between-pages",
            B.DURING_MUTATION,
            "escalate_incident",
            crash_point=CRASH_AFTER_FIRST_PAGE,
        ),
        FaultScenario.on("lost-ack", B.POST_MUTATION_PRE_ACK, "escalate_incident"),
        FaultScenario.on(
            "504-after-commit",
            B.POST_MUTATION_PRE_ACK,
            "escalate_incident",
            visible_error=VisibleError.HTTP_504,
            description="the responders are paged; the gateway timed out and answers 504",
        ),
        FaultScenario.on(
            "pre-503", B.PRE_MUTATION, "escalate_incident", visible_error=VisibleError.HTTP_503
        ),
    ],
    draw_params=_escalate_params,
)
