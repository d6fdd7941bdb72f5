"""The shape of ``src/trustlab``: no import circles, no module over 600 lines.

The import graph is read from the source (AST), not by importing: every ``import``
and ``from ... import`` statement of a module counts, at module level and inside
functions, classes and ``if TYPE_CHECKING:`` blocks alike (a deferred import still
ties the two modules together; hiding a circle in a function does not remove it).
Relative imports are resolved against the module's package. ``from pkg import name``
is an edge to ``pkg.name`` when ``name`` is a submodule of ``pkg``, else to ``pkg``.

Packages: an edge to a package ``pkg`` (its ``__init__``) means "this module needs
whatever ``pkg/__init__`` re-exports". A package's ``__init__`` importing its own
submodules only re-exports them, so those edges (from ``pkg`` to ``pkg.sub...``) are
left out: otherwise every submodule that reads a name through its package, or any
module of the package imported by a sibling that goes through ``pkg``, would close a
false circle with its own ``__init__``. Every other edge of an ``__init__`` (to
modules outside the package) counts. A circle is a strongly connected component of
more than one module; the failure message lists one cycle through each.

References
----------
Tarjan. "Depth-First Search and Linear Graph Algorithms". SIAM J. Comput. 1972
(strongly connected components).
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "trustlab"
MAX_LINES = 600


def _modules() -> dict[str, Path]:
    """Dotted name -> file of every module of the package (``pkg/__init__.py`` is ``pkg``)."""
    out = {}
    for path in sorted((SRC / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def _resolve(module: str, path: Path, node: ast.ImportFrom) -> str:
    """The absolute module a ``from`` statement names (relative levels resolved)."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    if not _is_package(path):
        base = base[:-1]  # the package holding the module
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _target(name: str, modules: dict[str, Path]) -> str | None:
    """The longest prefix of ``name`` that is a module of the package."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def import_graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports (see the module docstring for the rules)."""
    modules = _modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        named: list[str] = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                named += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(module, path, node)
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    named.append(sub if sub in modules else base)
        for name in named:
            target = _target(name, modules)
            if target is None or target == module:
                continue
            if _is_package(path) and target.startswith(module + "."):
                continue  # a package re-exporting its own submodules
            graph[module].add(target)
    return graph


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components (iterative), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    comp.append(top)
                    if top == node:
                        break
                out.append(sorted(comp))
    return out


def _cycle(graph: dict[str, set[str]], comp: list[str]) -> list[str]:
    """One cycle through the first module of a component (breadth-first, shortest)."""
    inside = set(comp)
    start = comp[0]
    parent: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for node in frontier:
            for child in sorted(graph[node] & inside):
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(parent[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if child not in parent:
                    parent[child] = node
                    nxt.append(child)
        frontier = nxt
    return comp  # pragma: no cover - a component of size > 1 always has a cycle


def test_graph_reader_resolves_relative_and_submodule_imports():
    graph = import_graph()
    # `from trustlab.privacy import samplers`-style and relative imports land on modules
    assert "trustlab.privacy.samplers" in graph["trustlab.privacy.statistics"]
    assert "trustlab.errors" in graph["trustlab._validation"]
    # a package's own re-exports are not edges; its imports from elsewhere are
    assert not any(t.startswith("trustlab.privacy.") for t in graph["trustlab.privacy"])


def test_cycle_finder_reports_a_planted_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    comps = [c for c in strongly_connected(graph) if len(c) > 1]
    assert comps == [["a", "b", "c"]]
    assert _cycle(graph, comps[0]) == ["a", "b", "c", "a"]


def test_no_import_circles():
    graph = import_graph()
    circles = [c for c in strongly_connected(graph) if len(c) > 1]
    lines = [" -> ".join(_cycle(graph, c)) + f"  ({len(c)} modules)" for c in circles]
    assert not circles, "import circles (move what both sides need to a lower module):\n" + "\n".join(lines)


def test_no_module_over_600_lines():
    lengths = {
        str(path.relative_to(SRC)): len(path.read_text(encoding="utf-8").splitlines())
        for path in sorted((SRC / PACKAGE).rglob("*.py"))
    }
    too_long = {name: n for name, n in lengths.items() if n > MAX_LINES}
    assert not too_long, f"modules over {MAX_LINES} lines (split them by responsibility): {too_long}"
