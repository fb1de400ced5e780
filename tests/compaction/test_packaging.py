"""`import compaction` needs only the engine's own dependencies: the Anthropic and OpenAI
SDKs and tree-sitter are extras, imported where they are used."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from compaction import AnthropicSummarizer, OpenAISummarizer

ROOT = Path(__file__).resolve().parents[2]

WITHOUT_EXTRAS = textwrap.dedent(
    """
    import sys

    BLOCKED = ("anthropic", "openai", "tree_sitter")

    class Blocker:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0].startswith(BLOCKED):
                raise ImportError(f"{name} is blocked for this test")
            return None

    sys.meta_path.insert(0, Blocker())

    import compaction
    from tests.support.histories import exchange, synthetic_history

    source = "class Parser:\\n    def parse(self):\\n        return 1\\n" * 40
    history = synthetic_history(120) + [
        *exchange("r1", "Read", {"file_path": "src/parser.py"}, source),
    ]
    policy = compaction.Policy(context_limit=4000, summary_input_limit=2000)
    result = compaction.compact_messages(history, policy, force=True)
    assert result.compacted, result.reason
    assert result.summarizer == "extractive"
    assert "class Parser" in compaction.fold_files({"src/parser.py": source})
    truncated = compaction.smart_truncate(history, compaction.Policy.preset("smart-truncation"))
    assert truncated.messages
    for name, cls in (
        ("openai", compaction.OpenAISummarizer),
        ("anthropic", compaction.AnthropicSummarizer),
    ):
        try:
            cls("some-model", api_key="k")
        except ImportError as error:
            print(error)
        else:
            raise AssertionError(f"{name} was importable")
    loaded = sorted(m for m in sys.modules if m.split(".")[0].startswith(BLOCKED))
    assert loaded == [], loaded
    print("ok")
    """
)


def test_compaction_works_without_the_sdks_and_tree_sitter():
    run = subprocess.run(
        [sys.executable, "-c", WITHOUT_EXTRAS],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )

    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[-1] == "ok"
    assert "pip install 'ctxweb[openai]'" in lines[0]
    assert "pip install 'ctxweb[anthropic]'" in lines[1]


@pytest.mark.parametrize(
    ("cls", "module"), [(OpenAISummarizer, "openai"), (AnthropicSummarizer, "anthropic")]
)
def test_a_missing_sdk_names_the_extra_to_install(monkeypatch, cls, module):
    monkeypatch.setitem(sys.modules, module, None)  # as if it were not installed

    with pytest.raises(ImportError) as caught:
        cls("some-model", api_key="k")

    message = str(caught.value)
    assert cls.__name__ in message
    assert f"pip install 'ctxweb[{module}]'" in message
    assert caught.value.name == module


def test_importing_compaction_does_not_import_the_sdks():
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, compaction; "
            "print(sorted(m for m in ('anthropic', 'openai', 'tree_sitter') if m in sys.modules))",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"
