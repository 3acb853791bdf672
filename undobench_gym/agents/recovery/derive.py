"""Derivation rules: which read-only tool can observe a mutation's effect (B5-P, B6), which
compensating tool undoes a committed step (B3) and which resuming tool finishes a record a
crash left half-done (B5-P, B6), from the public tool schemas alone.

Nothing here is a hand-written per-tool table, and nothing reads the harness's catalogue:
the rules use what `public_tools.PublicTool` holds (REST method and path template, the
parameters and which are required, the MCP hints `readOnlyHint`, `destructiveHint`,
`idempotentHint`, and the project's `compensatingHint` and `resumingHint`). A row "shows" a
call's effect by the call's own arguments, compared with a read taken before the call, as a
careful client would do it.
docs/methods.md states the rules and lists what they derive for every workflow.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from undobench_gym.agents.public_tools import KEY_ARG, PublicTool
from undobench_gym.agents.recovery.base import canonical

#: The ranks of a verifier, best first.
SAME_COLLECTION, FILTERED_LIST, ADDRESSED_ITEM = 0, 1, 2
MAX_VERIFIERS = 2
SET_ORDER = (ADDRESSED_ITEM, SAME_COLLECTION, FILTERED_LIST)
RECORD_ORDER = (SAME_COLLECTION, FILTERED_LIST, ADDRESSED_ITEM)
#: The longest identifier a schema allows (ids, names, keys); a longer string is text.
ID_MAX_LENGTH = 64


@dataclass(frozen=True)
class Verifier:
    """A read-only tool that can show whether a mutating call's effect exists: call it with
    the mutating call's arguments of the same names (`binds`), then look for a row that is
    new or changed since the read before the call and carries the call's argument values."""

    tool: str
    binds: tuple[str, ...]
    rank: int

    @property
    def item(self) -> bool:
        return self.rank == ADDRESSED_ITEM

    def arguments(
        self, call_args: dict[str, Any], required: frozenset[str]
    ) -> dict[str, Any] | None:
        args = {n: call_args[n] for n in self.binds if call_args.get(n) is not None}
        return args if required <= set(args) else None


def verifiers_for(mutating: PublicTool, tools: dict[str, PublicTool]) -> list[Verifier]:
    """The read-only tools (among `tools`) that can observe `mutating`'s effect, best first.

    A read-only GET qualifies when every parameter it requires is one the mutating call
    carries (same name) and it is one of:
    - rank 0, the same collection: it lists the very collection the call writes to;
    - rank 1, a filtered list: a collection that takes at least one of the call's
      arguments as a filter; for a `set` (idempotent and destructive) it must leave an
      argument to compare in the rows (a row elsewhere that merely names the resource
      shows nothing about a field being set);
    - rank 2, the addressed item: it reads one resource, takes at least one of the call's
      arguments as its address and leaves at least one to compare (reading back the
      resource a call acted on shows nothing when the address is all the call sends).
    A `set` changes the addressed resource, so its order is item, collection, list; any
    other effect creates a record, so collection, list, item. When the same collection
    exists it is the only one kept for a record-creating effect: it is authoritative.
    """
    if mutating.read_only or not mutating.routed or not mutating.carried:
        return []
    carried = mutating.carried
    is_set = mutating.effect == "set"
    found: list[Verifier] = []
    for spec in tools.values():
        if not spec.read_only or spec.method not in ("GET", "HEAD") or spec.name == mutating.name:
            continue
        if not spec.routed or not spec.required <= carried:
            continue
        binds = tuple(p for p in (*spec.path_params, *spec.query_params) if p in carried)
        bound = set(binds)
        if spec.path == mutating.path and not spec.is_item:
            rank = SAME_COLLECTION
        elif not bound or ((is_set or spec.is_item) and not carried - bound):
            continue
        else:
            rank = ADDRESSED_ITEM if spec.is_item else FILTERED_LIST
        found.append(Verifier(spec.name, binds, rank))
    if not is_set and any(v.rank == SAME_COLLECTION for v in found):
        found = [v for v in found if v.rank == SAME_COLLECTION]
    order = SET_ORDER if is_set else RECORD_ORDER
    found.sort(key=lambda v: (order.index(v.rank), v.tool))
    return found[:MAX_VERIFIERS]


