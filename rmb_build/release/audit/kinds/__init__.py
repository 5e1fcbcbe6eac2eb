"""The defect kinds, one module each: the kind's check (a per-item function, or a collector class where
it compares items) under its ``@defect(name, definition, rank=...)`` declaration. The registry
(``kind.KINDS``) imports every module here not starting with ``_`` on its first lookup; ``rank`` places the
kind in report order. Modules starting with ``_`` hold what several kinds share.
"""
