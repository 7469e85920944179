"""No file read or written outside the cache or the repository (issue 12): names from indexes and
arguments are checked before any file is touched, links that lead out are refused, a damaged cache
is said to be damaged, and the search for weight files is bounded."""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from llmfit.errors import BadInputError, CacheDamaged, UsageError, WeightsError
from llmfit.sources import repo as repo_module
from llmfit.sources.cache import RepoRef, parse_ref
from llmfit.sources.repo import load_repo
from tests.conftest import EXAMPLE_FLEET, HUB, invoke

FLEET = str(EXAMPLE_FLEET)
QWEN_CONFIG = next((HUB / "models--Qwen--Qwen3-8B" / "snapshots").glob("*/config.json"))
COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture
def opened(monkeypatch) -> list[Path]:
    """Every file opened through pathlib, as it resolves: to show what was not read."""
    seen: list[Path] = []
    real = Path.open

    def spy(self, *args, **kwargs):
        seen.append(Path(os.path.realpath(self)))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", spy)
    return seen


@pytest.fixture
def secret(tmp_path) -> Path:
    """A file outside every repository and cache, as ~/.cache/huggingface/token is."""
    p = tmp_path / "home" / ".cache" / "huggingface" / "token"
    p.parent.mkdir(parents=True)
    p.write_text("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")
    return p


def model_dir(root: Path, weight_map: dict[str, str] | None = None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.json").write_text(QWEN_CONFIG.read_text())
    save_file({"w": np.zeros((4, 4), dtype=np.float16)}, str(root / "model-00001.safetensors"))
    if weight_map is not None:
        index = {"metadata": {"total_size": 32}, "weight_map": weight_map}
        (root / "model.safetensors.index.json").write_text(json.dumps(index))
    return root


def hf_cache(root: Path, files: dict[str, bytes], repo_id: str = "org/model") -> Path:
    """A Hugging Face cache laid out as huggingface_hub lays it out: blobs, and a snapshot of
    links to them."""
    folder = root / ("models--" + repo_id.replace("/", "--"))
    snap = folder / "snapshots" / COMMIT
    snap.mkdir(parents=True)
    (folder / "blobs").mkdir()
    (folder / "refs").mkdir()
    (folder / "refs" / "main").write_text(COMMIT)
    for name, data in files.items():
        blob = folder / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        (snap / name).parent.mkdir(parents=True, exist_ok=True)
        (snap / name).symlink_to(os.path.relpath(blob, (snap / name).parent))
    return folder


def qwen_files() -> dict[str, bytes]:
    index = {"metadata": {"total_size": 16_381_470_720}, "weight_map": {"w": "m-1.safetensors"}}
    return {"config.json": QWEN_CONFIG.read_bytes(), "model.safetensors.index.json": json.dumps(
        index).encode()}  # fmt: skip


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "hf-cache"
    monkeypatch.setenv("HF_HUB_CACHE", str(root))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return root


def run(capsys, *args: str) -> tuple[int, str, str]:
    return invoke(capsys, args)


# -- names from an index ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shard", "why"),
    [
        ("../../home/.cache/huggingface/token", "it has an empty, '.' or '..' part"),
        ("sub/../../x.safetensors", "it has an empty, '.' or '..' part"),
        ("/etc/passwd", "it is an absolute path or holds a backslash or a control character"),
        ("..\\..\\x.safetensors", "it is an absolute path or holds a backslash or a control "
         "character"),
        ("a\x00b", "it is an absolute path or holds a backslash or a control character"),
        ("", "it is not a file name"),
        ("a//b.safetensors", "it has an empty, '.' or '..' part"),
    ],
)  # fmt: skip
def test_a_weight_map_entry_that_is_no_file_of_the_repo_is_refused_unread(
    tmp_path, secret, opened, shard, why
):
    root = model_dir(tmp_path / "model", {"w": shard})
    with pytest.raises(WeightsError) as e:
        load_repo(str(root))
    assert e.value.message == (
        f"{root / 'model.safetensors.index.json'}: weight_map gives tensor 'w' the file "
        f"{shard!r}, which cannot be a file of the repository: {why}."
    )
    assert e.value.exit_code == 3
    assert secret.resolve() not in opened


