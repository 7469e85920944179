"""Which commit a revision names on the Hub now, asked in one light request (issue 17).

An online plan of a repository already cached must still ask the Hub which commit its branch
names, so that a new commit is noticed. Asking through huggingface_hub's client means importing
it (about 200 ms, twice a whole plan from the cache); the question itself is one GET of the
endpoint `HfApi.model_info` asks, with the endpoint, token and timeout huggingface_hub would use
(read from `huggingface_hub.constants`, which costs 4 ms). This is only a shortcut: any answer
but a commit (an error, a refusal, a redirect, HTML, no answer in time) is None, and the caller
then asks through huggingface_hub as before, whose answer and errors are the reference. No
redirect is followed (a token must not go to another host), at most 1 MB is read, and the whole
question has one deadline.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from llmfit import __version__

if TYPE_CHECKING:
    from llmfit.sources.cache import RepoRef
    from llmfit.sources.hub import RemoteRepo
    from llmfit.sources.metacache import MetaCache

_COMMIT = re.compile(r"[0-9a-f]{40}")
MAX_ANSWER = 1 << 20


def current_commit(repo_id: str, revision: str | None) -> str | None:
    """The commit `revision` (None: main) of `repo_id` names on the Hub now; None when the Hub
    did not plainly say, for whatever reason."""
    try:
        from huggingface_hub import constants

        if os.environ.get("HF_OIDC_RESOURCE"):
            return None  # a token only huggingface_hub can make
        timeout = float(constants.HF_HUB_ETAG_TIMEOUT)
        url = f"{constants.ENDPOINT.rstrip('/')}/api/models/{repo_id}"
        if revision:
            from urllib.parse import quote

            url += f"/revision/{quote(revision, safe='')}"
        headers = {"user-agent": f"llmfit/{__version__}"}
        token = _token(constants)
        if token:
            headers["authorization"] = f"Bearer {token}"
    except Exception:
        return None
    return _ask(f"{url}?expand=sha", headers, timeout)


def _token(constants: object) -> str | None:
    """The token huggingface_hub would send unasked: $HF_TOKEN, else the stored login."""
    if getattr(constants, "HF_HUB_DISABLE_IMPLICIT_TOKEN", False):
        return None
    token = os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN")
    if token is None:
        try:
            token = Path(constants.HF_TOKEN_PATH).read_text(encoding="utf-8")  # type: ignore[attr-defined]
        except (OSError, UnicodeDecodeError):
            return None
    return token.strip() or None


def _ask(url: str, headers: dict[str, str], timeout: float) -> str | None:
    import threading

    found: list[str] = []

    def ask() -> None:
        import json
        import urllib.request

        class NoRedirect(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, *args: object, **kwargs: object) -> None:
                return None  # a 3xx is then an error: no answer here

        try:
            opener = urllib.request.build_opener(NoRedirect)
            request = urllib.request.Request(url, headers=headers)
            with opener.open(request, timeout=timeout) as answer:
                if answer.status != 200:
                    return
                body = answer.read(MAX_ANSWER + 1)
            if len(body) > MAX_ANSWER:
                return
            sha = json.loads(body).get("sha")
            if isinstance(sha, str) and _COMMIT.fullmatch(sha):
                found.append(sha)
        except Exception:
            return

    # One deadline for the whole question, however the Hub trickles its answer: the thread is
    # left to its socket's own timeout, and the process does not wait for it.
    thread = threading.Thread(target=ask, daemon=True)
    thread.start()
    thread.join(timeout)
    return found[0] if found else None


def cached_unchanged(ref: RepoRef, cache_dir: Path | None, meta: MetaCache) -> RemoteRepo | None:
    """The repository as `hub.fetch_repo` would give it, from the caches alone, when the Hub says
    its revision still names the cached commit; None when fetch_repo has anything to fetch."""
    from llmfit.sources import hub
    from llmfit.sources.cache import find_snapshot

    snap = find_snapshot(ref, cache_dir)
    if snap is None:
        return None
    files = meta.listing(ref.repo_id, snap.commit)
    if files is None:
        return None
    if any(f in files and not (snap.path / f).is_file() for f in hub.SMALL_FILES):
        return None
    if current_commit(ref.repo_id, ref.revision) != snap.commit:
        return None
    return hub.RemoteRepo(ref.repo_id, ref.revision, snap.commit, files, snap.path)
