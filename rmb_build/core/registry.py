"""One registry mechanism for every extension point (RM kinds, model families, query sources, benchmark
formats, embedded models, audit defect kinds).

An extension point is a ``Registry`` made once in its package's ``__init__``; an extension is one module
of that package that registers itself when imported (``@REGISTRY.register("name")`` on a class or
function, or ``REGISTRY.add("name", value)``). Adding one is adding that file: the registry imports the
package's modules (those not starting with ``_``) the first time it is asked, so nothing else lists them.

A lookup of an unknown name is an ``RMBError`` naming what was asked and what exists; a name registered
twice is a programming error (``ValueError``) raised at import.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Callable, Generic, Iterator, TypeVar

from rmb_build.core.errors import RMBError

T = TypeVar("T")


class Registry(Generic[T]):
    """Names to entries for one extension point. A package's entries are listed by name, whichever of
    its modules happened to be imported first; entries added by hand (no package) in the order added.

    ``what`` names an entry in messages ("RM kind"); ``package`` is the dotted package whose modules
    are the extensions (None: entries are added by whoever imports the registry)."""

    def __init__(self, what: str, package: str | None = None):
        self.what, self.package = what, package
        self._entries: dict[str, T] = {}
        self._discovered = package is None

    def add(self, name: str, entry: T) -> T:
        """Register ``entry`` as ``name``; returns it."""
        if name in self._entries:
            raise ValueError(f"{self.what} {name!r} registered twice")
        self._entries[name] = entry
        return entry

    def remove(self, name: str) -> T:
        """Forget ``name`` (a test's toy extension, registered for that test only); returns its entry."""
        return self._entries.pop(name)

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator form of ``add``: ``@REGISTRY.register("name")``."""

        def decorate(entry: T) -> T:
            return self.add(name, entry)

        return decorate

    def module_names(self) -> list[str]:
        """The package's extension modules, without importing them (cheap: for listings)."""
        if self.package is None:
            return []
        package = importlib.import_module(self.package)
        return sorted(m.name for m in pkgutil.iter_modules(package.__path__) if not m.name.startswith("_"))

    def discover(self) -> None:
        """Import every extension module of the package once (each registers itself)."""
        if self._discovered:
            return
        # Done only once all are imported: a module that lists the entries while it is being imported
        # imports the rest itself instead of seeing a part of them.
        for name in self.module_names():
            importlib.import_module(f"{self.package}.{name}")
        self._discovered = True

    def load(self, module: str) -> None:
        """Import one extension module (a lookup that must not import the others, e.g. heavy RM kinds)."""
        if self.package is not None and module in self.module_names():
            importlib.import_module(f"{self.package}.{module}")

    def get(self, name: str, *, field: str = "") -> T:
        """The entry named ``name``; unknown: one line naming ``field`` (e.g. ``--rm``) and the known names."""
        if name not in self._entries:
            self.discover()
        if name not in self._entries:
            where = f"{field} " if field else ""
            raise RMBError(f"{where}{name!r}: unknown {self.what} (known: {', '.join(self.names()) or 'none'})")
        return self._entries[name]

    def names(self) -> list[str]:
        return [name for name, _ in self.items()]

    def items(self) -> list[tuple[str, T]]:
        self.discover()
        entries = list(self._entries.items())
        return entries if self.package is None else sorted(entries, key=lambda e: e[0])

    def __contains__(self, name: object) -> bool:
        self.discover()
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())


__all__ = ["Registry"]
