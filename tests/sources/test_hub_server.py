"""The loopback Hub answers as the Hub does, as huggingface_hub's own calls see it."""

from __future__ import annotations

import pytest


def test_tree_info_and_file_metadata_as_huggingface_hub_reads_them(hubserver):
    from huggingface_hub import HfApi, get_hf_file_metadata, hf_hub_url

    fixture = hubserver.repos["Qwen/Qwen3-8B"]
    api = HfApi(endpoint=hubserver.url)
    tree = {f.path: f.size for f in api.list_repo_tree("Qwen/Qwen3-8B", recursive=True)}
    assert tree["model-00001-of-00005.safetensors"] == 3_945_918_752
    assert set(tree) == set(fixture.files)
    info = api.model_info("Qwen/Qwen3-8B", files_metadata=True)
    assert info.sha == fixture.commit
    assert {s.rfilename: s.size for s in info.siblings} == tree
    meta = get_hf_file_metadata(hf_hub_url("Qwen/Qwen3-8B", "config.json", endpoint=hubserver.url))
    assert meta.commit_hash == fixture.commit
    assert meta.size == len(fixture.files["config.json"].content)
    assert meta.etag == fixture.files["config.json"].blob_id


def test_a_range_is_answered_with_206_and_counted(hubserver):
    from huggingface_hub.utils import get_session

    fixture = hubserver.repos["Qwen/Qwen3-8B"]
    url = f"{hubserver.url}/Qwen/Qwen3-8B/resolve/main/model-00001-of-00005.safetensors"
    r = get_session().get(url, headers={"Range": "bytes=0-7"})
    assert r.status_code == 206
    assert r.headers["Content-Range"] == "bytes 0-7/3945918752"
    assert r.content == fixture.files["model-00001-of-00005.safetensors"].content[:8]
    assert r.headers["X-Repo-Commit"] == fixture.commit
    assert hubserver.requests[-1].sent == 8
    assert hubserver.requests[-1].range == "bytes=0-7"


@pytest.mark.parametrize(
    ("mode", "status", "code"),
    [
        ("unauthorized", 401, None),
        ("repo-not-found", 404, "RepoNotFound"),
        ("revision-not-found", 404, "RevisionNotFound"),
        ("error", 500, None),
    ],
)
def test_failure_modes_answer_as_the_hub_does(hubserver, mode, status, code):
    from huggingface_hub.utils import get_session

    hubserver.mode = mode
    r = get_session().get(f"{hubserver.url}/api/models/Qwen/Qwen3-8B")
    assert r.status_code == status
    assert r.headers.get("X-Error-Code") == code


def test_gated_refuses_files_but_describes_the_repo(hubserver):
    from huggingface_hub.utils import get_session

    hubserver.mode = "gated"
    assert get_session().get(f"{hubserver.url}/api/models/Qwen/Qwen3-8B").status_code == 200
    r = get_session().head(f"{hubserver.url}/Qwen/Qwen3-8B/resolve/main/config.json")
    assert (r.status_code, r.headers["X-Error-Code"]) == (403, "GatedRepo")