@dataclass(frozen=True)
class ReadPlan:
    """One read-back of one call: the verifier, its arguments, and what they bind."""

    tool: str
    arguments: dict[str, Any]
    bound: frozenset[str]
    item: bool


def read_plans(
    mutating: PublicTool, call_args: dict[str, Any], tools: dict[str, PublicTool]
) -> list[ReadPlan]:
    """The reads that can show this call's effect (empty: the effect is unverifiable)."""
    if not sent_values(call_args):
        return []
    plans = []
    for verifier in verifiers_for(mutating, tools):
        args = verifier.arguments(call_args, tools[verifier.tool].required)
        if args is not None:
            plans.append(ReadPlan(verifier.tool, args, frozenset(args), verifier.item))
    return plans


def sent_values(call_args: dict[str, Any]) -> dict[str, Any]:
    """What a call asks for: its arguments, without the idempotency key and empty ones."""
    return {k: v for k, v in call_args.items() if k != KEY_ARG and v is not None}


def rows_of(body: Any) -> list[dict[str, Any]]:
    """Candidate rows in a read's body: the items of a list, or the object itself and the
    items of any list of objects it holds (one level)."""
    if isinstance(body, list):
        return [r for r in body if isinstance(r, dict)]
    if not isinstance(body, dict):
        return []
    rows = [body]
    for value in body.values():
        if isinstance(value, list):
            rows.extend(r for r in value if isinstance(r, dict))
    return rows


def row_keys(body: Any) -> frozenset[str]:
    """The rows of a read, as comparable text: a baseline to tell new rows from history."""
    return frozenset(canonical(r) for r in rows_of(body))


def holds(have: Any, want: Any) -> bool:
    """`have` (a stored value) holds `want` (a sent value): equal, numbers by value, objects
    by the fields sent (a service adds its own: ids, statuses), lists item by item."""
    if isinstance(want, dict):
        return isinstance(have, dict) and all(
            k in have and holds(have[k], v) for k, v in want.items()
        )
    if isinstance(want, list):
        return (
            isinstance(have, list)
            and len(have) == len(want)
            and all(holds(h, w) for h, w in zip(have, want, strict=True))
        )
    numbers = (int, float)
    if isinstance(want, numbers) and isinstance(have, numbers):
        return not isinstance(want, bool) and not isinstance(have, bool) and have == want
    return canonical(have) == canonical(want)


def carried_by(row: dict[str, Any], name: str, value: Any) -> bool:
    """The row carries this argument: a field of its name, or, since services rename
    (`memo` kept as `ref`, a message as a commit's `subject`), a text or structured value
    equal to one of the row's own (numbers and flags alone are too common to count)."""
    if name in row:
        return True
    if isinstance(value, (bool, int, float)) or value in ("", [], {}):
        return False
    want = canonical(value)
    return any(canonical(v) == want for v in row.values())


def shows_effect(row: dict[str, Any], values: dict[str, Any], plan: ReadPlan) -> bool:
    """The row (new or changed since the read before the call) carries the call: every
    argument the call sent that the row has a field for, it has with the sent value, and
    it carries at least one argument; for an addressed item, one the address did not
    already fix."""
    if not all(holds(row[n], v) for n, v in values.items() if n in row):
        return False
    return any(
        carried_by(row, n, v) for n, v in values.items() if not plan.item or n not in plan.bound
    )


def blind(body: Any, values: dict[str, Any], plan: ReadPlan) -> bool:
    """The read's rows carry none of the arguments it could compare, so it cannot show the
    effect either way (an empty list can: the record would be in it)."""
    rows = rows_of(body)
    names = {n: v for n, v in values.items() if not plan.item or n not in plan.bound}
    return bool(rows) and not any(carried_by(r, n, v) for r in rows for n, v in names.items())


