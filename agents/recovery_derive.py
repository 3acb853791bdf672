"""Derivation rules: which read-only tool can observe a mutation's effect (B5-P, B6) and
which compensating tool undoes a committed step (B3), from the tool catalogue alone.

Nothing here is a hand-written per-tool table: the rules read the REST shape of the routes
(method, path, path/query/body parameters) and the `x-undobench` metadata every route
declares (read_only, effect_class, identity, compensation). docs/methods.md states the rules
and lists what they derive for every workflow.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from undobench_gym.catalog import ToolSpec

from .recovery_common import canonical

#: The ranks of a verifier, best first.
SAME_COLLECTION, FILTERED_LIST, ADDRESSED_ITEM = 0, 1, 2
#: Effect classes that leave a record a compensating action offsets (a refund, a retraction).
OFFSETTABLE = ("additive", "irreversible_send")
MAX_VERIFIERS = 2
SET_ORDER = (ADDRESSED_ITEM, SAME_COLLECTION, FILTERED_LIST)
RECORD_ORDER = (SAME_COLLECTION, FILTERED_LIST, ADDRESSED_ITEM)


def _is_item(spec: ToolSpec) -> bool:
    """A route that addresses one resource: its path ends in a path parameter."""
    return spec.path.rstrip("/").endswith("}")


def required_params(spec: ToolSpec) -> set[str]:
    return set(spec.parameters.get("required", []))


def _carried(spec: ToolSpec) -> set[str]:
    return set(spec.path_params) | set(spec.query_params) | set(spec.body_params)


@dataclass(frozen=True)
class Verifier:
    """A read-only tool that can show whether a mutating call's effect exists: call it with
    the mutating call's arguments of the same names (`binds`), then look for a row that
    carries the call's identity values."""

    tool: str
    binds: tuple[str, ...]
    rank: int

    def arguments(self, call_args: dict[str, Any], required: set[str]) -> dict[str, Any] | None:
        args = {n: call_args[n] for n in self.binds if call_args.get(n) is not None}
        return args if required <= set(args) else None


def verifiers_for(mutating: ToolSpec, tools: dict[str, ToolSpec]) -> list[Verifier]:
    """The read-only tools (among `tools`) that can observe `mutating`'s effect, best first.

    A read-only GET qualifies when every parameter it requires is one the mutating call
    carries (same name) and it is one of:
    - rank 0, the same collection: it lists the very collection the call writes to;
    - rank 1, a filtered list: a collection that takes at least one of the call's identity
      fields as a filter; for a `set` effect it must leave an identity field to compare in
      the rows (a row in another collection that merely names the resource shows nothing
      about a field being set);
    - rank 2, the addressed item: it reads one resource, takes at least one identity field
      as its address and leaves at least one to compare (reading back the resource a call
      acted on shows nothing when the address is all the identity there is).
    A `set` changes the addressed resource, so its order is item, collection, list; any
    other effect creates a record, so collection, list, item. When the same collection
    exists it is the only one kept for a record-creating effect: it is authoritative.
    """
    if mutating.read_only or not mutating.identity:
        return []
    identity, carried = set(mutating.identity), _carried(mutating)
    is_set = mutating.effect_class == "set"
    found: list[Verifier] = []
    for spec in tools.values():
        if not spec.read_only or spec.method not in ("GET", "HEAD") or spec.name == mutating.name:
            continue
        if not required_params(spec) <= carried:
            continue
        binds = tuple(p for p in (*spec.path_params, *spec.query_params) if p in carried)
        bound = identity & set(binds)
        if spec.path == mutating.path and not _is_item(spec):
            rank = SAME_COLLECTION
        elif not bound or ((is_set or _is_item(spec)) and not identity - bound):
            continue
        else:
            rank = ADDRESSED_ITEM if _is_item(spec) else FILTERED_LIST
        found.append(Verifier(spec.name, binds, rank))
    if not is_set and any(v.rank == SAME_COLLECTION for v in found):
        found = [v for v in found if v.rank == SAME_COLLECTION]
    order = SET_ORDER if is_set else RECORD_ORDER
    found.sort(key=lambda v: (order.index(v.rank), v.tool))
    return found[:MAX_VERIFIERS]


def intent_values(mutating: ToolSpec, call_args: dict[str, Any]) -> dict[str, Any]:
    """The call's effect identity: its identity fields with the values it sends."""
    return {f: call_args[f] for f in mutating.identity if call_args.get(f) is not None}


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


