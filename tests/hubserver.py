"""A Hugging Face Hub on 127.0.0.1, serving fixture repositories the way the Hub does.

Tests point the real `huggingface_hub` client at it (HF_ENDPOINT) and then count what it was asked
for and what it sent. It answers:

- `GET /api/models/{repo}` and `/api/models/{repo}/revision/{rev}`: the repository's info, its
  commit (`sha`) and its files (`siblings`, with `size`, `blobId` and `lfs` when `?blobs=true`);
- `GET /api/models/{repo}/tree/{rev}[/{path}]`: the file tree with sizes;
- `GET /api/models?search=…&limit=…`: repositories whose id contains the text; with
  `filter=base_model:quantized:REPO`, those that say they quantise REPO;
- `HEAD`/`GET /{repo}/resolve/{rev}/{file}`: the file, with `ETag`, `X-Repo-Commit`,
  `Content-Length` and `Accept-Ranges`; a `Range: bytes=a-b` request is answered with 206.

A file may declare a size larger than the bytes it holds (a weight shard declared as gigabytes whose
real header is served, followed by zeros): what a test then sees sent is what the client asked for.

`mode` makes every request (or, with `fail_on`, those whose path contains it) fail the way the
Hub or the network does: "unauthorized" (401, invalid token), "gated" (403 GatedRepo on files, as
the Hub answers for a licence not accepted), "repo-not-found" (404 RepoNotFound),
"revision-not-found" (404 RevisionNotFound), "error" (500), "drop" (the connection closed with no
answer), "slow" (an answer after `slow_seconds`).

And the way a hostile or broken server, or a proxy in the way, answers (issue 12): "html" (a web
page, 200, for everything: a captive portal), "redirect-loop" (302 to the same address, for ever),
"truncate" (the answer's Content-Length, then half its body, then the connection closed),
"trickle" (the whole answer, status line and headers too, one byte every `trickle_seconds`),
"gzip-bomb" (`Content-Encoding: gzip` over `bomb_bytes` of zeros, whatever was asked), "wrong-range"
(a 206 whose Content-Range and bytes start one byte later than asked), "wrong-json" (the
repository's description replaced by `wrong_json`, a value of the wrong JSON type), and
"bad-commit" (the description's commit replaced by `bad_commit`).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

MODES = (
    "unauthorized",
    "gated",
    "repo-not-found",
    "revision-not-found",
    "error",
    "drop",
    "slow",
    "html",
    "redirect-loop",
    "redirect-away",
    "truncate",
    "trickle",
    "gzip-bomb",
    "wrong-range",
    "wrong-json",
    "bad-commit",
)
# Modes that change an answer the server then gives, rather than answering in its place.
_ALTERING = ("truncate", "trickle", "gzip-bomb", "wrong-range", "wrong-json", "bad-commit")
HTML_PAGE = (
    b"<!DOCTYPE html>\n<html><head><title>Sign in to the network</title></head>"
    b"<body><h1>Welcome</h1><p>Accept the terms to continue.</p></body></html>\n"
)
_bombs: dict[int, bytes] = {}


def gzip_bomb(size: int) -> bytes:
    """`size` zero bytes, gzipped: about a thousandth of their size (kept: compressing is slow)."""
    if size not in _bombs:
        _bombs[size] = gzip.compress(b"\0" * size, compresslevel=9, mtime=0)
    return _bombs[size]


@dataclass(frozen=True)
class FileSpec:
    """A file of a fixture repository: the bytes it holds, and the size it claims if larger."""

    content: bytes
    size: int | None = None  # declared size; the content is followed by zeros up to it
    lfs: bool = False

    @property
    def length(self) -> int:
        return self.size if self.size is not None else len(self.content)

    def read(self, start: int, stop: int) -> bytes:
        """Bytes [start, stop) of the file as declared."""
        head = self.content[start:stop]
        return head + b"\0" * max(0, stop - max(start, len(self.content)))

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.content + str(self.length).encode()).hexdigest()

    @property
    def blob_id(self) -> str:
        return hashlib.sha1(self.content + str(self.length).encode()).hexdigest()


@dataclass
class FixtureRepo:
    repo_id: str
    commit: str
    files: dict[str, FileSpec]
    refs: dict[str, str] = field(default_factory=dict)  # branch or tag → commit (main → commit)
    gated: bool = False
    # The model its card says it quantises (the Hub's model tree: base_model:quantized:…).
    quantises: str | None = None

    def __post_init__(self) -> None:
        self.refs.setdefault("main", self.commit)

    def resolve(self, revision: str) -> str | None:
        return self.commit if revision == self.commit else self.refs.get(revision)


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    range: str | None
    status: int  # 0: no answer (dropped, or too slow for the client)
    sent: int  # body bytes sent
    authorization: str | None


_RESOLVE = re.compile(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<file>.+)$")
_INFO = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+?)(?:/revision/(?P<rev>[^/]+))?$")
_TREE = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+)/tree/(?P<rev>[^/]+)(?:/(?P<path>.*))?$")


class _QuietServer(ThreadingHTTPServer):
    """A client that hangs up mid-answer (llmfit cancelling its other reads after one failed) is
    what the tests provoke, not an error: socketserver would print its traceback on stderr, into
    the very output the tests compare."""

    def handle_error(self, request, client_address) -> None:  # noqa: ARG002
        pass


class HubServer:
    """A threaded HTTP server on 127.0.0.1:<free port>; use as a context manager."""

    def __init__(self, repos: list[FixtureRepo] | None = None) -> None:
        self.repos: dict[str, FixtureRepo] = {r.repo_id: r for r in repos or []}
        self.mode: str | None = None
        self.fail_on: str | Callable[[str], bool] = ""  # a path substring, or a test of the path
        self.slow_seconds: float = 5.0
        self.trickle_seconds: float = 0.2
        self.bomb_bytes = 256 << 20
        self.bomb_encoding = "gzip"  # what the bomb's Content-Encoding says it is
        self.wrong_json: object = ["not", "a", "repository"]
        self.bad_commit: object = "../../../../outside"
        self.ignore_range = False  # answer a Range request with the whole file, as some proxies do
        self.delay = 0.0  # seconds every answer waits, so that parallel requests overlap
        # A next-page link the search and model-tree answers carry (`Link: <…>; rel="next"`), and
        # where "redirect-away" sends every request (another server's address): issue 24.
        self.next_page: str | None = None
        self.away: str = "http://127.0.0.1:9"
        self.in_flight = 0
        self.max_in_flight = 0
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        server = self

        class Handler(_Handler):
            hub = server

        self._httpd = _QuietServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def add(self, repo: FixtureRepo) -> None:
        self.repos[repo.repo_id] = repo

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self.max_in_flight = 0

    @property
    def bytes_sent(self) -> int:
        with self._lock:
            return sum(r.sent for r in self.requests)

    def count(self, method: str | None = None, contains: str = "") -> int:
        with self._lock:
            return sum(
                1
                for r in self.requests
                if (method is None or r.method == method) and contains in r.path
            )

    def start(self) -> HubServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> HubServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _record(self, request: Request) -> None:
        with self._lock:
            self.requests.append(request)


class _Handler(BaseHTTPRequestHandler):
    hub: HubServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass

    def do_HEAD(self) -> None:
        self._handle(head=True)

    def do_GET(self) -> None:
        self._handle(head=False)

    # -- dispatch ---------------------------------------------------------------------------

    def _handle(self, head: bool) -> None:
        hub = self.hub
        parts = urlsplit(self.path)
        path = unquote(parts.path)
        query = parse_qs(parts.query)
        self._path = path
        self._recorded = False
        self._left = False
        self._mode: str | None = None
        with hub._lock:
            hub.in_flight += 1
            hub.max_in_flight = max(hub.max_in_flight, hub.in_flight)
        try:
            if hub.delay:
                hub._stop.wait(hub.delay)
            hit = hub.fail_on(path) if callable(hub.fail_on) else hub.fail_on in path
            mode = hub.mode if hit else None
            if mode == "drop":
                self.close_connection = True
                return
            if mode == "slow" and hub._stop.wait(hub.slow_seconds):
                return
            if mode in _ALTERING:
                self._mode = mode
            elif mode and mode != "slow" and self._fail(mode, path, head):
                return
            if m := _RESOLVE.match(path):
                self._resolve(m["repo"], m["rev"], m["file"], head)
            elif m := _TREE.match(path):
                self._tree(m["repo"], m["rev"], m["path"] or "")
            elif path == "/api/models":
                limit = int(query.get("limit", ["20"])[0])
                tree = query.get("filter", [""])[0]
                if tree.startswith("base_model:quantized:"):
                    self._quantisations(tree.split(":", 2)[2], limit)
                else:
                    self._search(query.get("search", [""])[0], limit)
            elif m := _INFO.match(path):
                self._info(m["repo"], m["rev"], "true" in query.get("blobs", []))
            else:
                self._error(404, None, "Not Found", head)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        finally:
            self._leave()
            if not self._recorded:
                self._record(0, 0)

    def _leave(self) -> None:
        """A request stops being in flight as its answer starts to leave: its client may send the
        next one as soon as it has read it, while this handler is still closing up, and counting
        it then would see one request more in flight than the client ever had (seen on a loaded
        machine: 5 of a bound of 4)."""
        if not self._left:
            self._left = True
            with self.hub._lock:
                self.hub.in_flight -= 1

    def _record(self, status: int, sent: int) -> None:
        """Count a request before its answer leaves: a client never sees an answer not counted."""
        self._recorded = True
        self._leave()
        self.hub._record(
            Request(
                self.command,
                self._path,
                self.headers.get("Range"),
                status,
                sent,
                self.headers.get("Authorization"),
            )
        )

    def _send(self, status: int, headers: dict[str, str], body: bytes, length: int) -> None:
        if self._mode == "gzip-bomb" and self.command == "GET" and status < 300:
            body = gzip_bomb(self.hub.bomb_bytes)
            headers = {**headers, "Content-Encoding": self.hub.bomb_encoding}
            length = len(body)
        if self._mode in ("trickle", "truncate"):
            self._send_raw(status, headers, body, length)
            return
        self._record(status, len(body))
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(length))
        self.end_headers()
        if body:
            self.wfile.write(body)

    def _send_raw(self, status: int, headers: dict[str, str], body: bytes, length: int) -> None:
        """The answer's bytes written by hand: trickled a byte at a time, or cut short."""
        lines = [f"HTTP/1.1 {status} {self.responses.get(status, ('',))[0]}"]
        lines += [f"{k}: {v}" for k, v in {**headers, "Content-Length": str(length)}.items()]
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        self.close_connection = True
        if self._mode == "truncate":
            cut = body[: len(body) // 2]
            self._record(status, len(cut))
            self.wfile.write(head + cut)
            return
        self._record(status, len(body))
        whole = head + body
        for i in range(len(whole)):
            if self.hub._stop.wait(self.hub.trickle_seconds):
                return
            self.wfile.write(whole[i : i + 1])
            self.wfile.flush()

    def _fail(self, mode: str, path: str, head: bool) -> bool:
        if mode == "unauthorized":
            self._error(401, None, "Invalid credentials in Authorization header", head)
        elif mode == "gated":
            if "/resolve/" not in path:
                return False  # the Hub describes a gated repository; it refuses its files
            repo = path.split("/resolve/")[0].lstrip("/")
            self._error(
                403,
                "GatedRepo",
                f"Access to model {repo} is restricted and you are not in the authorized list. "
                f"Visit https://huggingface.co/{repo} to ask for access.",
                head,
            )
        elif mode == "repo-not-found":
            self._error(404, "RepoNotFound", "Repository not found", head)
        elif mode == "revision-not-found":
            self._error(404, "RevisionNotFound", "Invalid rev id", head)
        elif mode == "error":
            self._error(500, None, "Internal Error", head)
        elif mode == "html":
            headers = {"Content-Type": "text/html; charset=utf-8"}
            self._send(200, headers, b"" if head else HTML_PAGE, len(HTML_PAGE))
        elif mode == "redirect-loop":
            self._send(302, {"Location": self.path}, b"", 0)
        elif mode == "redirect-away":
            self._send(302, {"Location": self.hub.away + self.path}, b"", 0)
        else:
            raise ValueError(f"unknown mode {mode!r}")
        return True

    # -- answers ----------------------------------------------------------------------------

    def _repo(
        self, repo_id: str, revision: str | None, head: bool
    ) -> tuple[FixtureRepo, str] | None:
        repo = self.hub.repos.get(repo_id)
        if repo is None:
            self._error(404, "RepoNotFound", "Repository not found", head)
            return None
        commit = repo.resolve(revision or "main")
        if commit is None:
            self._error(404, "RevisionNotFound", "Invalid rev id: " + (revision or ""), head)
            return None
        return repo, commit

    def _info(self, repo_id: str, revision: str | None, blobs: bool) -> None:
        found = self._repo(repo_id, revision, False)
        if found is None:
            return
        repo, commit = found
        if self._mode == "wrong-json":
            self._json(self.hub.wrong_json, commit)
            return
        siblings = []
        for name, spec in sorted(repo.files.items()):
            sib: dict[str, object] = {"rfilename": name}
            if blobs:
                sib["size"] = spec.length
                sib["blobId"] = spec.blob_id
                if spec.lfs:
                    sib["lfs"] = {"size": spec.length, "sha256": spec.sha256, "pointerSize": 134}
            siblings.append(sib)
        self._json(
            {
                "_id": hashlib.sha1(repo_id.encode()).hexdigest()[:24],
                "id": repo_id,
                "modelId": repo_id,
                "sha": self.hub.bad_commit if self._mode == "bad-commit" else commit,
                "private": False,
                "gated": "manual" if repo.gated else False,
                "disabled": False,
                "tags": [],
                "downloads": 0,
                "likes": 0,
                "lastModified": "2026-11-01T00:00:00.000Z",
                "createdAt": "2026-01-01T00:00:00.000Z",
                "siblings": siblings,
            },
            commit,
        )

    def _quantisations(self, base: str, limit: int) -> None:
        found = [r for r in sorted(self.hub.repos) if self.hub.repos[r].quantises == base][:limit]
        self._listing(found)

    def _listing(self, found: list[str]) -> None:
        body = json.dumps([{"_id": r, "id": r, "modelId": r} for r in found]).encode()
        headers = {"Content-Type": "application/json; charset=utf-8"}
        if self.hub.next_page:
            headers["Link"] = f'<{self.hub.next_page}>; rel="next"'
        self._send(200, headers, body, len(body))

    def _search(self, text: str, limit: int) -> None:
        found = [r for r in sorted(self.hub.repos) if text.lower() in r.lower()][:limit]
        self._listing(found)

    def _tree(self, repo_id: str, revision: str, prefix: str) -> None:
        found = self._repo(repo_id, revision, False)
        if found is None:
            return
        repo, commit = found
        entries = []
        for name, spec in sorted(repo.files.items()):
            if prefix and not name.startswith(prefix.rstrip("/") + "/"):
                continue
            entry: dict[str, object] = {
                "type": "file",
                "oid": spec.blob_id,
                "size": spec.length,
                "path": name,
            }
            if spec.lfs:
                entry["lfs"] = {"oid": spec.sha256, "size": spec.length, "pointerSize": 134}
            entries.append(entry)
        self._json(entries, commit)

    def _resolve(self, repo_id: str, revision: str, name: str, head: bool) -> None:
        found = self._repo(repo_id, revision, head)
        if found is None:
            return
        repo, commit = found
        spec = repo.files.get(name)
        if spec is None:
            self._error(404, "EntryNotFound", f"{name} does not exist", head, commit)
            return
        etag = spec.sha256 if spec.lfs else spec.blob_id
        size = spec.length
        start, stop, status = 0, size, 200
        rng = self.headers.get("Range")
        if not head and (not rng or self.hub.ignore_range) and size > 1 << 20:
            self._stream_whole(spec, etag, commit)
            return
        if rng and not head:
            m = re.fullmatch(r"bytes=(\d+)-(\d*)", rng.strip())
            if not m or int(m[1]) >= size:
                self._error(416, None, "Range Not Satisfiable", head, commit)
                return
            start = int(m[1])
            stop = min(size, int(m[2]) + 1) if m[2] else size
            status = 206
            if self._mode == "wrong-range":
                start, stop = start + 1, min(size, stop + 1)
        body = b"" if head else spec.read(start, stop)
        headers = {
            "ETag": f'"{etag}"',
            "X-Repo-Commit": commit,
            "Accept-Ranges": "bytes",
            "Content-Type": "application/octet-stream",
        }
        if status == 206:
            headers["Content-Range"] = f"bytes {start}-{stop - 1}/{size}"
        self._send(status, headers, body, size if head else len(body))

    def _stream_whole(self, spec: FileSpec, etag: str, commit: str) -> None:
        """A large file whole, in chunks, counting what was written before the client hung up."""
        self.send_response(200)
        self.send_header("ETag", f'"{etag}"')
        self.send_header("X-Repo-Commit", commit)
        self.send_header("Content-Length", str(spec.length))
        self.end_headers()
        sent = 0
        try:
            while sent < spec.length:
                chunk = spec.read(sent, min(spec.length, sent + (64 << 10)))
                self.wfile.write(chunk)
                sent += len(chunk)
        finally:
            self.close_connection = True
            self._record(200, sent)

    def _json(self, data: object, commit: str) -> None:
        body = json.dumps(data).encode()
        headers = {"Content-Type": "application/json; charset=utf-8", "X-Repo-Commit": commit}
        self._send(200, headers, body, len(body))

    def _error(
        self, status: int, code: str | None, message: str, head: bool, commit: str | None = None
    ) -> None:
        body = b"" if head else json.dumps({"error": message}).encode()
        headers = {"X-Error-Message": message, "Content-Type": "application/json; charset=utf-8"}
        if code:
            headers["X-Error-Code"] = code
        if commit:
            headers["X-Repo-Commit"] = commit
        self._send(status, headers, body, len(body))
