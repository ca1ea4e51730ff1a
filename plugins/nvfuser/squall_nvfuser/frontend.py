"""Which nvFuser this plugin runs on: the `nvfuser_direct` Python frontend, in a stated version range.

nvFuser ships two Python frontends. The legacy one (`import nvfuser`) was removed upstream
in February 2026 (NVIDIA/Fuser 3925c6fd, "Remove legacy bindings"); the wheels published
since (e.g. `nvfuser-cu126-torch210` 0.2.36) hold only `nvfuser_direct`. This plugin
targets `nvfuser_direct` alone (README: "Which nvFuser").

`frontend_availability()` decides, without importing nvFuser's C++ extension, whether the
installed nvFuser is one this plugin was checked against; `load()` imports it.
"""
from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import re
from types import ModuleType

from squall.extend import Availability

__all__ = [
    "MODULE",
    "LEGACY_MODULE",
    "MIN_VERSION",
    "BELOW_VERSION",
    "VERIFIED_WITH",
    "INSTALL_HINT",
    "version_tuple",
    "installed_version",
    "frontend_availability",
    "load",
]

MODULE = "nvfuser_direct"
LEGACY_MODULE = "nvfuser"
# The supported range, [MIN_VERSION, BELOW_VERSION): every translator was run against the
# release named in VERIFIED_WITH (plugins/nvfuser/verify/verify.sh); nvFuser's Python API
# changes between minor releases, so the next minor is not assumed to be compatible.
MIN_VERSION = "0.2.36"
BELOW_VERSION = "0.3"
VERIFIED_WITH = "nvfuser-cu126-torch210 0.2.36.dev20260301 (torch 2.10.0, Python 3.12)"
INSTALL_HINT = "pip install the nvFuser wheel built for your CUDA and torch, e.g. nvfuser-cu126-torch210"


def version_tuple(version: str) -> tuple[int, ...]:
    """The release numbers of a version string: '0.2.36.dev20260301' -> (0, 2, 36); '0.2.36+git1a2b' -> (0, 2, 36)."""
    found = re.match(r"\s*v?(\d+(?:\.\d+)*)", version)
    if not found:
        return ()
    return tuple(int(n) for n in found.group(1).split("."))


def _found(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def installed_version(module: str = MODULE) -> str:
    """The version of the distribution that provides `module` ("" when no distribution says).

    Read from package metadata (the wheel is named per CUDA and torch, e.g.
    nvfuser-cu126-torch210), so nvFuser's extension is not imported.
    """
    for dist in importlib.metadata.packages_distributions().get(module, []):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return ""


def frontend_availability(*, has_direct: bool | None = None, has_legacy: bool | None = None, version: str | None = None) -> Availability:
    """Whether the installed nvFuser is a frontend and version this plugin supports, and if not, why.

    The keyword arguments replace what is looked up here (for tests); None looks it up.
    """
    has_direct = _found(MODULE) if has_direct is None else has_direct
    if not has_direct:
        has_legacy = _found(LEGACY_MODULE) if has_legacy is None else has_legacy
        if has_legacy:
            legacy = installed_version(LEGACY_MODULE) or "(unknown version)"
            return Availability(
                False,
                f"only nvFuser's legacy frontend '{LEGACY_MODULE}' is installed ({legacy}); this executor uses "
                f"'{MODULE}' (nvFuser >= {MIN_VERSION}, < {BELOW_VERSION}); {INSTALL_HINT}",
            )
        return Availability(False, f"library '{MODULE}' is not installed; {INSTALL_HINT}")
    version = installed_version() if version is None else version
    if not version:
        # a source build on sys.path has no distribution metadata: ask the module itself
        version = str(getattr(load(), "__version__", ""))
    found = version_tuple(version)
    if not found:
        return Availability(False, f"cannot tell the version of '{MODULE}' ({version!r}); supported: >= {MIN_VERSION}, < {BELOW_VERSION}")
    if found < version_tuple(MIN_VERSION):
        return Availability(False, f"{MODULE} {version} is older than the oldest supported ({MIN_VERSION})")
    if found >= version_tuple(BELOW_VERSION):
        return Availability(False, f"{MODULE} {version} is newer than supported (< {BELOW_VERSION}; checked with {VERIFIED_WITH})")
    return Availability(True)


def load() -> ModuleType:
    """Import `nvfuser_direct` (nvFuser's extension and torch's CUDA libraries load here)."""
    return importlib.import_module(MODULE)
