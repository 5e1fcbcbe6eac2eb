"""The one conversion of the toolkit's objects to JSON values (dataclasses, pydantic models, objects
with ``to_json``, mappings, sequences, sets in a stable order, paths).

``strict`` (for cache keys and fingerprints) refuses any other object, whose text could differ from
run to run; otherwise (reports, summaries) such an object becomes its ``str``."""

from __future__ import annotations

import dataclasses
from pathlib import PurePath
from typing import Any, Mapping, TypeAlias, overload

# A value ``json.dumps`` writes as it is.
JSONValue: TypeAlias = "None | bool | int | float | str | list[JSONValue] | dict[str, JSONValue]"


@overload
def jsonable(value: Mapping[Any, object], *, strict: bool = False) -> dict[str, JSONValue]: ...
@overload
def jsonable(value: object, *, strict: bool = False) -> JSONValue: ...
def jsonable(value: object, *, strict: bool = False) -> JSONValue:
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, PurePath):
        return str(value)
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if hasattr(value, "to_json"):
        return jsonable(value.to_json(), strict=strict)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name), strict=strict) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): jsonable(v, strict=strict) for k, v in value.items()}
    if isinstance(value, (set, frozenset)):
        return [jsonable(v, strict=strict) for v in sorted(value, key=repr)]
    if isinstance(value, (list, tuple)):
        return [jsonable(v, strict=strict) for v in value]
    if strict:
        raise TypeError(f"cannot fingerprint a {type(value).__name__}")
    return str(value)
