"""The reward-model options, defined once (``evaluate/rm_options.py``): each reaches the adapter from
``rmb evaluate``'s flags, from a downstream config's ``reward_models`` entry and from ``RMOptions(...)``, and
each is refused the same way on all three paths."""

from __future__ import annotations

from pathlib import Path

import pytest
from leaderboard_helpers import small_release

import rmb_build.evaluate.adapters as adapters
from rmb_build.cli import main
from rmb_build.core.errors import ConfigError, RMBError
from rmb_build.evaluate.rm_options import OPTIONS, RMOptions, flag_name

# Every per-RM option: a value other than the default, and how a flag writes it (None: a switch).
VALUES: dict[str, tuple[object, str | None]] = {
    "batch_size": (3, "3"),
    "dtype": ("fp16", "fp16"),
    "max_length": (64, "64"),
    "chat_template": ("{{ messages }}", "{{ messages }}"),
    "device": ("cpu", "cpu"),
    "trust_remote_code": (True, None),
    "family": ("value-head", "value-head"),
    "device_map": ("auto", "auto"),
    "max_memory": ({0: "70GiB", "cpu": "100GiB"}, "0=70GiB,cpu=100GiB"),
    "load_in": ("8bit", "8bit"),
    "revision": ("main", "main"),
    "attn_implementation": ("eager", "eager"),
    "protocol": ("rewardbench", "rewardbench"),
    "devices": (["cpu", "cpu"], "cpu,cpu"),
    "deterministic": (True, None),
    "votes": (3, "3"),
    "judge_mode": ("pointwise", "pointwise"),
    "with_criteria": (True, None),
    "structured_output": ("json_object", "json_object"),
    "seed": (7, "7"),
}
RM = "baseline:length"


def test_the_table_covers_every_per_rm_option():
    assert set(VALUES) == {name for name, opt in OPTIONS.items() if opt.per_rm}


class _Loaded(Exception):
    """Raised once the adapter is built: these tests are about what reaches it, not about scoring."""


@pytest.fixture
def loaded(monkeypatch):
    """The options the next ``load_rm`` builds an adapter with (the real one, which then stops the command)."""
    seen: list[RMOptions] = []
    real = adapters.load_rm

    def load_rm(spec, options=None):
        seen.append(real(spec, options).options)
        raise _Loaded

    monkeypatch.setattr(adapters, "load_rm", load_rm)
    return seen


def _evaluate(tmp: Path, *flags: str) -> list[str]:
    release = tmp / "release"
    if not release.exists():
        small_release(release)
    return ["evaluate", "--release", str(release), "--rm", RM, "--out", str(tmp / "out"), "--no-progress", *flags]


@pytest.mark.parametrize("name", list(VALUES))
def test_each_option_reaches_the_adapter_from_the_cli(tmp_path, loaded, name):
    value, text = VALUES[name]
    with pytest.raises(_Loaded):
        main(_evaluate(tmp_path, flag_name(name), *([text] if text is not None else [])))
    assert getattr(loaded[0], name) == value


def _downstream(**entry) -> dict:
    return {
        "name": "opts",
        "endpoints": {"ep": {"base_url": "http://127.0.0.1:9/v1"}},
        "prompts": {"sources": [{"kind": "jsonl", "path": "prompts.jsonl"}]},
        "policy": {"endpoint": "ep", "model": "m"},
        "grader": {"kind": "pointwise", "endpoint": "ep", "model": "m"},
        "reward_models": [{"rm": RM, **entry}],
    }


@pytest.mark.parametrize("name", list(VALUES))
def test_each_option_reaches_the_adapter_from_a_downstream_config(tmp_path, name):
    from rmb_build.analysis.downstream.config import parse_downstream_config
    from rmb_build.analysis.downstream.run import load_reward_model

    value, _ = VALUES[name]
    cfg = parse_downstream_config(_downstream(**{name: value}), "ds.yaml")
    rm = load_reward_model(cfg.reward_models[0], cfg, tmp_path / "llm")
    assert getattr(rm.options, name) == value


