"""What the commands share: their common options, and the progress of a run that may ask the Hub.

Each option is declared once here and applied by decorator, so that `--fleet`, `--json`,
`--offline`, `--engine`, `--context` and `--concurrency` mean and say the same on every command.
"""

from __future__ import annotations

import functools
import math
import re
import shlex
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

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
    return click.option("--engine", "engine_keys", multiple=True, type=EngineChoice(), help=help)


def planned_engines_option(help: str) -> Callable[[F], F]:
    """`--engine` for a plan, its help ending with the engines planned by default and those
    planned only when named, as the registry says when the help is shown."""
    return click.option(
        "--engine", "engine_keys", multiple=True, type=EngineChoice(), cls=RegistryHelp,
        help_of=lambda: f"{help}; default: {default_engines_text()}.",
    )  # fmt: skip


def titles(engine_keys: Iterable[str]) -> str:
    """Engines' titles for a sentence: "vLLM", "vLLM and llama.cpp", "vLLM, llama.cpp and Toy"."""
    from llmfit.plan.engines.honoured import titles as joined

    return joined(engine_keys)


def taken_by(flag: str) -> str:
    """ "taken by vLLM and llama.cpp (SGLang's own is --mem-fraction-static)": which engines take
    one of llmfit's engine settings, and the others' own flag for it, as the registry says."""
    from llmfit.plan.engines.honoured import own_instead, takers

    text = f"taken by {titles(takers(flag))}"
    own = [(k, f) for k in registered_engines() if (f := own_instead(k, flag))]
    if own:
        text += " (" + "; ".join(f"{titles([k])}'s own is {f}" for k, f in own) + ")"
    return text + "; refused for a plan of any other engine"


def default_engines_text() -> str:
    """ "vLLM and llama.cpp, whichever can run the model (SGLang when named)": from the registry."""
    from llmfit.plan.engines import default_keys

    named = [k for k in registered_engines() if k not in default_keys()]
    text = f"{titles(default_keys())}, whichever can run the model"
    return text + (f" ({titles(named)} when named)" if named else "")


