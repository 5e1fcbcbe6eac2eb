"""The redaction rule keeps what carries no credential: a URL's fragment is a place in a page (the link
Prefect prints when it starts its temporary server was cut to ``#<redacted>``), redacted only where it
holds a secret-named value (OAuth's tokens)."""

from __future__ import annotations

from rmb_build.core.redact import REDACTED, redact


def test_a_fragment_is_kept_and_a_secret_in_it_is_not():
    prefect = "See https://docs.prefect.io/v3/concepts/server#how-to-guides for more information on running a dedicated"
    assert redact(prefect) == prefect
    for url in ("http://127.0.0.1:4200/#/runs/flow-run/0b7e4c1a-1f", "http://host/docs#section-2"):
        line = f"Flow run 'demo' - View at {url}"
        assert redact(line) == line
    assert redact("http://h/cb#access_token=abc123&state=1") == f"http://h/cb#access_token={REDACTED}&state=1"
    assert redact("http://h/cb#id_token=abc123") == f"http://h/cb#id_token={REDACTED}"
    assert redact("http://h/v1?sig=abc123#top") == f"http://h/v1?{REDACTED}#top"
