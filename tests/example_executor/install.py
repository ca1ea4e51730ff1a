"""Install a plugin distribution for real: files plus a .dist-info with entry_points.txt.

`importlib.metadata` finds a distribution by its .dist-info folder on sys.path, which is
exactly what pip leaves behind; the tests make one in a temporary folder.
"""
from __future__ import annotations

import importlib
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).parent


def install_distribution(site: Path, name: str, version: str, entry_points: dict[str, str], modules: dict[str, str] | None = None, packages: tuple[str, ...] = ()) -> Path:
    """Write `modules` (file name -> source) and copy `packages` from here into `site`, with metadata."""
    site.mkdir(parents=True, exist_ok=True)
    for filename, source in (modules or {}).items():
        (site / filename).write_text(source)
    for package in packages:
        shutil.copytree(HERE / package, site / package, dirs_exist_ok=True)
    dist_info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    dist_info.mkdir(exist_ok=True)
    (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    lines = ["[squall]"] + [f"{k} = {v}" for k, v in entry_points.items()]
    (dist_info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    return site


def install_example(site: Path) -> Path:
    """The example executor package, as `pip install tests/example_executor` would leave it."""
    return install_distribution(
        site, "squall-example-executor", "0.3.1", {"example": "squall_example_executor"}, packages=("squall_example_executor",)
    )


def activate(site: Path) -> None:
    sys.path.insert(0, str(site))
    importlib.invalidate_caches()


def deactivate(site: Path, modules: tuple[str, ...]) -> None:
    if str(site) in sys.path:
        sys.path.remove(str(site))
    for m in modules:
        sys.modules.pop(m, None)
    importlib.invalidate_caches()
