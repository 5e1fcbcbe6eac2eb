"""``sequence-classifier`` on a Qwen3 backbone (Skywork-Reward-V2-Qwen3-*): a tiny randomly initialised
Qwen3ForSequenceClassification (1 label) with SmolLM2's real tokenizer, scored batched and alone, against the head
computed by hand (Qwen3Model on the unpadded text, ``score.weight`` at its last token). The same look-alike, put in
a local Hugging Face cache under a listed id with a card example computed from its own weights, shows the
mechanism of ``rmb models check`` and the check status evaluation records."""

from __future__ import annotations

import json

import pytest
from families_helpers import last_hidden, save_lookalike, small_release, texts, tiny_config
from lazy_modules import importorskip_on_use

from rmb_build.cli import main
from rmb_build.evaluate.adapters import RMOptions, load_rm

torch = importorskip_on_use("torch")
transformers = importorskip_on_use("transformers")
safetensors_torch = importorskip_on_use("safetensors.torch")

pytestmark = pytest.mark.torch  # see the marker in pyproject.toml

HUB_ID = "tiny-org/Qwen3-RM-lookalike"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
CONVERSATION = [{"role": "user", "content": "Tips for better sleep?"}]
RESPONSES = ["Keep a regular bedtime and a dark, cool room.", "idk lol"]


@pytest.fixture(scope="module")
def qwen3_rm(smol_tokenizer, tmp_path_factory):
    tok = smol_tokenizer
    config = tiny_config(transformers.Qwen3Config, len(tok), head_dim=8, num_labels=1, pad_token_id=tok.pad_token_id)
    torch.manual_seed(30)
    model = transformers.Qwen3ForSequenceClassification(config)
    return save_lookalike(tmp_path_factory.mktemp("qwen3-rm"), model, tok)


def by_hand(folder, ids):
    h, saved = last_hidden(folder, "model", ids, transformers.Qwen3Model)
    return float(saved["score.weight"][0] @ h)


def test_a_qwen3_classifier_scores_its_head_at_the_last_token(qwen3_rm):
    rm = load_rm(f"hf:{qwen3_rm}", RMOptions(device="cpu"))
    ids = rm.encode(texts())
    assert type(rm._load()).__name__ == "Qwen3ForSequenceClassification"
    want = [by_hand(qwen3_rm, x) for x in ids]
    assert len({round(w, 6) for w in want}) == len(want)
    assert rm.forward(ids) == pytest.approx(want, abs=1e-4)  # padded batch
    assert [rm.forward([x])[0] for x in ids] == pytest.approx(want, abs=1e-4)


def _hub_cache(monkeypatch, tmp_path, folder):
    import shutil

    from huggingface_hub import constants

    root = tmp_path / "hub" / f"models--{HUB_ID.replace('/', '--')}"
    shutil.copytree(folder, root / "snapshots" / COMMIT)
    (root / "refs").mkdir()
    (root / "refs" / "main").write_text(COMMIT)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))


def _row_file(tmp_path, scores, tolerance=1e-3):
    import yaml

    row = {
        "id": HUB_ID,
        "family": "sequence-classifier",
        "card": "https://example.org/card",
        "sources": {"family": "card", "example": "card"},
        "example": {
            "conversation": CONVERSATION,
            "responses": RESPONSES,
            "scores": scores,
            "tolerance": tolerance,
            "source": "card",
        },
    }
    path = tmp_path / "rows.yaml"
    path.write_text(yaml.safe_dump({"models": [row]}))
    return path


def _card_scores(folder):
    """What the look-alike's "card" prints: the chat template, one forward per response, its own weights."""
    tok = transformers.AutoTokenizer.from_pretrained(folder)
    out = []
    for r in RESPONSES:
        text = tok.apply_chat_template([*CONVERSATION, {"role": "assistant", "content": r}], tokenize=False)
        out.append(by_hand(folder, tok(text, add_special_tokens=False)["input_ids"]))
    return out


@pytest.mark.slow  # over 4 s under load (the tier's rule: docs/testing.md)
def test_models_check_reproduces_a_card_example_and_evaluation_records_it(qwen3_rm, tmp_path, monkeypatch, capsys):
    from rmb_build.evaluate.run import evaluate

    monkeypatch.setenv("RMB_KNOWN_MODELS", str(_row_file(tmp_path, _card_scores(qwen3_rm))))
    assert main(["models", "check", HUB_ID, "--device", "cpu"]) == 3  # the weights are not cached yet
    assert "not checked (its weights are not in the local Hugging Face cache)" in capsys.readouterr().out
    _hub_cache(monkeypatch, tmp_path, qwen3_rm)
    rm = load_rm(f"hf:{HUB_ID}", RMOptions(device="cpu"))
    assert rm.known_model.check["status"] == "not checked"  # cached but never checked
    assert main(["models", "check", HUB_ID, "--device", "cpu"]) == 0
    assert f"{HUB_ID}: reproduced at {COMMIT[:12]} (fp32, cpu)" in capsys.readouterr().out
    rm = load_rm(f"hf:{HUB_ID}", RMOptions(device="cpu"))
    results = evaluate(small_release(), rm, tmp_path / "out", tmp_path / "cache", progress=False)
    saved = json.loads((tmp_path / "out" / "results.json").read_text())
    assert results["known_model"]["check"]["status"] == saved["known_model"]["check"]["status"] == "reproduced"
    assert saved["known_model"]["check"]["commit"] == COMMIT

    # a card whose scores the weights do not give: exit 1, and evaluation then records "differs"
    wrong = [s + 0.5 for s in _card_scores(qwen3_rm)]
    monkeypatch.setenv("RMB_KNOWN_MODELS", str(_row_file(tmp_path, wrong)))
    assert main(["models", "check", HUB_ID, "--device", "cpu"]) == 1
    assert "differs" in capsys.readouterr().out
    assert load_rm(f"hf:{HUB_ID}", RMOptions(device="cpu")).known_model.check["status"] == "differs"
    # another example than the one checked: the record does not count for it
    monkeypatch.setenv("RMB_KNOWN_MODELS", str(_row_file(tmp_path, wrong, tolerance=0.75)))
    assert load_rm(f"hf:{HUB_ID}", RMOptions(device="cpu")).known_model.check["status"] == "not checked"


def test_a_shipped_row_stays_not_checked_without_its_weights(capsys):
    assert main(["models", "check", "Qwen/WorldPM-72B"]) == 3
    assert capsys.readouterr().out.strip() == (
        "Qwen/WorldPM-72B: not checked (its weights are not in the local Hugging Face cache)"
    )
    assert main(["models", "check", "Skywork/Skywork-Reward-V2-Qwen3-8B"]) == 3
    assert "not checked (the row carries no card example)" in capsys.readouterr().out
