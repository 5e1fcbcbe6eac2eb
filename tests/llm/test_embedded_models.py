"""The embedded-model table: config validation, the server and the manifest read the same entries."""

from __future__ import annotations

import pytest

from rmb_build.core.errors import ConfigError
from rmb_build.llm.config import EndpointConfig
from rmb_build.llm.embedded_models import EMBEDDED
from rmb_build.llm.endpoint import endpoint_description
from rmb_build.llm.server import ServerError, gguf_file
from rmb_build.pipeline.config import parse_config


def test_every_table_entry_is_a_valid_embedded_endpoint_and_named_in_the_manifest():
    for name, model in EMBEDDED.items():
        ident = endpoint_description(EndpointConfig(embedded=name))
        assert ident["embedded"] == name and ident["package"] == model.package


def test_unknown_models_are_refused_by_config_and_server():
    with pytest.raises(ConfigError, match="unknown embedded model 'nope'.*smollm2"):
        parse_config(
            {
                "name": "t",
                "endpoints": {"x": {"embedded": "nope"}},
                "generators": [{"endpoint": "x", "model": "m"}],
                "judge": {"endpoint": "x", "model": "m"},
                "guard": {"endpoint": "x", "model": "m"},
            }
        )
    with pytest.raises(ServerError, match="unknown embedded model"):
        gguf_file("nope")


def test_smollm2_file_is_found():
    assert gguf_file("smollm2").suffix == ".gguf"


def test_a_folder_named_like_the_package_is_refused_as_not_installed(tmp_path, monkeypatch):
    # a folder with no __init__ (a namespace package: an uninstall's leftovers) was read as the package and
    # failed with a TypeError on its __file__ (None)
    from rmb_build.llm.embedded_models import EmbeddedModel, MissingModelPackage, shipped_file

    (tmp_path / "rmb_leftover_model_pkg").mkdir()
    monkeypatch.syspath_prepend(str(tmp_path))
    model = EmbeddedModel(
        "x", "x-pkg", "rmb_leftover_model_pkg", "pip install x-pkg", lambda m, _: shipped_file(m, "x.gguf")
    )
    with pytest.raises(MissingModelPackage, match="rmb_leftover_model_pkg is not installed"):
        model.locate(tmp_path)
