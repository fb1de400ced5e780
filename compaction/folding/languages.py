"""Which tree-sitter grammar folds which file, and which of its nodes are outline entries.

A `LanguageSpec` names, per grammar: the nodes that are classes or interfaces (listed on
their own line, their bodies never entered), the nodes that are functions, and the
"transparent" nodes (namespaces, modules, export wrappers, bodies of those) whose children
are searched as if they were top level. Grammars load lazily, once; parsers are cached per
thread because a tree-sitter Parser must not be shared between threads.
"""

from __future__ import annotations

import importlib
import os
import threading
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:  # imported where it is used: tree-sitter is the optional `folding` extra
    import tree_sitter

__all__ = ["LANGUAGES", "LanguageSpec", "language_for_path", "parser_for"]


@dataclass(frozen=True, eq=False)
class LanguageSpec:
    """How to outline one language: grammar, and node types by role."""

    name: str
    module: str
    function: str
    containers: dict[str, str]  # node type -> label shown ("class", "interface", ...)
    functions: frozenset[str]
    transparent: frozenset[str] = frozenset()
    extensions: tuple[str, ...] = field(default=())


_JS_CONTAINERS: Final = {"class_declaration": "class"}
_JS_FUNCTIONS: Final = frozenset({"function_declaration", "generator_function_declaration"})
_JS_TRANSPARENT: Final = frozenset({"export_statement"})
_TS_CONTAINERS: Final = {
    **_JS_CONTAINERS,
    "abstract_class_declaration": "class",
    "interface_declaration": "interface",
    "enum_declaration": "enum",
}
_TS_FUNCTIONS: Final = _JS_FUNCTIONS | {"function_signature"}
_TS_TRANSPARENT: Final = _JS_TRANSPARENT | {
    "expression_statement",
    "internal_module",
    "module",
    "ambient_declaration",
    "statement_block",
}
_C_CONTAINERS: Final = {
    "struct_specifier": "struct",
    "union_specifier": "union",
    "enum_specifier": "enum",
}
_CPP_CONTAINERS: Final = {**_C_CONTAINERS, "class_specifier": "class"}
_CPP_TRANSPARENT: Final = frozenset(
    {"namespace_definition", "declaration_list", "template_declaration", "linkage_specification"}
)

