"""No import cycles inside the web app, lazy ones included.

Every `import` of every sessions_app and ctxweb module is read with `ast`, those inside
functions too (a lazy import only hides a cycle until the function runs); imports under
`if TYPE_CHECKING:` are left out, since they never run. A cycle fails with its path.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("sessions_app", "ctxweb")


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement that can run, at any depth."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _is_type_checking(node):
            for other in node.orelse:
                yield from _imports(other)
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        yield from _imports(node)


def _targets(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules `module` imports (a submodule named in `from x import y` too)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    targets: set[str] = set()
    for node in _imports(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            names = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names
            ]
        targets.update(name for name in names if name in modules and name != module)
    return targets


def _submodule(base: str, name: str, modules: dict[str, Path]) -> str:
    """`from base import name`: the submodule `base.name` when there is one, else `base`."""
    return f"{base}.{name}" if f"{base}.{name}" in modules else base


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph as a path of modules, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                return [*stack[stack.index(target) :], target]
            if target not in state and (found := visit(target)) is not None:
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)) is not None:
            return found
    return None


def test_the_reader_sees_lazy_and_relative_imports(tmp_path: Path) -> None:
    source = "from .b import x\n\ndef f():\n    from . import c\n    import pkg.d\n"
    (tmp_path / "a.py").write_text(source)
    modules = {"pkg.a": tmp_path / "a.py", "pkg.b": Path(), "pkg.c": Path(), "pkg.d": Path()}
    assert _targets("pkg.a", tmp_path / "a.py", modules) == {"pkg.b", "pkg.c", "pkg.d"}
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_the_web_app_has_no_import_cycle() -> None:
    modules = _modules()
    graph = {name: _targets(name, path, modules) for name, path in modules.items()}
    cycle = _cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])
