"""The architecture holds: one-way layers, no import cycles, no project import hidden in a
function (apart from the reasons listed), no library module over 400 lines.

The layers, bottom to top (docs/architecture.md): contract (and seeding), services (the
domain services, their kit, the proxy), core (specs, catalog, env, oracles, runtime, the
domains' workflows), agents, evaluation, harness (CLI, sweep, runner, executors).
"""

from __future__ import annotations

from .import_graph import LAYERS, ROOT, cycles, imports, layer_of, modules, upward

EDGES = imports()
MAX_LINES = 400

#: (importer, imported) -> why the import waits until it is needed.
LAZY_ALLOWED = {
    ("undobench_gym.runtime", "undobench_gym.runtime.docker"): "the `docker` extra",
    ("undobench_gym.agents.factory", "undobench_gym.agents.mcp.specs"): "the `mcp` extra",
    ("undobench_gym.runner", "undobench_gym.evaluation.report"): "the `eval` extra",
    ("undobench_gym", "undobench_gym.registration"): "ENV_IDS in a stack process (no Gymnasium)",
}


def _is_cli_handler(module: str) -> bool:
    """CLI command handlers import what their command needs (start-up time of --help)."""
    return module == "undobench_gym.cli" or module.startswith("undobench_gym.cli.")


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


def test_no_library_module_is_over_400_lines() -> None:
    long = {
        str(path.relative_to(ROOT)): n
        for path in modules().values()
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def test_the_graph_reader_sees_real_edges() -> None:
    """The checks above are only as good as the graph: known edges must be in it."""
    pairs = {(e.importer, e.imported) for e in EDGES}
    assert ("undobench_gym.env", "undobench_gym.boundaries") in pairs
    assert ("undobench_gym.envs._service.kit", "undobench_gym.contract") in pairs
    assert ("undobench_gym.proxies.fault", "undobench_gym.contract") in pairs
    assert layer_of("undobench_gym.envs.payments.workflows") == "core"
    assert layer_of("undobench_gym.envs.payments.service") == "services"
