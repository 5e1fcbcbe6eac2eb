"""tests/helpers/stub_endpoint.py itself: counting without a log (as bench/scale.py runs it) and reset."""

from __future__ import annotations

import json
import time
import urllib.request

import pytest
from stub_endpoint import StubEndpoint, scripted_reply

GENERATE = {"model": "strong", "messages": [{"role": "user", "content": "Name two colours."}]}
JUDGE = {
    "model": "judge",
    "response_format": {"type": "json_object"},
    "messages": [{"role": "user", "content": "<answer>strong answers (quality 9): red</answer>"}],
}


def _chat(stub: StubEndpoint, body: dict) -> str:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    req = urllib.request.Request(
        stub.base_url + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with opener.open(req, timeout=10) as resp:
        return json.load(resp)["choices"][0]["message"]["content"]


def _settle(stub: StubEndpoint, total: int) -> None:
    """The stub logs a request just after writing its reply: wait until ``total`` are logged."""
    deadline = time.monotonic() + 10
    while stub.count() < total and time.monotonic() < deadline:
        time.sleep(0.01)


@pytest.mark.parametrize("log", [True, False])
def test_counts_with_or_without_a_log_and_reset_forgets(log):
    with StubEndpoint(log=log) as stub:
        assert _chat(stub, GENERATE) == scripted_reply(GENERATE)
        assert json.loads(_chat(stub, JUDGE))["score"] == 9
        _chat(stub, GENERATE)
        _settle(stub, 3)
        assert (stub.count(), stub.count("generate"), stub.count("judge")) == (3, 2, 1)
        assert stub.stages() == {"generate": 2, "judge": 1}
        assert len(stub.requests) == len(stub.bodies) == (3 if log else 0)
        stub.reset()
        assert (stub.count(), stub.stages(), stub.requests, stub.bodies, stub.max_in_flight) == (0, {}, [], [], 0)
        _chat(stub, JUDGE)
        _settle(stub, 1)
        assert stub.stages() == {"judge": 1}
