"""DAGs and the CLI import the light core; it must never pull in pyspark."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import widehouse

HEAVY_PACKAGES = ("widehouse.spark",)


def light_modules() -> list[str]:
    names = []
    for info in pkgutil.walk_packages(widehouse.__path__, "widehouse."):
        if info.name.startswith(HEAVY_PACKAGES) or info.name == "widehouse.__main__":
            continue
        names.append(info.name)
    return names


def test_light_core_never_imports_pyspark() -> None:
    modules = light_modules()
    assert "widehouse.settings" in modules and "widehouse.cli" in modules
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "bad = sorted(m for m in sys.modules if m == 'pyspark' or m.startswith('pyspark.'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"pyspark imported by the light core: {out.stdout}"
