"""``rmb downstream`` with a generative RM given as ``openai:<model>@<URL>`` and as ``openai:<model>@<endpoint
name>``: both score through the run's client (one budget, one accounting), and a credential in the URL is
written nowhere."""

from __future__ import annotations

import json

import yaml
from stub_endpoint import StubEndpoint

from rmb_build.cli import main
from tests.analysis.downstream.test_downstream import PROMPTS, N, _run, policy_reply, write_config

SECRET = "s3cretpw"


def test_an_rm_at_a_url_and_an_rm_at_an_endpoint_name_both_score(tmp_path):
    with StubEndpoint(reply=policy_reply) as stub, StubEndpoint() as judge:
        url_rm = f"openai:judge@http://user:{SECRET}@127.0.0.1:{judge.port}/v1"
        config = write_config(tmp_path, stub, [])
        data = yaml.safe_load(config.read_text())
        data["reward_models"] = [url_rm, "openai:named@stub", "baseline:length"]
        config.write_text(yaml.safe_dump(data))

        args = ["downstream", "--config", str(config), "--workdir", str(tmp_path / "work"), "--no-progress"]
        assert main([*args, "--dry-run"]) == 0  # the dry run plans the @URL RM's requests too
        assert judge.count("judge") == 0 and stub.count("judge") == 0

        result = _run(tmp_path, config, "out")
        assert judge.count("judge") == N * PROMPTS  # the @URL RM asked its own endpoint, once per sample
        assert stub.count("judge") == 2 * N * PROMPTS  # the grader's and the @stub RM's
        assert judge.headers[0]["Authorization"].startswith("Basic ")  # the URL's credentials went with it

        url_key = f"openai:judge@http://<redacted>@127.0.0.1:{judge.port}/v1"
        assert set(result["rms"]) == {url_key, "openai:named@stub", "baseline:length"}
        assert result["scoring"][url_key]["scored"] == N * PROMPTS
        assert result["calls"]["reward_models"]["requests"] == 2 * N * PROMPTS  # both RMs on the run's accounting

        judge.reset()
        again = _run(tmp_path, config, "out2")  # from the caches: nothing asked again
        assert judge.count("judge") == 0 and again["scoring"][url_key]["cached"] == N * PROMPTS
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p != config]  # caches and logs included
    assert {"responses.sqlite", "scores.sqlite", "report.md"} <= {p.name for p in written}
    assert not [p for p in written if SECRET.encode() in p.read_bytes()]
    assert SECRET not in json.dumps(result)
