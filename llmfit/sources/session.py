"""The HTTP client llmfit gives huggingface_hub: its own client, with the bounds it lacks.

huggingface_hub sends every request through one `httpx2.Client` that a program may replace
(`set_client_factory`). llmfit's is the same client (the same request hook, redirects followed,
no client-wide timeout: each call passes its own), with three bounds a hostile or broken server
would otherwise find missing:

- a deadline for each request, from the moment it is sent to its last byte: the per-read timeout
  (`HF_HUB_ETAG_TIMEOUT`) alone lets a server that sends a byte every few seconds hold a run for
  ever. It is enforced where the socket is read, so that headers sent a byte at a time are given
  up on as surely as a body;
- a cap on the bytes of any answer, counted after decompression: a few megabytes of gzip can
  inflate to gigabytes. Answers are asked for uncompressed or in gzip or deflate, and inflated
  here, never past the cap; an encoding that was not asked for is refused;
- at most MAX_REDIRECTS redirects (a loop is given up on at once, not after httpx's 20);
- credentials only for the endpoint the user named: a request carrying a token (an
  Authorization header or a cookie) to any other scheme, host or port is refused before it is
  sent. huggingface_hub's paginator sends the first page's headers, token and all, to wherever
  the answer's `Link: <…>; rel="next"` points, and every request, redirects included, passes
  this client's request hook.

Each bound raises its own exception (not one of httpx's, which huggingface_hub retries), carrying
the URL; `sources.hub` turns them into sentences.
"""

from __future__ import annotations

import threading
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import httpcore2
import httpx2

# Seconds one request may take, from sending it to its last byte. The largest answer llmfit asks
# for (a trillion-parameter checkpoint's index, ~10 MB) takes seconds on a slow line.
DEADLINE = 60.0
# Bytes any one answer may carry once inflated; a caller that knows what it asks for (a config,
# a range) sets a tighter cap with `limit`. A listing of a repository of 100,000 files is ~30 MB.
MAX_ANSWER = 64 << 20
MAX_REDIRECTS = 5

_limit: ContextVar[int | None] = ContextVar("llmfit_answer_limit", default=None)
# A deadline for a whole task of many requests (`llmfit models --search`: the search and every
# repository's metadata), shared by every thread: each request's own deadline is the sooner of
# its DEADLINE and this (and `_now.capped` says, per thread, that this one came first).
_overall: dict[str, Any] = {"at": None, "seconds": 0.0}
# The deadline of the request this thread is making: httpcore reads the socket in the thread that
# sent the request, so the stream can find it here.
_now = threading.local()


class AnswerRefused(Exception):
    """An answer llmfit gave up on: too slow, too large, or in an encoding it did not ask for."""

    def __init__(self, url: str, why: str) -> None:
        super().__init__(why)
        self.url = url
        self.why = why


class AnswerTooSlow(AnswerRefused):
    """The request's deadline passed: its own (DEADLINE), or the whole task's (`overall`)."""

    def __init__(self, url: str, why: str = "") -> None:
        overall = getattr(_now, "capped", False)
        seconds = _overall["seconds"] if overall else DEADLINE
        super().__init__(url, why or f"not complete after {seconds:g} s")
        self.seconds: float = seconds
        self.overall: bool = bool(overall)


class AnswerTooLarge(AnswerRefused):
    def __init__(self, url: str, limit: int) -> None:
        super().__init__(url, f"more than {limit:,} bytes")
        self.limit = limit


class AnswerEncoding(AnswerRefused):
    pass


class CredentialsElsewhere(AnswerRefused):
    """A request that would have carried the token to a host other than the endpoint's."""

    def __init__(self, url: str, home: str) -> None:
        super().__init__(url, f"it would send your token to {_origin_text(url)}, not {home}")
        self.home = home


def _origin(url: httpx2.URL) -> tuple[str, str, int | None]:
    default = {"http": 80, "https": 443}.get(url.scheme)
    return url.scheme, url.host.lower(), url.port or default