class RegistryHelp(click.Option):
    """An option whose help is worked out from the registry when it is shown (`help_of`), so
    that an engine registered after start-up is in it."""

    def __init__(self, *args: Any, help_of: Callable[[], str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.help_of = help_of

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        self.help = self.help_of()
        return super().get_help_record(ctx)


def context_option(help: str) -> Callable[[F], F]:
    return click.option("--context", "context", help=help)


def rank_option(help: str) -> Callable[[F], F]:
    """`--rank`: what best means (plan/settings RANKINGS), the plan's default for every command
    so that `llmfit models` lists each model with the option `llmfit REPO` puts first."""
    from llmfit.plan.settings import RANKINGS

    return click.option(
        "--rank", "rank_by", type=click.Choice(RANKINGS), default="serve", show_default=True,
        help=help,
    )  # fmt: skip


def concurrency_option(
    help: str = "Requests in flight the deployment must serve (a closed loop, as bench serve "
    "--max-concurrency); those past what a replica's pool holds wait for a place, their wait "
    "in TTFT.",
) -> Callable[[F], F]:
    return click.option(
        "--concurrency",
        type=click.FloatRange(min=0, min_open=True, max=1e9),
        callback=finite,
        help=help,
    )


def budget_option() -> Callable[[F], F]:
    return click.option(
        "--budget",
        type=click.FloatRange(min=0, min_open=True, max=1e9),
        callback=finite,
        metavar="DOLLARS_PER_HOUR",
        help="Leave out what costs more an hour (the fleet file's price_per_gpu_hour × cards × "
        "replicas the load needs), and say so.",
    )


def priced_budget(budget: float | None, fleet: object) -> float | None:
    """--budget, refused where the fleet prices no card: there is nothing to hold to it."""
    if budget is None:
        return None
    nodes = getattr(fleet, "nodes", ())
    if not any(getattr(n, "price", None) is not None for n in nodes):
        from llmfit.errors import UsageError

        raise UsageError(
            f"--budget {budget:g}: the fleet prices no card, so no option has a cost to hold "
            "to it.",
            hint="give each pool or node a price_per_gpu_hour in the fleet file (docs/fleet.md)",
        )
    return budget


class Duration(click.ParamType):
    """A time in the flag's own unit, or with one written after it: `--tpot 50`, `50ms` or
    `0.05s`; `--ttft 2`, `2s` or `500ms` (issue 34: `--tpot 50ms` was "not a valid float
    range"). Positive, finite and at most `most` in the flag's unit."""

    def __init__(self, unit: str, most: float, least: float = 0.0) -> None:
        self.unit = unit
        self.most = most
        self.least = least
        self.name = f"{'MS' if unit == 'ms' else 'SECONDS'}"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            number, unit = float(value), self.unit
        else:
            m = _DURATION.fullmatch(str(value).strip().lower())
            if m is None:
                self.fail(f"{value!r} is not a time (like 50, 50ms or 0.05s).", param, ctx)
            number, unit = float(m.group(1)), m.group(2) or self.unit
        scale = {("ms", "s"): 1e3, ("s", "ms"): 1e-3}.get((self.unit, unit), 1.0)
        out = number * scale
        if not math.isfinite(out) or not (0 < out and self.least <= out <= self.most):
            self.fail(
                f"{value!r} is not a time between {self.least:g} and {self.most:g} {self.unit}.",
                param,
                ctx,
            )
        return out


_DURATION = re.compile(r"([0-9]*\.?[0-9]+(?:e[-+]?[0-9]+)?)\s*(ms|s)?")


# The workload's flags (plan/settings.py Workload), in the order --help lists them.
_WORKLOAD_OPTIONS = (
    click.option(
        "--workload",
        "workload_name",
        type=click.Choice(("chat", "rag", "code", "summarise")),
        help="A named workload to start from (default: chat, 2k in / 512 out, TTFT 2 s, "
        "TPOT 50 ms; README, Serving under load).",
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
        "--requests",
        type=click.IntRange(min=1, max=10**9),
        help="Prompts sent at once with no cap, as bench serve without --max-concurrency: "
        "served in waves as the engine admits them (its sequence cap and KV pool); figures are "
        "the run's means (mean TTFT with the queue's wait, mean TPOT, output tok/s over the "
        "run).",
    ),
    click.option(
        "--ttft",
        # 1 µs to 1,000,000 s (main's bounds: a smaller positive float is no time).
        type=Duration("s", 1e6, least=1e-6),
        help="Target: seconds to a request's first token (mean, queueing included; 2, 2s or "
        "500ms).",
    ),
    click.option(
        "--tpot",
        # 1 µs to 1,000 s: a smaller positive float is no time in seconds (5e-324 ms is 0 s).
        type=Duration("ms", 1e6, least=0.001),
        help="Target: milliseconds a token after the first (mean; 50, 50ms or 0.05s).",
    ),
    click.option(
        "--min-speed",
        # The same TPOT bounds: 1/5e-324 tokens a second is an infinite time a token.
        type=click.FloatRange(min=0.001, max=1e6),
        callback=finite,
        help="Target: tokens a second each user sees (the same as --tpot 1000/N).",
    ),
)


def workload_options(f: F) -> F:
    """The workload's flags, given to the command as one `workload` argument (a Workload)."""

    @functools.wraps(f)
    def wrapper(*args: object, **kw: object) -> object:
        from llmfit.cli.values import workload_of

        names = ("workload_name", "input_len", "output_len", "concurrency", "rate", "requests",
                 "ttft", "tpot", "min_speed")  # fmt: skip
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


# -- each engine's knobs, from its declaration (plan/engines/knobs.py) -------------------------


class EngineChoice(click.Choice):
    """`--engine`'s choices: the registry's keys when the command line is read, so that an engine
    registered after start-up (a plugin's, a test's double) is one to choose."""

    def __init__(self) -> None:
        super().__init__(())

    @property  # type: ignore[override]
    def choices(self) -> tuple[str, ...]:
        return registered_engines()

    @choices.setter
    def choices(self, value: object) -> None:
        pass


def _param_name(key: str, field: str) -> str:
    return "knob__" + re.sub(r"\W", "_", key) + "__" + field


def knob_params(for_check: bool = False) -> list[click.Parameter]:
    """The CLI's option for every registered engine's knob that llmfit's command line offers
    (`--max-num-seqs`, `--mem-fraction-static`, …); for `llmfit check`, only the settings of
    llmfit's own that no engine command carries (`--vllm-version`)."""
    from llmfit.plan.engines import knobs, options_class, registered

    out: list[click.Parameter] = []
    for key in registered_engines():
        title = registered(key).title
        for d in knobs.declared(options_class(key)):
            k, flag = d.knob, d.knob.llmfit_flag
            if flag is None or (for_check and k.flags):
                continue
            name = _param_name(key, d.name)
            text = f"{title}: {k.help}" if k.flags else k.help
            if k.kind == "switch":
                out.append(click.Option([flag, name], is_flag=True, default=None, help=text))
            elif k.kind == "bool":
                negation = k.negations[0] if k.negations else "--no-" + flag[2:]
                out.append(click.Option([f"{flag}/{negation}", name], default=None, help=text))
            else:
                out.append(
                    click.Option(
                        [flag, name], default=None, metavar=k.metavar or _metavar(k), help=text,
                        callback=_parser(k, flag),
                    )
                )  # fmt: skip
    return out


def _metavar(k: object) -> str:
    from llmfit.plan.engines.knobs import Knob

    assert isinstance(k, Knob)
    if k.kind == "choice" or k.choices:
        return "[" + "|".join(k.choices) + "]"
    return {"int": "N", "float": "X"}.get(k.kind, "TEXT")


def _parser(k: object, flag: str) -> Callable[[click.Context, click.Parameter, str | None], object]:
    from llmfit.plan.engines.knobs import Knob, parse

    assert isinstance(k, Knob)

    def read(ctx: click.Context, param: click.Parameter, value: str | None) -> object:
        if value is None:
            return None
        try:
            return parse(k, flag, value)
        except ValueError as e:
            raise click.BadParameter(
                str(e).removeprefix(f"{flag} "), ctx=ctx, param=param
            ) from None

    return read


def engine_options(values: dict[str, object]) -> tuple[object, ...]:
    """Each engine's options from the knob values the CLI read (`knob_params`): one instance of
    its declared class for each engine given any, checked (raises UsageError with the sentence
    that says what is wrong)."""
    from llmfit.errors import UsageError
    from llmfit.plan.engines import knobs, options_class

    out: list[object] = []
    for key in registered_engines():
        cls = options_class(key)
        given: dict[str, object] = {}
        for d in knobs.declared(cls):
            value = values.get(_param_name(key, d.name))
            if value is None or (d.knob.kind == "switch" and value is False):
                continue
            given[d.name] = value
            if d.knob.implies:
                given.setdefault(d.knob.implies, True)
        if not given:
            continue
        try:
            out.append(knobs.build(cls, given))
        except ValueError as e:
            raise UsageError(str(e)) from None
    return tuple(out)


# llmfit's own flags that only some engines take (registry lines' `honours`), by parameter name;
# one whose value chooses ("--disagg on") counts as given only at that value (--disagg auto and
# off ask nothing of an engine).
ENGINE_SETTINGS = {
    "gpu_memory_utilization": "--gpu-memory-utilization",
    "kv_cache_dtype": "--kv-cache-dtype",
    "ray": "--ray",
    "local_paths": "--local-paths",
    "disagg": "--disagg on",
    "prefill_tp": "--prefill-tp",
    "decode_tp": "--decode-tp",
    "xpyd": "--xpyd",
}


def _given(ctx: click.Context, name: str) -> bool:
    sources = (click.core.ParameterSource.COMMANDLINE, click.core.ParameterSource.ENVIRONMENT)
    value = ctx.params.get(name)
    _, _, at = ENGINE_SETTINGS[name].partition(" ")
    if at and value != at:
        return False
    return ctx.get_parameter_source(name) in sources and value is not False and value is not None


def _text(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def refuse_unhonoured(
    engine_keys: tuple[str, ...],
    knob_values: dict[str, object],
    repo: str | None = None,
    *,
    checking: bool = False,
    ran: tuple[str, ...] = (),
) -> None:
    """Raise UsageError, in the one sentence of plan/engines/honoured.py, for the first setting
    given (one of llmfit's own flags some engines take, or an engine's knob) that an engine the
    plan runs does not take; `ran`: the engines that ran the repository's files, where none was
    named and they are read."""
    from llmfit.errors import UsageError
    from llmfit.plan.engines import knobs, options_class
    from llmfit.plan.engines.honoured import takers, unhonoured

    ctx = click.get_current_context()
    given: list[tuple[str, tuple[str, ...]]] = []
    texts: dict[str, str] = {}
    for name, setting in ENGINE_SETTINGS.items():
        if name in ctx.params and _given(ctx, name):
            given.append((setting, takers(setting)))
            texts[setting] = _text(ctx.params[name])
    for key in registered_engines():
        for d in knobs.declared(options_class(key)):
            value = knob_values.get(_param_name(key, d.name))
            flag = d.knob.llmfit_flag
            if flag is None or value is None or value is False and d.knob.kind == "switch":
                continue
            given.append((flag, (key,)))
            texts[flag] = "" if isinstance(value, bool) else _text(value)
    found = unhonoured(given, engine_keys, ran)
    if found is None:
        return
    if found.instead and repo is not None:
        words = [repo, "--engine", found.deaf[0], found.instead, texts[found.flag]]
        hint = "llmfit " + " ".join(shlex.quote(w) for w in words if w)
    elif checking or found.ran:
        # The engine is the command's (or the repository's files'): only the setting can go.
        hint = f"leave {found.flag} out"
    else:
        hint = f"leave {found.flag} out, or plan with --engine {found.takers[0]}"
    raise UsageError(found.sentence(), hint=hint)


class WithKnobs(click.Command):
    """A command whose options include every registered engine's knobs (`knob_params`), read
    from the registry when the command line is, and handed to the callback as `knob__…`."""

    for_check = False

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        params: list[click.Parameter] = [*self.params, *knob_params(self.for_check)]
        help_option = self.get_help_option(ctx)
        return [*params, help_option] if help_option is not None else params


class CheckWithKnobs(WithKnobs):
    for_check = True


def split_knobs(kwargs: dict[str, object]) -> dict[str, object]:
    """The knob values of a command's keyword arguments, taken out of them."""
    return {k: kwargs.pop(k) for k in [k for k in kwargs if k.startswith("knob__")]}