@pytest.mark.parametrize("name", list(VALUES))
def test_each_option_reaches_the_adapter_from_the_api(name):
    value, _ = VALUES[name]
    assert getattr(adapters.load_rm(RM, RMOptions(**{name: value})).options, name) == value


def test_a_flag_or_yaml_string_is_read_as_the_api_value():
    """max_memory and devices take the flag's text in a downstream config too."""
    from rmb_build.analysis.downstream.config import parse_downstream_config

    cfg = parse_downstream_config(_downstream(max_memory="0=70GiB,cpu=100GiB", devices="cpu,cpu"), "ds.yaml")
    assert cfg.reward_models[0].max_memory == {0: "70GiB", "cpu": "100GiB"}
    assert cfg.reward_models[0].devices == ["cpu", "cpu"]


# (option, bad value, the flag's text, the problem every path names)
BAD = [
    ("batch_size", 0, "0", "must be at least 1"),
    ("votes", 0, "0", "must be at least 1"),
    ("max_length", 4, "4", "must be at least 8"),
    ("protocol", "nope", "nope", "'nope': unknown protocol (known: native, rmb"),
    ("max_memory", "0:70GiB", "0:70GiB", "'0:70GiB': expected DEVICE=SIZE[,DEVICE=SIZE...], e.g. 0=70GiB,cpu=100GiB"),
    ("devices", "cpu,cuda:0", "cpu,cuda:0", "'cpu,cuda:0': mixes device kinds (cpu, cuda); give devices of one kind"),
]


@pytest.mark.parametrize(("name", "value", "text", "problem"), BAD)
def test_a_bad_value_is_one_line_naming_the_option_on_every_path(tmp_path, capsys, name, value, text, problem):
    from rmb_build.analysis.downstream.config import parse_downstream_config

    assert main(_evaluate(tmp_path, flag_name(name), text)) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"rmb evaluate: error: {flag_name(name)} {problem}") and "\n" not in err
    assert not (tmp_path / "out").exists()

    with pytest.raises(ConfigError) as exc:
        parse_downstream_config(_downstream(**{name: value}), "ds.yaml")
    assert str(exc.value).startswith(f"ds.yaml: field 'reward_models[0].{name}': {problem}")

    api_value = {"max_memory": {0: 1}, "devices": ["cpu", "cuda:0"]}.get(name, value)
    with pytest.raises(RMBError, match=f"^RMOptions {name} "):
        RMOptions(**{name: api_value})


def test_the_api_refuses_a_wrong_type_or_choice_naming_the_field():
    with pytest.raises(RMBError, match=r"^RMOptions dtype 'fp8': expected one of auto, bf16, fp16, fp32$"):
        RMOptions(dtype="fp8")
    with pytest.raises(RMBError, match=r"^RMOptions batch_size '16': expected int$"):
        RMOptions(batch_size="16")
    with pytest.raises(RMBError, match=r"^RMOptions max_memory .*a GPU is its index as a number \(0, not '0'\)"):
        RMOptions(max_memory={"0": "70GiB"})  # from_pretrained would not take it as GPU 0
    with pytest.raises(RMBError, match="^RMOptions devices and device: give one"):
        RMOptions(devices=["cuda:0", "cuda:1"], device="cpu")
    assert RMOptions(devices=["cuda:0", "cuda:1"]).device == "cuda:0"


def test_a_downstream_rm_refuses_an_unknown_key_a_pairwise_judge_and_a_bool_for_a_number(tmp_path):
    from rmb_build.analysis.downstream.config import parse_downstream_config

    with pytest.raises(ConfigError, match=r"'reward_models\[0\].batch_size': Input should be a valid integer"):
        parse_downstream_config(_downstream(batch_size=True), "ds.yaml")  # as RMOptions(batch_size=True)

    with pytest.raises(ConfigError, match=r"^ds.yaml: field 'reward_models\[0\]': unknown key 'batch_sise'"):
        parse_downstream_config(_downstream(batch_sise=3), "ds.yaml")
    with pytest.raises(ConfigError, match=r"judge_mode': 'pairwise': a best-of-n pick needs a score per answer"):
        parse_downstream_config(_downstream(judge_mode="pairwise"), "ds.yaml")