def _origin_text(url: str) -> str:
    """A URL as a sentence may show it: scheme, host and port, no userinfo, path or query."""
    try:
        u = httpx2.URL(url)
    except Exception:  # an address httpx cannot parse: nothing of it is shown
        return "another address"
    port = f":{u.port}" if u.port else ""
    return f"{u.scheme}://{u.host}{port}"


def _credentials_stay_home(request: httpx2.Request) -> None:
    """Refuse, before it is sent, a request that carries credentials to anywhere but the
    endpoint (HF_ENDPOINT): a next-page link or a redirect to another host gets no token."""
    if "authorization" not in request.headers and "cookie" not in request.headers:
        return
    from huggingface_hub import constants

    try:
        home = httpx2.URL(constants.ENDPOINT)
    except Exception:  # an endpoint httpx cannot parse: nowhere is home
        raise CredentialsElsewhere(str(request.url), "the endpoint") from None
    if _origin(request.url) != _origin(home):
        raise CredentialsElsewhere(str(request.url), _origin_text(str(home)))


@contextmanager
def overall_deadline(seconds: float) -> Iterator[None]:
    """Every request made in this block, in any thread, ends within `seconds` of its start."""
    _overall.update(at=time.monotonic() + seconds, seconds=seconds)
    try:
        yield
    finally:
        _overall.update(at=None, seconds=0.0)


def overall_left() -> float | None:
    """Seconds left of the task's deadline; None when there is none."""
    at = _overall["at"]
    return None if at is None else at - time.monotonic()


@contextmanager
def limit(n: int) -> Iterator[None]:
    """Cap the answers of requests made in this block (in this thread) at `n` bytes."""
    token = _limit.set(n)
    try:
        yield
    finally:
        _limit.reset(token)


def _left() -> float | None:
    deadline = getattr(_now, "deadline", None)
    return None if deadline is None else deadline - time.monotonic()


def _timeout(timeout: float | None) -> float | None:
    """The smaller of a socket operation's own timeout and what is left of the deadline; the
    deadline's passing is its own error, not a timeout huggingface_hub would retry."""
    left = _left()
    if left is None:
        return timeout
    if left <= 0:
        raise AnswerTooSlow(getattr(_now, "url", ""))
    return left if timeout is None else min(timeout, left)


def _passed(exc: Exception) -> Exception:
    left = _left()
    if left is not None and left <= 0.01:
        return AnswerTooSlow(getattr(_now, "url", ""))
    return exc