def find_effect(
    body: Any, values: dict[str, Any], plan: ReadPlan, before: frozenset[str]
) -> dict[str, Any] | None:
    """The first row that is not in the read before the call and shows the effect."""
    for row in rows_of(body):
        if canonical(row) not in before and shows_effect(row, values, plan):
            return row
    return None


def singular(word: str) -> str:
    """English plural to singular for REST collection names (charges, policies, pages)."""
    if word.endswith("ies"):
        return word[:-3] + "y"
    if word.endswith(("sses", "xes", "ches", "shes")):
        return word[:-2]
    return word[:-1] if word.endswith("s") else word


def free_text(tool: PublicTool, name: str) -> bool:
    """A string argument that is prose (a reason, a message), not a value that identifies
    something: no pattern, enum or format, and room for more than an identifier."""
    prop = tool.parameters.get("properties", {}).get(name)
    if not isinstance(prop, dict) or prop.get("type") != "string":
        return False
    if any(k in prop for k in ("pattern", "enum", "format", "const")):
        return False
    limit = prop.get("maxLength")
    return not isinstance(limit, int) or limit > ID_MAX_LENGTH


@dataclass(frozen=True)
class Compensation:
    """How to follow up one committed forward call with a derived tool (`rule` says which:
    an undo, or a `resume` that finishes it): the tool and where each of its arguments
    comes from (the forward response's `id`, a forward field of the same name, or, for
    required free text such as a reason, a note saying it is a saga rollback)."""

    forward: str
    tool: str
    from_id: tuple[str, ...]
    by_name: tuple[str, ...]
    notes: tuple[str, ...]
    rule: str

    def arguments(self, call_args: dict[str, Any], body: Any) -> dict[str, Any] | None:
        obj = body if isinstance(body, dict) else {}
        args: dict[str, Any] = {}
        for name in self.from_id:
            if obj.get("id") is None:
                return None
            args[name] = obj["id"]
        for name in self.by_name:
            value = obj.get(name, call_args.get(name))
            if value is None:
                return None
            args[name] = value
        for name in self.notes:
            args[name] = f"Saga rollback: undoes {self.forward} because a later step failed."
        return args


def _bind(
    forward: PublicTool, comp: PublicTool, from_id: set[str], rule: str
) -> Compensation | None:
    """Where each argument of `comp` comes from; None when a required one has no source."""
    needed = comp.required | set(comp.path_params)
    by_name, notes = [], []
    for name in sorted(needed - from_id - {KEY_ARG}):
        if free_text(comp, name) and name not in comp.path_params:
            notes.append(name)  # required prose (a reason, a message): says what this is
        elif name in forward.carried:
            by_name.append(name)  # the same value the forward call named (an amount)
        else:
            return None  # it names something the forward call does not determine
    return Compensation(
        forward.name, comp.name, tuple(sorted(from_id)), tuple(by_name), tuple(notes), rule
    )


def _names_a(comp: PublicTool, param: str, noun: str) -> bool:
    """`comp` requires `param` as the address of one `noun`: in its body, or in its path
    right after the `<noun>s` collection (`/enrollments/{enrollment_id}/unenroll`). A
    deployment id under another collection (`/endpoints/{deployment_id}`: a catalog entry)
    addresses something else."""
    if param not in comp.required:
        return False
    if param not in comp.path_params:
        return True
    segments = comp.path.strip("/").split("/")
    at = segments.index("{" + param + "}")
    return at > 0 and singular(segments[at - 1]) == noun