def test_a_weight_map_entry_of_the_wrong_type_is_refused(tmp_path):
    root = model_dir(tmp_path / "model")
    index = {"metadata": {"total_size": 32}, "weight_map": {"w": ["a"]}}
    (root / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(WeightsError) as e:
        load_repo(str(root))
    assert e.value.message.endswith("the file ['a'], which cannot be a file of the repository: "
                                    "it is not a file name.")  # fmt: skip


def test_a_shard_linking_out_of_the_repository_is_refused_unread(tmp_path, secret, opened):
    root = model_dir(tmp_path / "model", {"w": "model-00001-of-00001.safetensors"})
    (root / "model-00001-of-00001.safetensors").symlink_to(secret)
    with pytest.raises(BadInputError) as e:
        load_repo(str(root))
    assert e.value.message == (
        f"{root / 'model-00001-of-00001.safetensors'} leads to {secret.resolve()}, outside "
        f"{root}: llmfit reads only the repository's own files."
    )
    assert secret.resolve() not in opened


def test_a_config_linking_out_of_the_repository_is_refused_unread(tmp_path, secret, opened):
    root = tmp_path / "model"
    root.mkdir()
    (root / "config.json").symlink_to(secret)
    with pytest.raises(BadInputError) as e:
        load_repo(str(root))
    assert "leads to" in e.value.message and "outside" in e.value.message
    assert secret.resolve() not in opened


def test_a_gguf_linking_out_of_the_repository_is_refused_unread(tmp_path, secret, opened):
    root = tmp_path / "model"
    root.mkdir()
    (root / "m.gguf").symlink_to(secret)
    with pytest.raises(BadInputError) as e:
        load_repo(str(root))
    assert e.value.message == (
        f"{root / 'm.gguf'} leads to {secret.resolve()}, outside {root}: llmfit reads only the "
        "repository's own files."
    )
    assert secret.resolve() not in opened


def test_a_link_within_the_repository_is_followed(tmp_path):
    root = model_dir(tmp_path / "model", {"w": "model-00001-of-00001.safetensors"})
    (root / "model-00001-of-00001.safetensors").symlink_to(root / "model-00001.safetensors")
    assert load_repo(str(root)).artifacts[0].bytes == 32


# -- the Hugging Face cache ------------------------------------------------------------------------


def test_a_snapshot_planned_as_a_directory_may_follow_its_links_to_blobs(cache, capsys):
    folder = hf_cache(cache, qwen_files())
    repo = load_repo(str(folder / "snapshots" / COMMIT))
    assert repo.artifacts[0].bytes == 16_381_470_720


def test_a_cached_file_linking_out_of_the_cache_is_refused_unread(cache, secret, opened):
    folder = hf_cache(cache, qwen_files())
    config = folder / "snapshots" / COMMIT / "config.json"
    config.unlink()
    config.symlink_to(secret)
    with pytest.raises(CacheDamaged) as e:
        load_repo("org/model")
    assert e.value.message == (
        f"{config} leads to {secret.resolve()}, outside {folder}: llmfit reads only the "
        "repository's own files."
    )
    assert secret.resolve() not in opened


@pytest.mark.parametrize(
    ("content", "held"),
    [
        (b"", "is empty"),
        (b"\n", "is empty"),
        (b"not a commit", "holds 'not a commit'"),
        (COMMIT.upper().encode(), f"holds {COMMIT.upper()!r}"),
        (b"../../../../etc", "holds '../../../../etc'"),
        (b"\x1b]0;owned\x07" + b"a" * 5000,
         "holds '\\x1b]0;owned\\x07aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa…aa'"),
    ],
)  # fmt: skip
def test_a_ref_that_names_no_commit_is_a_damaged_cache(cache, capsys, content, held):
    folder = hf_cache(cache, qwen_files())
    (folder / "refs" / "main").write_bytes(content)
    code, out, err = run(capsys, "org/model", "--fleet", FLEET)
    assert (code, out) == (3, "")
    ref = folder / "refs" / "main"
    assert err.splitlines()[0] == (
        f"llmfit: {ref} {held}, not a commit hash: the cache is damaged."
    )
    assert err.splitlines()[1] == f"hint: rm {ref}  (an online run writes it again)"


@pytest.mark.parametrize("name", ["config.json", "model.safetensors.index.json"])
def test_a_link_to_a_blob_that_is_gone_is_a_damaged_cache(cache, capsys, name):
    folder = hf_cache(cache, qwen_files())
    link = folder / "snapshots" / COMMIT / name
    link.resolve().unlink()
    code, out, err = run(capsys, "org/model", "--fleet", FLEET)
    assert (code, out) == (3, "")
    assert err == (
        f"llmfit: org/model: {name} links to {os.readlink(link)}, which is not there: the cache "
        f"is damaged.\nhint: hf download org/model {name} --force-download\n"
    )


def test_a_shard_link_to_a_blob_that_is_gone_is_a_damaged_cache(cache, capsys):
    files = {**qwen_files(), "m-1.safetensors": b"x"}
    folder = hf_cache(cache, files)
    link = folder / "snapshots" / COMMIT / "m-1.safetensors"
    link.resolve().unlink()
    code, _, err = run(capsys, "org/model", "--fleet", FLEET)
    assert code == 3
    assert err.splitlines()[0] == (
        f"llmfit: org/model: m-1.safetensors links to {os.readlink(link)}, which is not there: the "
        "cache is damaged."
    )


def test_a_gguf_link_to_a_blob_that_is_gone_is_a_damaged_cache(cache, capsys):
    folder = hf_cache(cache, {"Q4/m-Q4_K_M.gguf": b"GGUF"})
    link = folder / "snapshots" / COMMIT / "Q4" / "m-Q4_K_M.gguf"
    link.resolve().unlink()
    code, _, err = run(capsys, "org/model", "--fleet", FLEET)
    assert code == 3
    assert err == (
        f"llmfit: org/model: m-Q4_K_M.gguf links to {os.readlink(link)}, which is not there: the "
        "cache is damaged.\nhint: hf download org/model Q4/m-Q4_K_M.gguf --force-download\n"
    )


# -- arguments -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "org/" + "n" * 97,  # the Hub's names are at most 96 characters
        "org--x/name",
        "org/na..me",
        "org/name.",
        "-org/name",
        "org/name.git",
        "ørg/name",
        "org/name\x1b[31m",
        "org/na me",
        "org/name/extra",
    ],
)
def test_what_is_not_a_repository_id_is_refused(text):
    with pytest.raises(UsageError) as e:
        parse_ref(text)
    assert e.value.message.endswith(
        "is neither a directory nor a repository id like Qwen/Qwen3-8B[@revision]."
    )
    assert "\x1b" not in e.value.message


