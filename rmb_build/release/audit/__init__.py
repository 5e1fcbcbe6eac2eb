"""Audit a release: find every defect of each declared kind, report them, write a cleaned copy.

The package, one job a module: ``kind`` (a defect kind's declaration on the registry ``KINDS``, what a
check gets and gives), ``kinds/`` (one module per kind, ranked), ``packed`` (what outlives an item:
``Items``, ``Records``), ``stream`` (``StreamingAudit``, ``audit_release``: the read loop), ``report``
(``AuditReport``, the audit JSON) and ``fix`` (``fix_release``: ``rmb audit --fix``).

A defect kind names its fixer (``removes``: which items ``fix_release`` takes out, the named item unless
said otherwise). ``DEFECT_KINDS``, the report's counts (every kind, 0 when none was found), the card's
table and ``definitions()`` follow the declarations, in report order.

The audit streams: items come one at a time, and what outlives an item is packed into flat buffers
(``Items``: where it lives; ``Records``: the 16-byte digests of its texts a comparing kind needs), not
kept as Python objects; comparing kinds sort those records when the last item is in.

Texts are compared by ``rmb_build.core.text.identity`` (NFKC, case folded, whitespace collapsed), the
same rule ``build_sets`` merges equal answers by, except for ``duplicate_item`` (exact copies, as
stored); ``llm_name`` and a turn's ``language`` never count. A conversation is its turns'
(role, identity(content)) in order. Each entry has ``set``, ``uid``, ``file``, ``index`` (position
in the file), ``scenario``, ``detail``, and kind-specific fields.
"""

from __future__ import annotations

from rmb_build.release.audit.fix import fix_release
from rmb_build.release.audit.kind import (
    KINDS,
    AuditContext,
    Collector,
    DefectKind,
    defect,
    definitions,
    in_report_order,
    kind_names,
    removal_refs,
)
from rmb_build.release.audit.kinds.bad_turns import turn_problems
from rmb_build.release.audit.kinds.leaked_instruction import load_leak_patterns
from rmb_build.release.audit.packed import digest
from rmb_build.release.audit.report import SCHEMA_VERSION, AuditReport, defects_phrase
from rmb_build.release.audit.stream import StreamingAudit, audit_release

DEFECT_KINDS = kind_names()  # every declared kind, in report order

__all__ = [
    "AuditContext",
    "AuditReport",
    "Collector",
    "DEFECT_KINDS",
    "DefectKind",
    "KINDS",
    "SCHEMA_VERSION",
    "StreamingAudit",
    "audit_release",
    "defect",
    "digest",
    "defects_phrase",
    "definitions",
    "in_report_order",
    "fix_release",
    "load_leak_patterns",
    "removal_refs",
    "turn_problems",
]