def compensation_for(forward: PublicTool, tools: dict[str, PublicTool]) -> Compensation | None:
    """The compensating tool (`compensatingHint`, among `tools`) that undoes `forward`.

    Rule 1 (REST delete): `forward` POSTs to a collection and the compensating tool is a
    DELETE of one item of that same collection (`<path>/{param}`): a created entry is
    removed. Rule 2 (offsetting record): `forward` POSTs to a collection of `<noun>s`, is
    not idempotent (an additive or irreversible-send effect), and the compensating tool
    requires `<noun>_id` (or `<noun>`) as the address of one `<noun>` (`_names_a`), filled
    from the forward response's `id`: a charge is offset by a refund of that charge, an
    enrollment by unenrolling it, a page by retracting it. An idempotent create is undone
    only by rule 1 (reopening an opened incident is not undoing its creation), and a `set`
    by neither (undoing one needs the value it replaced, which only a read before the
    write would give).
    """
    if forward.read_only or forward.compensating or forward.method != "POST":
        return None
    if forward.is_item:
        return None
    noun = singular(forward.path.rstrip("/").rsplit("/", 1)[-1])
    for comp in sorted(tools.values(), key=lambda t: t.name):
        if not comp.compensating or comp.name == forward.name or not comp.routed:
            continue
        tail = comp.path[len(forward.path) :]
        if (
            comp.method == "DELETE"
            and comp.path.startswith(forward.path + "/{")
            and (tail.count("/") == 1 and tail.endswith("}"))
        ):
            param = tail[2:-1]
            source = set() if param in forward.carried else {param}
            found = _bind(forward, comp, source, "rest-delete")
        elif not forward.idempotent:
            ids = {n for n in (f"{noun}_id", noun) if _names_a(comp, n, noun)}
            found = _bind(forward, comp, ids, "offsetting-record") if ids else None
        else:
            found = None
        if found is not None:
            return found
    return None


def compensations(tools: dict[str, PublicTool]) -> dict[str, Compensation]:
    """Forward tool name -> its compensation, for every derivable pair within `tools`."""
    out = {}
    for spec in tools.values():
        comp = compensation_for(spec, tools)
        if comp is not None:
            out[spec.name] = comp
    return out


#: A resumption is bound like a compensation: the record's `id` or the forward's own fields.
Resumption = Compensation


def resumption_for(forward: PublicTool, tools: dict[str, PublicTool]) -> Resumption | None:
    """The resuming tool (`resumingHint`, among `tools`) that finishes what `forward`
    started when a crash stopped it part-way, addressed as one record of what `forward`
    creates: `<item>/<verb>` where the item is
    - one of `forward`'s own collection (`POST /payouts` -> `/payouts/{payout_id}/resume`),
    - one of a collection of the same name elsewhere (`POST /incidents/{id}/escalations`
      -> `/escalations/{escalation_id}/resume`), or
    - the very resource `forward` acted on (`POST /leads/{lead_id}/convert` ->
      `/leads/{lead_id}/resume-conversion`).
    The item's address comes from the forward call when it names it (a release's version),
    else from the found record's `id`. A resuming tool changes nothing on a finished
    record, so calling it on a record the forward call completed is harmless.
    """
    if forward.read_only or forward.compensating or forward.method != "POST":
        return None
    if not forward.routed:
        return None
    parent, noun = forward.path.rstrip("/").rsplit("/", 1)
    for tool in sorted(tools.values(), key=lambda t: t.name):
        if not tool.resuming or tool.name == forward.name or not tool.routed:
            continue
        item = tool.path.rstrip("/").rsplit("/", 1)[0]
        if not item.endswith("}"):
            continue
        collection, address = item.rsplit("/", 1)
        own = not forward.is_item and (
            collection == forward.path or collection.rsplit("/", 1)[-1] == noun
        )
        if not own and item != parent:
            continue
        param = address[1:-1]
        source = set() if param in forward.carried else {param}
        found = _bind(forward, tool, source, "resume")
        if found is not None:
            return found
    return None


def resumptions(tools: dict[str, PublicTool]) -> dict[str, Resumption]:
    """Forward tool name -> its resumption, for every derivable pair within `tools`."""
    out = {}
    for spec in tools.values():
        found = resumption_for(spec, tools)
        if found is not None:
            out[spec.name] = found
    return out
