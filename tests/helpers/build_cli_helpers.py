"""Running ``rmb build`` on a config a test writes, where the build must be refused before it starts."""

from __future__ import annotations

from pathlib import Path

import yaml

from rmb_build.cli import main


def refused_build(tmp_path: Path, cfg: dict, capsys) -> str:
    """``rmb build`` on ``cfg``: exit 2, one stderr line naming the config file, nothing started or
    written under the work folder. Returns that line."""
    path = tmp_path / "build.yaml"
    path.write_text(yaml.safe_dump(cfg))
    code = main(["build", "--config", str(path), "--workdir", str(tmp_path / "work")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert str(path) in err
    assert not (tmp_path / "work" / "runs").exists(), "nothing may be started or written before the checks pass"
    return err
