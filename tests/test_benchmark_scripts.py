"""Every script of ``benchmarks/`` still imports: a script whose import broke in a refactor
(a function renamed or removed beneath it) stops measuring, and the figure it made stays in the
docs unmeasured. Importing runs each script's imports and definitions, not its measurement
(they all measure under ``if __name__ == "__main__"``)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
SCRIPTS = sorted(path for path in BENCHMARKS.glob("*.py") if not path.name.startswith("_"))


def test_the_benchmarks_are_found() -> None:
    assert len(SCRIPTS) >= 30 and BENCHMARKS / "bench_trainer.py" in SCRIPTS


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.stem)
def test_a_benchmark_script_imports(script: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # their shared ``_common``
    name = f"benchmark_{script.stem}"
    spec = importlib.util.spec_from_file_location(name, script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)  # dataclasses look their module up
    spec.loader.exec_module(module)
    assert hasattr(module, "main") or "__main__" in script.read_text(), script.name
