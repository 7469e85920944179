"""Find a repository in the local Hugging Face cache, laid out as huggingface_hub lays it out.

`<cache>/models--Org--Name/refs/<revision>` holds a commit hash, and
`<cache>/models--Org--Name/snapshots/<commit>/` the files of that commit. The cache directory is
huggingface_hub's own (`HF_HUB_CACHE`, else `HF_HOME/hub`), read from `huggingface_hub.constants`,
so llmfit and `hf download` always agree on where it is. The lookup mirrors
`huggingface_hub.try_to_load_from_cache`, which is not called directly because importing it costs
a plan 0.18 s, as much as the rest of the run.

Every name that becomes a path here (a repository id, a revision, a commit, a file of a
repository) comes from outside: an argument, a Hub's answer, an index. Each is checked before any
file is touched, so that `..`, an absolute path or a link cannot lead a read or a write out of the
cache or the repository.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from llmfit.errors import CacheDamaged, CacheUnusable, RepoNotFound, UsageError
from llmfit.plan.launch import quote_exact

# huggingface_hub's own rule (utils/_validators.py, validate_repo_id): a namespace and a name of
# letters, digits, '-', '_' and '.', neither starting nor ending with '-' or '.', the name at most
# 96 characters, and no '--' or '..' anywhere (the cache's folder names join the two with '--').
_REPO_PART = r"[A-Za-z0-9_](?:[A-Za-z0-9_.\-]*[A-Za-z0-9_])?"
_REPO_ID = re.compile(rf"{_REPO_PART}/{_REPO_PART}", re.ASCII)
MAX_REPO_NAME = 96
COMMIT = re.compile(r"[0-9a-f]{40}", re.ASCII)
# A revision becomes a file under refs/: at most a file name's 255 bytes.
MAX_REVISION_BYTES = 255
# A ref file holds 40 hexadecimal digits; anything much longer is not one, and is not read whole.
_REF_READ = 256


@dataclass(frozen=True)
class RepoRef:
    """`org/name`, optionally at a revision (branch, tag or commit)."""

    repo_id: str
    revision: str | None = None


def show(value: object, limit: int = 60) -> str:
    """A value from outside as a message quotes it: its repr, cut to `limit` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 4] + "…" + text[-3:]


def is_repo_id(text: str) -> bool:
    if not _REPO_ID.fullmatch(text) or "--" in text or ".." in text:
        return False
    return len(text.split("/")[1]) <= MAX_REPO_NAME and not text.endswith(".git")


def revision_problem(revision: str) -> str | None:
    """Why `revision` cannot be a branch, tag or commit name; None when it can be one.

    git's rules (git check-ref-format), which the Hub's branch and tag names follow, and which
    keep a revision one harmless path under `refs/`: no `..`, no empty, `.`-led or `.lock`
    component, no control character, space, `~^:?*[\\` or `@{`, not `@`, no leading `-` or `/`.
    """
    if not revision:
        return "it is empty"
    if len(revision.encode("utf-8", "surrogatepass")) > MAX_REVISION_BYTES:
        return f"it is longer than {MAX_REVISION_BYTES} bytes"
    if not revision.isprintable() or any(c in revision for c in " ~^:?*[\\"):
        return "it holds a space, a control character or one of ~^:?*[\\"
    if ".." in revision or "@{" in revision or revision == "@":
        return "it holds '..' or '@{', or is '@'"
    if revision.startswith("-"):
        return "it starts with '-'"
    if any(not p or p.startswith(".") or p.endswith((".lock", ".")) for p in revision.split("/")):
        return "a part of it is empty, starts with '.', or ends with '.' or '.lock'"
    return None


def file_name_problem(name: object) -> str | None:
    """Why `name` cannot be a file of a repository; None when it can be one: a relative path
    with no empty, `.` or `..` part, no backslash and no control character."""
    if not isinstance(name, str) or not name:
        return "it is not a file name"
    if name.startswith("/") or "\\" in name or not name.isprintable():
        return "it is an absolute path or holds a backslash or a control character"
    parts = name.split("/")
    if any(p in ("", ".", "..") for p in parts):
        return "it has an empty, '.' or '..' part"
    if any(len(p.encode("utf-8", "surrogatepass")) > 255 for p in parts):
        return "a part of it is longer than 255 bytes"
    return None


def inside(path: Path, root: Path) -> bool:
    """Whether `path`, every link on the way followed, stays within `root` (its links followed)."""
    try:
        return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(root))
    except (OSError, ValueError):
        return False


