"""``python:<module>:<function>``: a custom scorer ``fn(conversation, answer) -> float``.

``<module>`` is an importable module name or a path to a ``.py`` file. The fingerprint holds a hash
of the module's source, so editing the scorer re-scores every text.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import numbers
import sys
from pathlib import Path
from typing import Sequence, cast

from rmb_build.core.errors import RMBError
from rmb_build.evaluate.adapters import ADAPTERS, RewardModel, ScoreText


def _load_module(name: str):
    path = Path(name)
    if name.endswith(".py") or path.is_file():
        if not path.is_file():
            raise RMBError(f"--rm python:{name}: no such file")
        mod_name = f"rmb_user_scorer_{hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]}"
        spec = importlib.util.spec_from_file_location(mod_name, path)
        if spec is None or spec.loader is None:
            raise RMBError(f"--rm python:{name}: not a Python file (a .py file or an importable module)")
        module = importlib.util.module_from_spec(spec)
        sys.modules[mod_name] = module
        spec.loader.exec_module(module)
        return module
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise RMBError(f"--rm python:{name}: cannot import module {name!r}: {exc}") from None


class PythonScorer(RewardModel):
    kind = "python"

    def __init__(self, target, options):
        super().__init__(target, options)
        module_name, sep, func_name = target.rpartition(":")
        if not sep or not module_name or not func_name:
            raise RMBError(f"--rm python:{target}: expected python:<module>:<function>")
        self.module = _load_module(module_name)
        self.fn = getattr(self.module, func_name, None)
        if not callable(self.fn):
            raise RMBError(f"--rm python:{target}: module {module_name!r} has no function {func_name!r}")
        try:
            source = inspect.getsource(self.module)
        except (OSError, TypeError):
            source = repr(getattr(self.module, "__file__", module_name))
        self.source_hash = hashlib.sha256(source.encode("utf-8")).hexdigest()

    def describe(self) -> dict:
        # The source, not the path: moving the file keeps its scores, editing it drops them.
        return {"function": self.target.rpartition(":")[2], "source_sha256": self.source_hash}

    def score_batch(self, texts: Sequence[ScoreText]) -> list[float]:
        out = []
        for t in texts:
            conversation = [t_.to_rmb() for t_ in t.conversation]
            try:
                value = self.fn(conversation, t.answer)
            except Exception as exc:  # the user's code: report it as one line, keep what was scored
                raise RMBError(
                    f"--rm python:{self.target}: raised {type(exc).__name__}: {exc} "
                    f"(text {t.key[:12]}; texts scored before it are cached)"
                ) from exc
            try:
                # A number passes as it is: the scoring loop refuses NaN, infinity and 10**400, naming the item.
                value = value if isinstance(value, numbers.Real) and not isinstance(value, bool) else float(value)
            except (TypeError, ValueError):
                raise RMBError(
                    f"--rm python:{self.target}: returned {type(value).__name__}, not a number (text {t.key[:12]})"
                ) from None
            out.append(cast(float, value))  # a Real as it is: the scoring loop checks it
        return out


ADAPTERS.add(PythonScorer.kind, PythonScorer)
