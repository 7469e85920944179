"""What the commands share: their common options, and the progress of a run that may ask the Hub.

Each option is declared once here and applied by decorator, so that `--fleet`, `--json`,
`--offline`, `--engine`, `--context` and `--concurrency` mean and say the same on every command.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, TypeVar

import click

from llmfit.cli.values import finite
from llmfit.plan.engines import keys as registered_engines

if TYPE_CHECKING:
    from llmfit.sources.hub import Progress

F = TypeVar("F", bound=Callable[..., object])


def fleet_option(help: str = "Fleet file or inline fleet (as for planning).") -> Callable[[F], F]:
    return click.option("--fleet", "fleet_path", help=help)


def json_option(help: str = "Print the version-1 JSON document.") -> Callable[[F], F]:
    return click.option("--json", "json_", is_flag=True, help=help)


def offline_option(
    help: str = "Use only what is cached; never touch the network.",
) -> Callable[[F], F]:
    return click.option("--offline", is_flag=True, help=help)


def engines_option(help: str = "Plan for this engine only (repeatable).") -> Callable[[F], F]:
    return click.option(
        "--engine",
        "engine_keys",
        multiple=True,
        type=click.Choice(registered_engines()),
        help=help,
    )


def context_option(help: str) -> Callable[[F], F]:
    return click.option("--context", "context", help=help)


def concurrency_option(
    help: str = "Requests in flight the deployment must serve (a closed loop, as bench serve "
    "--max-concurrency); layouts must hold them.",
) -> Callable[[F], F]:
    return click.option(
        "--concurrency",
        type=click.FloatRange(min=0, min_open=True, max=1e9),
        callback=finite,
        help=help,
    )


# The workload's flags (plan/settings.py Workload), in the order --help lists them.
_WORKLOAD_OPTIONS = (
    click.option(
        "--workload",
        "workload_name",
        type=click.Choice(("chat", "rag", "code", "summarise")),
        help="A named workload to start from (default: chat, 2k in / 512 out, TTFT 2 s, "
        "TPOT 50 ms; docs/serving.md).",
    ),
    click.option("--input-len", help="Prompt tokens a request (2048, 8k)."),
    click.option("--output-len", help="Tokens a request generates (512, 1k)."),
    concurrency_option(),
    click.option(
        "--rate",
        type=click.FloatRange(min=0, min_open=True, max=1e9),
        callback=finite,
        help="Requests a second the deployment must serve (Poisson arrivals).",
    ),
    click.option(
        "--ttft",
        type=click.FloatRange(min=0, min_open=True, max=1e6),
        callback=finite,
        help="Target: seconds to a request's first token (mean, queueing included).",
    ),
    click.option(
        "--tpot",
        type=click.FloatRange(min=0, min_open=True, max=1e6),
        callback=finite,
        help="Target: milliseconds a token after the first (mean).",
    ),
    click.option(
        "--min-speed",
        type=click.FloatRange(min=0, min_open=True, max=1e6),
        callback=finite,
        help="Target: tokens a second each user sees (the same as --tpot 1000/N).",
    ),
)


def workload_options(f: F) -> F:
    """The workload's flags, given to the command as one `workload` argument (a Workload)."""

    @functools.wraps(f)
    def wrapper(*args: object, **kw: object) -> object:
        from llmfit.cli.values import workload_of

        names = ("workload_name", "input_len", "output_len", "concurrency", "rate", "ttft",
                 "tpot", "min_speed")  # fmt: skip
        given = {n: kw.pop(n) for n in names}
        return f(*args, workload=workload_of(**given), **kw)  # type: ignore[arg-type]

    out: Callable[..., object] = wrapper
    for option in reversed(_WORKLOAD_OPTIONS):
        out = option(out)
    return out  # type: ignore[return-value]


@contextmanager
def hub_progress(
    offline: bool | None = None, *, asks_hub: bool | None = None
) -> Iterator[Progress | None]:
    """The progress a run shows while it may ask the Hub (none offline), ended however the run
    ends. `asks_hub` overrides the offline test where the command knows it will ask."""
    from llmfit.sources.hub import offline as is_offline
    from llmfit.sources.hub import quiet_huggingface_hub

    online = (not is_offline(offline)) if asks_hub is None else asks_hub
    progress = None
    if online:
        from llmfit.render.progress import make_progress

        quiet_huggingface_hub()
        progress = make_progress()
    try:
        yield progress
    finally:
        if progress is not None:
            progress.end()
