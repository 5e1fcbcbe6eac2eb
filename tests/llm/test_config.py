from rmb_build.llm.config import ModelRef
from rmb_build.llm.types import ChatRequest


def test_a_model_refs_request_carries_its_settings_and_what_the_stage_adds():
    ref = ModelRef(endpoint="local", model="m", temperature=0.3, top_p=0.9, max_tokens=64)
    messages = [("user", "Hi")]
    assert ref.request(messages, stage="judge", tag="q1", seed=2) == ChatRequest(
        "local", "m", (("user", "Hi"),), temperature=0.3, top_p=0.9, max_tokens=64, seed=2, stage="judge", tag="q1"
    )
    assert ref.request(messages, stage="guard", tag="q1", max_tokens=40).max_tokens == 40
