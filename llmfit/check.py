"""`llmfit check`: a command line a user already has, planned exactly as it stands (no printing).

The engine that the command starts reads its own flags back (plan/engines/*_command.py) into the
repository, the settings and the exact layout; the plan then sizes that layout, and only that
layout, on the fleet's cards.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llmfit.advise import advise
from llmfit.errors import UsageError
from llmfit.plan.advice import Advice
from llmfit.plan.artifact import Artifact
from llmfit.plan.credentials import Vault, environment, secret_name
from llmfit.plan.engines import Request, for_argv, keys, registered, split_env
from llmfit.plan.fleet import Fleet
from llmfit.plan.launch import Given
from llmfit.plan.settings import MAX_CONTEXT, PlanSettings, Workload

if TYPE_CHECKING:
    from llmfit.sources.hub import Progress


# The most words a checked command may have. The engines' parsers (argparse) take time that
# grows with the square of a command's flags: 50,000 repeated words took 54 s (issue 33); at this
# bound a command is read in about a second, and no real one comes near it.
MAX_WORDS = 4096


@dataclass(frozen=True)
class Checked:
    """A command read back (`llmfit check`): its words, what they ask, and the plan of it."""

    argv: tuple[str, ...]
    request: Request
    advice: Advice

    @property
    def fits(self) -> bool:
        return bool(self.advice.plan.options)

    @property
    def serves(self) -> bool | None:
        """Whether one server of the command serves the named load within its targets; None
        where no load is named, the command does not fit, or its speed is not known."""
        if not self.fits:
            return None
        sv = self.advice.plan.options[0].serving
        if sv is None or not sv.workload.load:
            return None
        return sv.meets and sv.replicas == 1


def check(
    argv: Sequence[str],
    fleet: Fleet,
    *,
    offline: bool | None = None,
    cache_dir: Path | None = None,
    progress: Progress | None = None,
    options: tuple[object, ...] = (),
    workload: Workload | None = None,
    known: Sequence[str] = (),
) -> Checked:
    """Plan the command `argv` exactly; `options` are engine settings of llmfit's own that no
    command carries (`--vllm-version`: the release the command runs on); `known` the credentials
    llmfit itself holds (the Hugging Face token), kept out of what is shown and launched wherever
    they stand in the command."""
    if len(argv) > MAX_WORDS:
        raise UsageError(
            f"the command to check has {len(argv):,} words; llmfit reads at most "
            f"{MAX_WORDS:,}, more than any engine's command needs."
        )
    given_env, words = split_env(argv)
    vault = Vault(known)
    # Credentials set in front of the command are launched from the caller's environment (or a
    # Secret), never written out (llmfit/plan/credentials.py).
    env = environment(given_env, vault)
    engine = for_argv(words)
    if engine is None:
        first = words[0] if words else ""
        usages = [registered(k).usage for k in keys() if registered(k).usage]
        ways = ", ".join(usages[:-1]) + (" or " if len(usages) > 1 else "") + usages[-1]
        raise UsageError(
            f"{first!r} is not a command llmfit can check: give one that starts {ways}.",
            hint="llmfit check --fleet 2xh100-80g -- vllm serve openai/gpt-oss-20b "
            "--tensor-parallel-size 2",
        )
    defaults = PlanSettings(engine_options=options, workload=workload or Workload())
    try:
        request = engine.read_command(words, defaults, given_env, vault, load_yaml)
    except ValueError as e:
        raise UsageError(f"the command to check: {e}") from None
    context = request.settings.context
    if context is not None and context > MAX_CONTEXT:
        raise UsageError(
            f"the command to check: its context of {context:,} tokens is more than the "
            f"{MAX_CONTEXT:,} llmfit plans for."
        )
    repo = request.repo
    keep = None
    if request.path:
        file = Path(request.path).expanduser()
        if not file.is_file():
            raise UsageError(f"the command's model file {request.path!r} is not here.")
        repo = str(file.parent.resolve())
        target = os.path.realpath(file)

        def keep(a: Artifact) -> bool:
            return a.path is not None and os.path.realpath(a.path) == target

    elif request.quant:
        quant = request.quant.upper()

        def keep(a: Artifact) -> bool:
            return (a.quant or "").upper() == quant

    given = Given(request.argv or tuple(words), tuple(env.items()), request.secrets)
    settings = replace(request.settings, given=given)
    advice = advise(repo, fleet, settings, cache_dir, offline=offline, progress=progress, keep=keep)
    plan = advice.plan
    if request.on_cards and any(o.cpu for o in plan.options):
        # A command that puts layers on the cards is answered on the cards: where they do not
        # hold them, it does not fit (issue 34: `-ngl 40` was answered "fits: no cards of a
        # CPU"), whatever the CPU alone could do.
        plan = replace(plan, options=tuple(o for o in plan.options if not o.cpu))
        advice = replace(advice, plan=plan)
    # What is shown of the command is what is launched: its credentials as "$VARIABLE".
    shown = (*(f"{k}={v}" for k, v in env.items()), *given.argv)
    return Checked(shown, request, advice)


def credentials(argv: Sequence[str]) -> list[str]:
    """What a command holds that is plainly a credential, before any reader has seen it (to keep
    out of an error it might cause): the values of the assignments in front of it whose names say
    so, and of the flags whose names say so."""
    env, words = split_env(argv)
    out = [v for k, v in env.items() if secret_name(k) and v]
    taking = False
    for w in words:
        name, eq, value = w.partition("=")
        if w.startswith("-"):
            taking = secret_name(name) and not eq
            if taking is False and eq and secret_name(name) and value:
                out.append(value)
        elif taking:
            out.append(w)
    return out


# A config file a command names is read whole: past this it is no file of flags.
CONFIG_MOST = 1 << 20


def load_yaml(path: str) -> object:
    """A YAML file a checked command names for its engine to read (vLLM's `--config`), as
    yaml.safe_load reads it (vLLM's own reader); ValueError with one sentence where it cannot be
    read: not a regular file (a FIFO is not waited on), past CONFIG_MOST, not YAML, or holding an
    alias (whose expansion could be any size)."""
    import yaml

    class NoAliases(yaml.SafeLoader):
        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                raise ValueError(
                    f"its --config file {path!r} has an alias (*name), which no flag's value needs."
                )
            return super().compose_node(parent, index)  # type: ignore[no-untyped-call]

    try:
        fd = os.open(Path(path).expanduser(), os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError as e:
        raise ValueError(f"its --config file {path!r} cannot be read ({e.strerror}).") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_size > CONFIG_MOST:
            raise ValueError(
                f"its --config file {path!r} is not a regular file of at most "
                f"{CONFIG_MOST:,} bytes."
            )
        data = f.read(CONFIG_MOST + 1)
    try:
        return yaml.load(data.decode("utf-8"), Loader=NoAliases)  # noqa: S506  (a SafeLoader)
    except (yaml.YAMLError, UnicodeDecodeError, RecursionError) as e:
        problem = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ValueError(f"its --config file {path!r} is not YAML: {problem}.") from None


def split_pair(command: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """A prefill command and a decode command given one after the other, split by a bare `--`
    (`llmfit check -- <prefill command> -- <decode command>`); None for one command."""
    words = tuple(command)
    if "--" not in words:
        return None
    at = words.index("--")
    return words[:at], words[at + 1 :]


@dataclass(frozen=True)
class PairRule:
    """One rule a prefill command and a decode command must keep to run as one disaggregated
    deployment, and whether they do."""

    rule: str  # "engine", "prefill role", "decode role", "model", "kv cache dtype", …
    holds: bool | None  # None: not checked, for a rule before it failed that it rests on
    why: str | None  # why it does not hold, as the end of a sentence; None where it holds


def pair_rules(prefill: Checked, decode: Checked) -> list[PairRule]:
    """Each rule a prefill command and a decode command must keep to run as one disaggregated
    deployment, as their engine would refuse them (both must fit besides): one engine, each
    command's role, one model, one KV-cache dtype, one precision of the weights, and the
    layouts the engine pairs (plan/layout.py PairRules, declared in its module with the code
    cited). A command's role and the layouts are the engine's: where the two commands run two
    engines they are not checked (`holds` None)."""
    from llmfit.plan.disagg import pair_refusal as layouts_refusal
    from llmfit.plan.engines import engine
    from llmfit.plan.engines.disagg_launch import role_refusal
    from llmfit.plan.layout import Layout
    from llmfit.plan.model import Shape

    def rule(name: str, why: str | None) -> PairRule:
        return PairRule(name, why is None, why)

    p, d = for_argv(split_env(prefill.request.argv)[1]), for_argv(split_env(decode.request.argv)[1])
    one = p is not None and d is not None and p.key == d.key
    out = [rule("engine", None if one else (
        f"the prefill command runs {p.name if p else '?'} and the decode command "
        f"{d.name if d else '?'}: one engine runs both"
    ))]  # fmt: skip
    for side, c in (("prefill", prefill), ("decode", decode)):
        out.append(rule(f"{side} role", role_refusal(p, c.request.argv, side))
                   if one and p is not None else PairRule(f"{side} role", None, None))  # fmt: skip
    out.append(rule("model", None if prefill.request.repo == decode.request.repo else (
        f"the prefill command serves {prefill.request.repo} and the decode command "
        f"{decode.request.repo}: both must serve one model"
    )))  # fmt: skip
    a, b = prefill.request.settings, decode.request.settings
    out.append(rule("kv cache dtype", None if a.kv_cache_dtype == b.kv_cache_dtype else (
        f"the prefill command's KV cache dtype is {a.kv_cache_dtype} and the decode "
        f"command's {b.kv_cache_dtype}: both must keep one"
    )))  # fmt: skip
    out.append(rule("precision", None if a.precision == b.precision else (
        "the two commands load the weights at different precisions: both must load one"
    )))  # fmt: skip
    if one and p is not None:
        # The sizes each command asks for (its pins), whether or not it fits.
        po, do = (Layout(tp=x.pins.tp or 1, pp=x.pins.pp or 1, dp=x.pins.dp or 1) for x in (a, b))
        e = engine(p.key)
        shape = Shape.of(prefill.advice.plan.model)
        out.append(rule("layouts", layouts_refusal(e.name, e.layouts, po, do, shape)))
    else:
        out.append(PairRule("layouts", None, None))
    return out


def pair_refusal(prefill: Checked, decode: Checked) -> str | None:
    """Why a prefill command and a decode command cannot run as one disaggregated deployment,
    as their engine would refuse them: the first of `pair_rules` that fails; None where they
    can (both must fit first)."""
    return next((r.why for r in pair_rules(prefill, decode) if r.holds is False), None)