def row_matches(row: dict[str, Any], values: dict[str, Any]) -> bool:
    """Every identity value is in the row: under its own name when the row has that field,
    else as the value of some top-level field (services rename: `memo` is stored as `ref`,
    the addressed id comes back as `id`)."""
    if not values:
        return False
    flat = {canonical(v) for v in row.values()}
    for name, value in values.items():
        want = canonical(value)
        if name in row:
            if canonical(row[name]) != want:
                return False
        elif want not in flat:
            return False
    return True


def find_effect(body: Any, values: dict[str, Any]) -> dict[str, Any] | None:
    return next((r for r in rows_of(body) if row_matches(r, values)), None)


def singular(word: str) -> str:
    """English plural to singular for REST collection names (charges, policies, pages)."""
    if word.endswith("ies"):
        return word[:-3] + "y"
    if word.endswith(("sses", "xes", "ches", "shes")):
        return word[:-2]
    return word[:-1] if word.endswith("s") else word


@dataclass(frozen=True)
class Compensation:
    """How to undo one committed forward call: the compensating tool and where each of its
    arguments comes from (the forward response's `id`, a forward field of the same name,
    or, for required free text such as a reason, a note saying it is a saga rollback)."""

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


def _bind(forward: ToolSpec, comp: ToolSpec, from_id: set[str], rule: str) -> Compensation | None:
    """Where each argument of `comp` comes from; None when an identifying one has no source."""
    needed = required_params(comp) | set(comp.identity) | set(comp.path_params)
    by_name, notes = [], []
    for name in sorted(needed - from_id):
        if name in comp.identity or name in comp.path_params:
            if name not in _carried(forward):
                return None  # it names something the forward call does not determine
            by_name.append(name)
        elif comp.parameters.get("properties", {}).get(name, {}).get("type") == "string":
            notes.append(name)  # required free text (a reason, a message): says what this is
        else:
            return None
    return Compensation(
        forward.name, comp.name, tuple(sorted(from_id)), tuple(by_name), tuple(notes), rule
    )


def compensation_for(forward: ToolSpec, tools: dict[str, ToolSpec]) -> Compensation | None:
    """The compensating tool (one marked `compensation`, among `tools`) that undoes `forward`.

    Rule 1 (REST delete): `forward` POSTs to a collection and the compensating tool is a
    DELETE of one item of that same collection (`<path>/{param}`): a created entry is
    removed. Rule 2 (offsetting record): `forward` POSTs to a collection of `<noun>s` and has
    an additive or irreversible-send effect, and the compensating tool identifies its target
    by `<noun>_id` (or `<noun>`), filled from the forward response's `id`: a charge is
    offset by a refund of that charge, an enrollment by unenrolling it, a page by retracting
    it. A `create_unique` effect is undone only by rule 1 (reopening an opened incident is
    not undoing its creation), and `set` effects by neither (undoing one needs the value
    it replaced, which only a read before the write would give).
    """
    if forward.read_only or forward.compensation or forward.method != "POST":
        return None
    if _is_item(forward):
        return None
    noun = singular(forward.path.rstrip("/").rsplit("/", 1)[-1])
    for comp in sorted(tools.values(), key=lambda t: t.name):
        if not comp.compensation or comp.name == forward.name:
            continue
        tail = comp.path[len(forward.path) :]
        if (
            comp.method == "DELETE"
            and comp.path.startswith(forward.path + "/{")
            and (tail.count("/") == 1 and tail.endswith("}"))
        ):
            param = tail[2:-1]
            source = set() if param in _carried(forward) else {param}
            found = _bind(forward, comp, source, "rest-delete")
        elif forward.effect_class in OFFSETTABLE:
            names = required_params(comp) | set(comp.identity)
            ids = {n for n in (f"{noun}_id", noun) if n in names}
            found = _bind(forward, comp, ids, "offsetting-record") if ids else None
        else:
            found = None
        if found is not None:
            return found
    return None


def compensations(tools: dict[str, ToolSpec]) -> dict[str, Compensation]:
    """Forward tool name -> its compensation, for every derivable pair within `tools`."""
    out = {}
    for spec in tools.values():
        comp = compensation_for(spec, tools)
        if comp is not None:
            out[spec.name] = comp
    return out
