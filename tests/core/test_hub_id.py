"""One rule says what a Hub id is (``core.hub.is_hub_id``), for releases, benchmarks and models alike: a
name that is no Hub id and no local path is refused as a missing file, never sent to the Hub; ``--repo-id``, a
pushed evaluation's id and the known-models table's ids are held to the same rule."""

from __future__ import annotations

import pytest

from rmb_build.core.errors import RMBError
from rmb_build.core.hub import is_hub_id


@pytest.mark.parametrize(
    ("name", "dataset", "model"),
    [
        ("Zhou-Zoey/RMB-Reward-Model-Benchmark", True, True),
        ("allenai/reward-bench_2.v1", True, True),
        ("gpt2", False, True),  # a model of the Hub's first days has no organisation
        ("./data/x", False, False),
        ("/data/x", False, False),
        ("~me/x", False, False),
        ("a/b/c", False, False),
        ("org/", False, False),
        ("my data/x", False, False),
        ("data\\x/y", False, False),
        ("", False, False),
    ],
)
def test_what_a_hub_id_is(name, dataset, model):
    assert is_hub_id(name) is dataset and is_hub_id(name, org=False) is model


@pytest.mark.parametrize("source", ["org/", "~me/release", "my data/release"])
def test_a_release_that_is_no_path_and_no_hub_id_is_a_missing_folder(source, tmp_path, monkeypatch):
    from rmb_build.benchmarks.formats import RMB, open_release

    monkeypatch.chdir(tmp_path)
    for fmt in (None, RMB):
        with pytest.raises(RMBError) as err:
            open_release(source, fmt)
        assert "no such" in str(err.value) and "not a Hugging Face Hub id of the form ORG/NAME" in str(err.value)


def test_a_model_that_is_no_folder_and_no_hub_id_is_a_missing_folder(tmp_path, monkeypatch):
    from rmb_build.evaluate.loading import locate
    from rmb_build.evaluate.rm_options import RMOptions

    monkeypatch.chdir(tmp_path)
    with pytest.raises(RMBError, match="no such folder"):
        locate("my model", RMOptions())


@pytest.mark.parametrize("repo_id", ["me/demo", "_me/demo", "me/demo-", "me/.demo", "my org/demo", "me/demo/x"])
def test_repo_id_options_follow_the_one_rule(repo_id):
    import argparse

    from rmb_build.commands._hub_push import check_push_options

    args = argparse.Namespace(repo_id=repo_id, dry_run=True, out=None)
    with pytest.raises(RMBError) as err:
        check_push_options(args, (), ())
    refused = f"--repo-id {repo_id!r}: expected ORG/NAME" == str(err.value)
    assert refused is not is_hub_id(repo_id), str(err.value)  # an id passes on to the next check (--out)


AGAINST_THE_HUB = [
    "Zhou-Zoey/RMB-Reward-Model-Benchmark",
    "allenai/reward-bench_2.v1",
    "a/b",
    "_me/demo",
    "me/demo_",
    "org/" + "x" * 96,
    "org/" + "x" * 97,
    "o" * 97 + "/name",
    "org/a..b",
    "org/a--b",
    "org..x/b",
    "org/a.-b",
    "org/-a",
    "org/a-",
    "org/.a",
    "org/a.",
    "org/a.git",
    "org/a b",
    "org/a+b",
    "org/",
    "/name",
    "a/b/c",
]


@pytest.mark.parametrize("repo_id", AGAINST_THE_HUB)
def test_a_hub_id_is_what_huggingface_hub_validates(repo_id):
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(repo_id)
        valid = True
    except HFValidationError:
        valid = False
    assert is_hub_id(repo_id) is valid


@pytest.mark.parametrize("repo_id", ["org/naïve", "orgé/name", "org/a..b", "org/a--b", "org/" + "x" * 97])
def test_a_name_the_hub_refuses_is_refused_before_the_work(repo_id):
    import argparse

    from rmb_build.commands._hub_push import check_push_options

    assert not is_hub_id(repo_id) and not is_hub_id(repo_id, org=False)
    args = argparse.Namespace(repo_id=repo_id, dry_run=True, out=None)
    with pytest.raises(RMBError, match=r"expected ORG/NAME"):
        check_push_options(args, (), ())