LANGUAGES: Final[tuple[LanguageSpec, ...]] = (
    LanguageSpec(
        name="python",
        module="tree_sitter_python",
        function="language",
        containers={"class_definition": "class"},
        functions=frozenset({"function_definition"}),
        transparent=frozenset({"decorated_definition"}),
        extensions=(".py", ".pyi", ".pyw"),
    ),
    LanguageSpec(
        name="javascript",
        module="tree_sitter_javascript",
        function="language",
        containers=_JS_CONTAINERS,
        functions=_JS_FUNCTIONS,
        transparent=_JS_TRANSPARENT,
        extensions=(".js", ".jsx", ".mjs", ".cjs"),
    ),
    LanguageSpec(
        name="typescript",
        module="tree_sitter_typescript",
        function="language_typescript",
        containers=_TS_CONTAINERS,
        functions=_TS_FUNCTIONS,
        transparent=_TS_TRANSPARENT,
        extensions=(".ts", ".mts", ".cts"),
    ),
    LanguageSpec(
        name="tsx",
        module="tree_sitter_typescript",
        function="language_tsx",
        containers=_TS_CONTAINERS,
        functions=_TS_FUNCTIONS,
        transparent=_TS_TRANSPARENT,
        extensions=(".tsx",),
    ),
    LanguageSpec(
        name="go",
        module="tree_sitter_go",
        function="language",
        containers={},  # type declarations are resolved by outline._go_types
        functions=frozenset({"function_declaration", "method_declaration"}),
        extensions=(".go",),
    ),
    LanguageSpec(
        name="rust",
        module="tree_sitter_rust",
        function="language",
        containers={
            "struct_item": "struct",
            "enum_item": "enum",
            "union_item": "union",
            "trait_item": "trait",
            "impl_item": "impl",
        },
        functions=frozenset({"function_item", "function_signature_item"}),
        transparent=frozenset({"mod_item", "declaration_list", "foreign_mod_item"}),
        extensions=(".rs",),
    ),
    LanguageSpec(
        name="java",
        module="tree_sitter_java",
        function="language",
        containers={
            "class_declaration": "class",
            "interface_declaration": "interface",
            "enum_declaration": "enum",
            "record_declaration": "record",
            "annotation_type_declaration": "@interface",
        },
        functions=frozenset(),
        extensions=(".java",),
    ),
    LanguageSpec(
        name="c",
        module="tree_sitter_c",
        function="language",
        containers=_C_CONTAINERS,
        functions=frozenset({"function_definition"}),
        transparent=frozenset({"type_definition", "declaration", "linkage_specification"}),
        extensions=(".c", ".h"),
    ),
    LanguageSpec(
        name="cpp",
        module="tree_sitter_cpp",
        function="language",
        containers=_CPP_CONTAINERS,
        functions=frozenset({"function_definition"}),
        transparent=_CPP_TRANSPARENT | {"type_definition", "declaration"},
        extensions=(".cpp", ".cc", ".cxx", ".c++", ".hpp", ".hh", ".hxx", ".h++", ".ipp"),
    ),
    LanguageSpec(
        name="csharp",
        module="tree_sitter_c_sharp",
        function="language",
        containers={
            "class_declaration": "class",
            "interface_declaration": "interface",
            "struct_declaration": "struct",
            "enum_declaration": "enum",
            "record_declaration": "record",
        },
        functions=frozenset({"local_function_statement"}),
        transparent=frozenset(
            {
                "namespace_declaration",
                "file_scoped_namespace_declaration",
                "declaration_list",
                "global_statement",
            }
        ),
        extensions=(".cs",),
    ),
    LanguageSpec(
        name="ruby",
        module="tree_sitter_ruby",
        function="language",
        containers={"class": "class"},
        functions=frozenset({"method", "singleton_method"}),
        transparent=frozenset({"module", "body_statement"}),
        extensions=(".rb", ".rake", ".gemspec", ".ru"),
    ),
    LanguageSpec(
        name="php",
        module="tree_sitter_php",
        function="language_php",
        containers={
            "class_declaration": "class",
            "interface_declaration": "interface",
            "trait_declaration": "trait",
            "enum_declaration": "enum",
        },
        functions=frozenset({"function_definition"}),
        transparent=frozenset({"namespace_definition", "compound_statement"}),
        extensions=(".php", ".phtml", ".php8"),
    ),
)

_BY_EXTENSION: Final = {ext: spec for spec in LANGUAGES for ext in spec.extensions}
_local = threading.local()


def language_for_path(path: str) -> LanguageSpec | None:
    """The language of a file by its extension (case-insensitive), or None if unknown."""
    extension = os.path.splitext(path)[1].lower()
    return _BY_EXTENSION.get(extension)


@cache
def _language(module: str, function: str) -> tree_sitter.Language:
    import tree_sitter

    grammar = importlib.import_module(module)
    return tree_sitter.Language(getattr(grammar, function)())


def parser_for(spec: LanguageSpec) -> tree_sitter.Parser:
    """This thread's parser for `spec` (created once per thread and language).

    Raises ImportError when tree-sitter or the grammar is not installed.
    """
    import tree_sitter

    parsers: dict[str, tree_sitter.Parser] | None = getattr(_local, "parsers", None)
    if parsers is None:
        parsers = _local.parsers = {}
    parser = parsers.get(spec.name)
    if parser is None:
        parser = parsers[spec.name] = tree_sitter.Parser(_language(spec.module, spec.function))
    return parser