@pytest.mark.parametrize("text", ["org/name", "Org_1/Name.v2-3", "a/b", "org/refs", "_a/_b"])
def test_repository_ids_the_hub_allows_are_taken(text):
    assert parse_ref(text) == RepoRef(text)


def test_a_path_too_long_for_the_system_is_one_sentence(run):
    code, out, err = run("./" + "x" * 5000, "--fleet", FLEET)
    assert (code, out) == (3, "")
    assert (
        err == "llmfit: " + "x" * 491 + "…" + "x" * 462 + ": cannot be read (File name too long).\n"
    )


def test_an_unknown_users_home_is_no_such_directory(run):
    code, _, err = run("~nosuchuser-llmfit/model", "--fleet", FLEET)
    assert code == 3
    assert err == "llmfit: ~nosuchuser-llmfit/model: no such directory.\n"


# -- bounded walks ---------------------------------------------------------------------------------


def test_a_directory_of_too_many_files_is_not_walked(tmp_path, monkeypatch):
    monkeypatch.setattr(repo_module, "MAX_WALK_ENTRIES", 50)
    root = model_dir(tmp_path / "model")
    for i in range(60):
        (root / f"f{i}.txt").write_text("")
    with pytest.raises(BadInputError) as e:
        load_repo(str(root))
    assert e.value.message == (
        f"{root} holds more than 50 files and folders within 4 levels: it is not a model "
        "repository's directory."
    )


@pytest.fixture
def unnest():
    """Remove the nested trees a test made, a level at a time: pytest's own clean-up of old
    temporary folders recurses, and a thousand levels are past Python's recursion limit."""
    made: list[Path] = []
    yield made.append
    for root in made:
        while (root / "d").is_dir():
            if (root / "d" / "d").is_dir():
                os.rename(root / "d" / "d", root / "e")
                os.rmdir(root / "d")
                os.rename(root / "e", root / "d")
            else:
                os.rmdir(root / "d")


def _nest(root: Path, depth: int) -> Path:
    # os.makedirs of one long path would pass PATH_MAX: the folders are made a level at a time.
    here = os.open(root, os.O_RDONLY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=here)
            nxt = os.open("d", os.O_RDONLY, dir_fd=here)
            os.close(here)
            here = nxt
    finally:
        os.close(here)
    return root


def test_a_tree_nested_a_thousand_deep_costs_a_bounded_walk(tmp_path, unnest):
    root = _nest(model_dir(tmp_path / "model"), 1000)
    unnest(root)
    started = time.monotonic()
    repo = load_repo(str(root))
    assert repo.artifacts == ()
    assert time.monotonic() - started < 2


def test_a_tree_nested_a_thousand_deep_beside_a_gguf_is_refused(tmp_path, unnest):
    (tmp_path / "model").mkdir()
    root = _nest(tmp_path / "model", 1000)
    unnest(root)
    (root / "m.gguf").write_bytes(b"GGUF")
    with pytest.raises(BadInputError) as e:
        load_repo(str(root))
    assert e.value.message == (
        f"{root} nests folders more than 4 deep: it is not a model repository's directory."
    )


def test_the_root_of_the_disk_is_not_walked(run):
    started = time.monotonic()
    code, out, err = run("/", "--fleet", FLEET)
    assert (code, out) == (3, "")
    assert err in (
        "llmfit: / holds more than 10,000 files and folders within 4 levels: it is not a model "
        "repository's directory.\n",
        "llmfit: / has no config.json (/).\n",
    )
    assert time.monotonic() - started < 10
