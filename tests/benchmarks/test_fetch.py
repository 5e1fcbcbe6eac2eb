"""``--release rmb``: the official release downloaded once from a (here local) archive URL into the user
cache, its checksum recorded and checked, then read offline; failures leave nothing behind."""

from __future__ import annotations

import hashlib
import io
import json
import zipfile

import pytest
from formats_helpers import TOP, Server, archive_bytes, evaluate, evaluate_error

from rmb_build.benchmarks.fetch import URL_ENV, cache_dir


@pytest.fixture
def user_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg" / "rmb" / "releases" / "rmb"


def test_downloads_once_then_reads_offline_and_detects_a_corrupted_cache(tmp_path, monkeypatch, user_cache, capsys):
    body = archive_bytes(tmp_path)
    with Server(body) as server:
        monkeypatch.setenv(URL_ENV, server.url)
        first = evaluate(tmp_path, "rmb", out="first")
        assert server.requests == 1
        second = evaluate(tmp_path, "rmb", out="second")
        assert server.requests == 1  # the second run made no request
    assert cache_dir() == user_cache
    source = json.loads((user_cache / "source.json").read_text())
    assert source["archive_sha256"] == hashlib.sha256(body).hexdigest() and source["url"] == server.url
    assert sorted(p.relative_to(user_cache).as_posix() for p in user_cache.rglob("*.json")) == [
        "RMB_dataset/BoN_set/Harmlessness/S6.json",
        "RMB_dataset/Pairwise_set/Harmlessness/S6.json",
        "RMB_dataset/Pairwise_set/Helpfulness/Chat/Discussion.json",
        "source.json",
    ]
    assert first["pairwise"] == second["pairwise"] and first["bon"] == second["bon"]
    assert first["pairwise"]["scenarios"]["Harmlessness/S6"]["accuracy"] == 0.0  # 1 < 3
    assert first["bon"]["overall"]["micro"] == 1.0  # 2 > 1 and 2 > 0
    assert first["release_source"] == {k: source[k] for k in ("url", "archive_sha256", "tree_sha256")}
    # A changed file in the cache is detected (the server is gone: no silent re-download either).
    target = user_cache / "RMB_dataset" / "Pairwise_set" / "Harmlessness" / "S6.json"
    target.write_text(target.read_text().replace("1|short", "9|short"))
    err = evaluate_error(tmp_path, "rmb", capsys)
    assert "the cached RMB release does not match its recorded checksum" in err and str(user_cache) in err
    target.unlink()
    err = evaluate_error(tmp_path, "rmb", capsys)
    assert "does not match its recorded checksum" in err


def test_offline_is_one_line_and_leaves_no_cache(tmp_path, monkeypatch, user_cache, capsys):
    with Server(b"") as server:
        url = server.url
    monkeypatch.setenv(URL_ENV, url)  # the server is closed: nothing listens there
    err = evaluate_error(tmp_path, "rmb", capsys)
    assert f"cannot download the RMB release from {url}" in err
    assert not user_cache.exists() and list(user_cache.parent.iterdir()) == []


@pytest.mark.parametrize(
    "body, declared, message",
    [
        (b"not a zip at all", None, "not a zip archive"),
        (b"PK\x03\x04 cut short", 10_000, "cannot download the RMB release"),  # the connection ends early
    ],
)
def test_a_bad_or_interrupted_download_leaves_nothing_half_written(
    tmp_path, monkeypatch, user_cache, capsys, body, declared, message
):
    with Server(body, declared) as server:
        monkeypatch.setenv(URL_ENV, server.url)
        err = evaluate_error(tmp_path, "rmb", capsys)
    assert message in err
    assert not user_cache.exists() and list(user_cache.parent.iterdir()) == []


def test_an_archive_without_the_dataset_folder_is_refused(tmp_path, monkeypatch, user_cache, capsys):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr(f"{TOP}/README.md", "no data here")
    with Server(buf.getvalue()) as server:
        monkeypatch.setenv(URL_ENV, server.url)
        err = evaluate_error(tmp_path, "rmb", capsys)
    assert "the archive has no RMB_dataset/ folder" in err and not user_cache.exists()


def test_a_local_folder_named_rmb_is_read_as_a_path(tmp_path, monkeypatch, user_cache):
    (tmp_path / "work" / "rmb").mkdir(parents=True)
    (tmp_path / "work" / "rmb" / "b.jsonl").write_text(
        json.dumps({"prompt": "q?", "chosen": "2|a", "rejected": "1|b"}) + "\n"
    )
    monkeypatch.chdir(tmp_path / "work")
    monkeypatch.setenv(URL_ENV, "http://127.0.0.1:9/never-asked.zip")
    res = evaluate(tmp_path, "rmb")
    assert res["benchmark"]["format"] == "rewardbench" and not user_cache.exists()
