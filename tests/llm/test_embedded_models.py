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
