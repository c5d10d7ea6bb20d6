"""A script of bench/ as a module, for the tests that run a benchmark small (bench/ is not a
package: its scripts import each other from their folder)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[2] / "bench"


def load(script: str) -> ModuleType:
    """``bench/<script>.py`` loaded once per process, as ``dupfilter_bench_<script>``."""
    name = f"dupfilter_bench_{script}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{script}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module