class _DeadlineStream(httpcore2.NetworkStream):
    """A socket whose every read and write ends by the request's deadline."""

    def __init__(self, inner: httpcore2.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        try:
            return self._inner.read(max_bytes, _timeout(timeout))
        except httpcore2.ReadTimeout as e:
            raise _passed(e) from None

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        try:
            self._inner.write(buffer, _timeout(timeout))
        except httpcore2.WriteTimeout as e:
            raise _passed(e) from None

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None, timeout=None):
        return _DeadlineStream(self._inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _DeadlineBackend(httpcore2.SyncBackend):
    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        stream = super().connect_tcp(host, port, _timeout(timeout), local_address, socket_options)
        return _DeadlineStream(stream)

    def connect_unix_socket(self, path, timeout=None, socket_options=None):
        return _DeadlineStream(super().connect_unix_socket(path, _timeout(timeout), socket_options))


class _Transport(httpx2.HTTPTransport):
    def __init__(self) -> None:
        super().__init__()
        # httpx has no deadline for a whole request (encode/httpx#1450), and HTTPTransport takes
        # no network backend: its connection pool's is replaced, the one place every read of the
        # socket passes. A proxy from the environment gets httpx's own transport: its answers are
        # still bounded by `_bound` below, between chunks.
        pool = getattr(self, "_pool", None)
        if pool is not None and hasattr(pool, "_network_backend"):
            pool._network_backend = _DeadlineBackend()


class _Bounded(httpx2.SyncByteStream):
    """An answer's body, inflated here (gzip, deflate) and never past the cap or the deadline."""

    def __init__(self, inner: httpx2.SyncByteStream, url: str, cap: int, coding: str) -> None:
        self._inner = inner
        self._url = url
        self._cap = cap
        self._inflate = None if coding == "identity" else zlib.decompressobj(_WBITS[coding])

    def __iter__(self) -> Iterator[bytes]:
        got = 0
        for chunk in self._inner:
            left = _left()
            if left is not None and left <= 0:
                raise AnswerTooSlow(self._url)
            if self._inflate is not None:
                try:
                    # max_length stops inflating one byte past the cap: a bomb costs the cap.
                    chunk = self._inflate.decompress(chunk, self._cap - got + 1)
                except zlib.error:
                    raise AnswerEncoding(self._url, "its compressed body is corrupt") from None
            got += len(chunk)
            if got > self._cap:
                raise AnswerTooLarge(self._url, self._cap)
            if chunk:
                yield chunk

    def close(self) -> None:
        self._inner.close()


# zlib's window bits for each content coding: gzip's header and trailer, or zlib's (RFC 9110's
# "deflate" is the zlib format).
_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


def _start(request: httpx2.Request) -> None:
    own = time.monotonic() + DEADLINE
    at = _overall["at"]
    # When the task's deadline comes first, a timeout of this request is the task's.
    _now.capped = at is not None and at <= own
    if _now.capped:
        own = at
    _now.deadline = own
    _now.url = str(request.url)
    if own <= time.monotonic():
        raise AnswerTooSlow(str(request.url))


# The last status each path answered with (a server error retried until a caller's deadline is
# a failure of the server's, not a timeout: `llmfit models --search` answered 500 exited 9).
# Keyed by the thread that asked as well as the path: a search abandoned at its time-out goes on
# retrying in its own thread, and its answers must not be read as a later search's.
_statuses: dict[tuple[int, str], int] = {}


def forget(path: str, thread: int | None = None) -> None:
    """Forget what `path` last answered to `thread` (this one by default), before asking again."""
    _statuses.pop((threading.get_ident() if thread is None else thread, path), None)


def last_status(path: str, thread: int | None = None) -> int | None:
    """The status the last answer for `path` (the URL's path) had in `thread` (this one by
    default); None if none came."""
    return _statuses.get((threading.get_ident() if thread is None else thread, path))


def _bound(response: httpx2.Response) -> None:
    url = str(response.request.url)
    key = (threading.get_ident(), response.request.url.path)
    if len(_statuses) < 1024 or key in _statuses:
        _statuses[key] = response.status_code
    cap = _limit.get() or MAX_ANSWER
    coding = response.headers.get("content-encoding", "identity").strip().lower() or "identity"
    if response.request.method == "HEAD":
        return
    if coding != "identity" and coding not in _WBITS:
        response.close()
        raise AnswerEncoding(url, f"it came in the {coding!r} encoding, not one llmfit asked for")
    if coding != "identity":
        # Inflated here, so httpx must neither inflate it again nor trust the compressed length.
        del response.headers["content-encoding"]
        if "content-length" in response.headers:
            del response.headers["content-length"]
    inner = response.stream
    # A sync client's transport gives a sync stream; anything else is not ours to bound.
    if isinstance(inner, httpx2.SyncByteStream):
        response.stream = _Bounded(inner, url, cap, coding)


_hub_hooks: list[Any] = []


def _client() -> httpx2.Client:
    return httpx2.Client(
        event_hooks={
            "request": [*_hub_hooks, _credentials_stay_home, _start],
            "response": [_bound],
        },
        follow_redirects=True,
        max_redirects=MAX_REDIRECTS,
        timeout=None,
        headers={"Accept-Encoding": "gzip, deflate"},
        transport=_Transport(),
    )


_installed = False
_install_lock = threading.Lock()


def install() -> None:
    """Make huggingface_hub send its requests through the bounded client (once a process)."""
    global _installed
    with _install_lock:
        if _installed:
            return
        from huggingface_hub import get_session, set_client_factory

        # huggingface_hub's own request hook (offline mode, request ids) stays first, as its
        # default client has it.
        _hub_hooks[:] = get_session().event_hooks["request"]
        set_client_factory(_client)
        _installed = True
