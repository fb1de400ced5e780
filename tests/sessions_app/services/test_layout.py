"""services/ is one sub-package per concept (docs/architecture.md#layers, issue 24 item 6):
the folder shows the architecture instead of one flat room of modules."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Final

SERVICES: Final = Path(__file__).resolve().parents[3] / "sessions_app" / "services"
#: The only modules at the top: the package itself and the one error tree.
TOP_MODULES: Final = {"__init__.py", "errors.py"}
PACKAGES: Final = {"sessions", "context", "compacting", "proxying", "background", "importing"}


def test_the_top_holds_only_the_error_tree_and_sub_packages() -> None:
    modules = {path.name for path in SERVICES.glob("*.py")}
    packages = {path.parent.name for path in SERVICES.glob("*/__init__.py")}
    assert modules == TOP_MODULES
    assert packages >= PACKAGES


def test_every_sub_package_says_what_it_holds() -> None:
    for init in sorted(SERVICES.glob("*/__init__.py")):
        docstring = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
        assert docstring, f"{init} needs a docstring naming its concept"