def parse_ref(
    text: str, cache_dir: Path | None = None, *, similar: Callable[[str], list[str]] | None = None
) -> RepoRef | Path:
    """A repository id (`org/name[@revision]`) or a local directory.

    A bare name (`Qwen3-8B`) is refused with the cached repositories of that name, and, given
    `similar` (the Hub's search, sources/hub.py `suggest`, passed in by the caller that may go
    online: this module reads the cache and imports nothing that reaches the Hub), those it
    offers, as what was meant."""
    if text.startswith(("/", "./", "../", "~")) or os.path.isdir(text):
        try:
            return Path(text).expanduser()
        except RuntimeError:  # ~user for a user this system does not know
            return Path(text)
    repo, _, revision = text.partition("@")
    if not is_repo_id(repo) or (_ and not revision):
        meant = suggestions(repo, cache_dir) if "/" not in repo else []
        if not meant and similar and "/" not in repo and _REPO_PART_ONLY.fullmatch(repo):
            try:
                meant = similar(repo)
            except Exception:  # a suggestion is a courtesy: no answer means none
                meant = []
        raise UsageError(
            f"{show(text)} is neither a directory nor a repository id like "
            "Qwen/Qwen3-8B[@revision]" + (f"; did you mean {_either(meant)}?" if meant else "."),
            hint=f"llmfit {meant[0]}" if meant else None,
        )
    if revision:
        check_revision(revision, f"{show(text)} names revision {show(revision)}")
    return RepoRef(repo, revision or None)


_REPO_PART_ONLY = re.compile(_REPO_PART, re.ASCII)
# How a hint that names a cached repository ends: the next command is that one, not a download.
IN_CACHE = "  (in the local cache)"


def _either(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def cached_repo_ids(cache_dir: Path | None = None) -> list[str]:
    """The model repositories the cache has a folder for, by id (folders whose name is not one a
    repository can have are left out); [] when the cache cannot be listed."""
    cache = cache_dir or hub_cache_dir()
    try:
        names = [e.name for e in os.scandir(cache) if e.name.startswith("models--")]
    except OSError:
        return []
    out = []
    for name in names:
        org, sep, rest = name.removeprefix("models--").partition("--")
        repo_id = f"{org}/{rest}"
        if sep and is_repo_id(repo_id):
            out.append(repo_id)
    return sorted(out)


_SEPARATORS = re.compile(r"[-_. ]+")
_NUMBER = re.compile(r"[0-9]+")


def _spelling(text: str) -> str:
    """A name as its spelling is compared: no case, no separators."""
    return _SEPARATORS.sub("", text.lower())


def _one_letter(a: str, b: str) -> bool:
    """Whether `a` and `b` differ by at most one letter typed wrong, missed, added or swapped
    with the next (a Damerau distance of one), where no number changes: Qwen3-8b is Qwen3-8B
    misspelt, Qwen3-4B another model."""
    if _NUMBER.findall(a) != _NUMBER.findall(b):
        return False
    if a == b:
        return True
    if abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        if len(diff) == 1:
            return True
        i, j = diff[0], diff[-1]
        return len(diff) == 2 and j == i + 1 and a[i] == b[j] and a[j] == b[i]
    short, long_ = (a, b) if len(a) < len(b) else (b, a)
    return any(long_[:i] + long_[i + 1 :] == short for i in range(len(long_)))


def near_spelling(typed: str, repo_id: str) -> bool:
    """Whether `repo_id` is `typed` spelt nearly the same (issue 34: a did-you-mean offers the
    name typed, never another model): another case or separator, one letter off, or the same
    name under another namespace (or none given)."""
    org, _, name = repo_id.partition("/")
    if "/" not in typed:
        return _one_letter(_spelling(typed), _spelling(name))
    t_org, _, t_name = typed.partition("/")
    if _spelling(t_name) == _spelling(name):
        return True  # the name itself, in another case or spelling, under any namespace
    return _spelling(t_org) == _spelling(org) and _one_letter(_spelling(t_name), _spelling(name))


def suggestions(name: str, cache_dir: Path | None = None, limit: int = 3) -> list[str]:
    """The cached repositories someone typing `name` meant: the same id spelt nearly the same
    (near_spelling), the same id in another case first (the Hub's ids are not case-sensitive,
    the cache's folders are)."""
    ids = cached_repo_ids(cache_dir)
    low = name.lower()
    same = [i for i in ids if i.lower() == low and i != name]
    near = [i for i in ids if i != name and near_spelling(name, i)]
    return list(dict.fromkeys(same + near))[:limit]


def check_revision(revision: str, said: str) -> None:
    """Refuse a revision that cannot be one, before it reaches a path or a request."""
    why = revision_problem(revision)
    if why is not None:
        raise UsageError(f"{said}, which cannot be a branch, tag or commit: {why}.")


def check_hf_environment() -> None:
    """Refuse the huggingface_hub settings it would fail on with a traceback, before it is
    imported: it reads HF_HUB_ETAG_TIMEOUT and HF_HUB_DOWNLOAD_TIMEOUT with int() at import."""
    for var in ("HF_HUB_ETAG_TIMEOUT", "HF_HUB_DOWNLOAD_TIMEOUT"):
        value = os.environ.get(var)
        if not value:
            continue
        try:
            seconds = int(value)
        except ValueError:
            raise UsageError(
                f"{var} is {show(value)}, not a whole number of seconds.", hint=f"unset {var}"
            ) from None
        if not 0 <= seconds <= 86_400:
            raise UsageError(
                f"{var} is {seconds:,}; it must be a number of seconds from 1 to 86,400.",
                hint=f"unset {var}",
            )


def hub_cache_dir() -> Path:
    """huggingface_hub's cache directory, honouring HF_HUB_CACHE and HF_HOME as it does."""
    # The environment is read here, not only through constants (which read it once, at import), so
    # that a variable set after start-up is honoured as huggingface_hub would at its next start.
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    check_hf_environment()
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE)


