"""The architecture holds: one-way layers, no import cycles, no project import hidden in a
function (apart from the reasons listed), no library module over 600 lines (a guard against
a module holding two ideas, not a size to split at).

The layers, bottom to top (docs/architecture.md), each a folder of `undobench_gym/`:
contract (the wire contract, specs, seeding, errors), services (the domain services with
their workflows, the proxy, the image), core (catalog, env, oracles, runtime, MCP front
end), agents, evaluation, harness (CLI, sweep, runner, executors, training integrations).
"""

from __future__ import annotations

from .import_graph import LAYERS, ROOT, cycles, imports, layer_of, modules, upward

EDGES = imports()
MAX_LINES = 600

#: (importer, imported) -> why the import waits until it is needed.
LAZY_ALLOWED = {
    ("undobench_gym.core.runtime", "undobench_gym.core.runtime.docker"): "the `docker` extra",
    ("undobench_gym.agents.factory", "undobench_gym.agents.mcp.specs"): "the `mcp` extra",
    ("undobench_gym.harness.runner", "undobench_gym.evaluation.report"): "the `eval` extra",
    (
        "undobench_gym",
        "undobench_gym.core.registration",
    ): "ENV_IDS in a stack process (no Gymnasium)",
    # A spawned worker starts its first stack before it loads anything else: that overlap
    # is the module's whole point, so its entry point imports the rest only afterwards.
    (
        "undobench_gym.harness.executors.prestart",
        "undobench_gym.core.runtime",
    ): "a worker's first stack starts before the worker loads",
    (
        "undobench_gym.harness.executors.prestart",
        "undobench_gym.harness.executors.lanes",
    ): "a worker's first stack starts before the worker loads",
    (
        "undobench_gym.harness.executors.prestart",
        "undobench_gym.core.runtime.warm",
    ): "a worker's first stack starts before the worker loads",
}


def _is_cli_handler(module: str) -> bool:
    """CLI command handlers import what their command needs (start-up time of --help)."""
    return module == "undobench_gym.harness.cli" or module.startswith("undobench_gym.harness.cli.")


def test_every_module_has_a_layer() -> None:
    assert {layer_of(m) for m in modules()} <= set(LAYERS)


def test_imports_only_go_down_the_layers() -> None:
    found = [
        f"{e.importer}:{e.line} ({layer_of(e.importer)}) imports {e.imported} "
        f"({layer_of(e.imported)})"
        for e in upward(EDGES)
    ]
    assert not found, "upward imports:\n" + "\n".join(found)


def test_there_is_no_import_cycle() -> None:
    assert not cycles(EDGES)


def test_no_project_import_hides_in_a_function() -> None:
    hidden = [
        f"{e.importer}:{e.line} imports {e.imported}"
        for e in EDGES
        if e.in_function
        and not _is_cli_handler(e.importer)
        and (e.importer, e.imported) not in LAZY_ALLOWED
    ]
    assert not hidden, "imports inside functions:\n" + "\n".join(hidden)


def test_no_library_module_is_over_600_lines() -> None:
    long = {
        str(path.relative_to(ROOT)): n
        for path in modules().values()
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def test_the_graph_reader_sees_real_edges() -> None:
    """The checks above are only as good as the graph: known edges must be in it."""
    pairs = {(e.importer, e.imported) for e in EDGES}
    assert ("undobench_gym.core.env", "undobench_gym.core.boundaries") in pairs
    assert ("undobench_gym.services.domains._service.kit", "undobench_gym.contract") in pairs
    assert ("undobench_gym.services.proxy.fault", "undobench_gym.contract") in pairs
    # A domain's task specs sit with its service; both build on the contract's specs.
    assert layer_of("undobench_gym.services.domains.payments.workflows") == "services"
    assert layer_of("undobench_gym.services.domains.payments.service") == "services"
    assert layer_of("undobench_gym.contract.specs") == "contract"
    assert layer_of("undobench_gym.harness.cli.run") == "harness"