def repo_folder(cache: Path, repo_id: str) -> Path:
    """The cache's folder of a repository (`models--Org--Name`), for an id already checked."""
    if not is_repo_id(repo_id):
        raise ValueError(f"not a repository id: {repo_id!r}")
    return cache / ("models--" + repo_id.replace("/", "--"))


@dataclass(frozen=True)
class Snapshot:
    """A cached snapshot of a repository: its folder and the commit it holds."""

    path: Path
    commit: str


def _read_ref(ref_file: Path, folder: Path) -> str | None:
    """The commit a ref file names; None when there is no such ref.

    Opened without blocking and read only if it is a regular file: a FIFO planted as
    `refs/main` would otherwise hold the run (and `llmfit models`, the whole listing) for ever,
    and a device would be read from."""
    try:
        if not os.path.lexists(ref_file):
            return None
        if not inside(ref_file, folder):
            raise CacheDamaged(
                f"{ref_file} leads outside {folder}: the cache is damaged.",
                hint=f"rm {quote_exact(str(ref_file))}  (an online run writes it again)",
            )
        try:
            fd = os.open(ref_file, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
        except FileNotFoundError:  # a link to nothing
            return None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise CacheDamaged(
                    f"{ref_file} is not a file (a folder, a FIFO or a device): the cache is "
                    "damaged.",
                    hint=f"rm -r {quote_exact(str(ref_file))}  (an online run writes it again)",
                )
            raw = os.read(fd, _REF_READ)
        finally:
            os.close(fd)
    except OSError as e:
        raise CacheUnusable(f"cannot read {ref_file} ({e.strerror or e}).") from None
    text = raw.decode("ascii", "replace").strip()
    if COMMIT.fullmatch(text):
        return text
    held = "is empty" if not text else f"holds {show(text)}"
    raise CacheDamaged(
        f"{ref_file} {held}, not a commit hash: the cache is damaged.",
        hint=f"rm {quote_exact(str(ref_file))}  (an online run writes it again)",
    )


def find_snapshot(ref: RepoRef, cache_dir: Path | None = None) -> Snapshot | None:
    """The cached snapshot of a repository at a revision; None when the cache lacks it."""
    cache = cache_dir or hub_cache_dir()
    folder = repo_folder(cache, ref.repo_id)
    revision = ref.revision or "main"
    if revision_problem(revision) is not None:
        raise ValueError(f"not a revision: {revision!r}")
    commit = _read_ref(folder / "refs" / revision, folder)
    if commit is None:
        if not COMMIT.fullmatch(revision):
            return None
        commit = revision
    snap = folder / "snapshots" / commit
    try:
        if not snap.is_dir():
            return None
    except OSError as e:
        raise CacheUnusable(f"cannot read {snap} ({e.strerror or e}).") from None
    if not inside(snap, folder):
        raise CacheDamaged(f"{snap} leads outside {folder}: the cache is damaged.")
    return Snapshot(snap, commit)


def require_snapshot(ref: RepoRef, cache_dir: Path | None = None) -> Snapshot:
    snap = find_snapshot(ref, cache_dir)
    if snap is not None:
        return snap
    cache = cache_dir or hub_cache_dir()
    at = f" at revision {ref.revision}" if ref.revision else ""
    # Another spelling of a cached repository (Qwen/Qwen3-8b for Qwen/Qwen3-8B) is named; a
    # repository that is cached, but not at this revision, is not another one.
    meant = [] if repo_folder(cache, ref.repo_id).is_dir() else suggestions(ref.repo_id, cache)
    download = f"hf download {ref.repo_id} --include config.json '*.safetensors.index.json'" + (
        f" --revision {quote_exact(ref.revision)}" if ref.revision else ""
    )
    at_revision = f"@{ref.revision}" if ref.revision else ""
    raise RepoNotFound(
        f"{ref.repo_id}{at} is not in the local Hugging Face cache ({cache})"
        + (f"; did you mean {_either(meant)}?" if meant else "."),
        hint=f"llmfit {quote_exact(meant[0] + at_revision)}{IN_CACHE}" if meant else download,
    )
