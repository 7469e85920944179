"""plan(): every way each artifact could run on the fleet, ranked, with what was refused and why."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from llmfit.plan.artifact import Artifact
from llmfit.plan.cards import consumer
from llmfit.plan.ceiling import Ceiling, ceiling
from llmfit.plan.disagg import Engines, Offer, class_nodes, offers
from llmfit.plan.engines import Job, engine, keys, may_run, planned
from llmfit.plan.fleet import Fleet
from llmfit.plan.model import AttentionCharge, Model, Shape, yarn_overrides
from llmfit.plan.options import NO_RAM, Option, Rejection, hourly, launch_scale, rank
from llmfit.plan.pools import ClassPool, class_pools
from llmfit.plan.settings import DESKTOP_CONTEXT, PRECISIONS, Pins, PlanSettings, Workload

__all__ = ["PRECISIONS", "Plan", "PlanSettings", "Unplaced", "plan"]


@dataclass(frozen=True)
class Unplaced:
    """An artifact with no option at all, and the nearest it came."""

    artifact: str
    # Why nothing was placed, when it is not simply that nothing fits.
    reason: str = ""
    # The nearest miss: where, and what one card would need of what it offers.
    where: str = ""
    need: int = 0
    have: int = 0
    # The longest context at which something would fit, and where (0 and "" when nothing would).
    fits_at: int = 0
    fits_where: str = ""
    # Part of it would run with the rest in RAM, if the nodes had RAM given: the engine that would
    # (its name), "" where none would.
    wants_ram: str = ""
    # Where pinned sizes (--tp, --pp, --dp, --ep, --gpus, or a checked command's) left nothing:
    # the layout nearest them that fits without them, and the pins that would give it.
    nearest: Option[Any] | None = None
    nearest_pins: str = ""


@dataclass(frozen=True)
class Plan:
    """The options that run the model on the fleet, best first, and why every other one does not."""

    model: Model
    context: int
    options: tuple[Option[Any], ...]
    rejected: tuple[Rejection, ...] = ()
    unplaced: tuple[Unplaced, ...] = ()
    notes: tuple[str, ...] = field(default=())
    # One token of context for the whole model at the planned KV dtype (tp = pp = 1).
    kv_bytes_per_token: int = 0
    # Each kind of layer and how its cache was charged.
    attention: tuple[AttentionCharge, ...] = ()
    # The workload the options were judged at (the asked one, at the context planned), and the
    # order they were ranked in.
    workload: Workload = field(default_factory=Workload)
    rank: str = "serve"
    # What the fleet's free cards serve at most of a named load no one option's replicas fit
    # them for (plan/ceiling.py); None where one does, or no load is named.
    ceiling: Ceiling | None = None
    # Disaggregated prefill and decode options (plan/disagg.py `offers`), best first: under
    # --disagg auto only those that win; empty under --disagg off.
    disaggregated: tuple[Offer, ...] = ()
    # The engines that ran an artifact of the repository, in registry order of first use: with
    # none named, the settings given are held to these (plan/engines/honoured.py).
    ran: tuple[str, ...] = ()


def desktop_context(model: Model, fleet: Fleet, settings: PlanSettings) -> int | None:
    """The desktop default context where it applies: no --context, not a checked command (whose
    own context it plans), every card of the fleet a consumer card, and a model trained for
    longer."""
    if not settings.desktop or settings.context is not None or settings.given is not None:
        return None
    classes = {k.gpu_class for n in fleet.nodes for k in n.kinds}
    if not classes or not all(consumer(c) for c in classes):
        return None
    trained = model.max_context or 0
    return DESKTOP_CONTEXT if trained > DESKTOP_CONTEXT else None


def plan(model: Model, artifacts: Iterable[Artifact], fleet: Fleet, settings: PlanSettings) -> Plan:
    desktop = desktop_context(model, fleet, settings)
    desktop_notes: tuple[str, ...] = ()
    if desktop is not None:
        settings = replace(settings, context=desktop)
        desktop_notes = (
            f"context {desktop:,} tokens, the desktop default on consumer cards (the model was "
            f"trained for {model.max_context:,}): --context trained plans that, or --context N "
            "any other",
        )
    context = settings.context or model.max_context
    if not context or context <= 0:
        raise ValueError("a context is needed: the model states none, so it must be given")
    # The one place the workload meets the context: a named one longer is refused, a default one
    # cut to fit; every engine then serves `settings.workload` as it is.
    source = "command" if settings.given else ("--context" if settings.context else "model")
    settings = replace(settings, workload=settings.workload.within(context, source))
    kv_dtype = None if settings.kv_cache_dtype == "auto" else settings.kv_cache_dtype
    shape = Shape.of(model, kv_dtype)
    pools = class_pools(fleet)
    options: list[Option[Any]] = []
    rejected: list[Rejection] = []
    unplaced: list[Unplaced] = []
    engine_notes: list[str] = []
    # The engine whose words say how each kind of layer's cache is charged: the first that runs
    # an artifact of the plan.
    charges: tuple[AttentionCharge, ...] | None = None
    # The engines that ran an artifact: what the notes say the commands set is theirs alone (a
    # GGUF-only repository's llama-server commands set no vLLM switch).
    ran: list[str] = []
    for art in artifacts:
        found: list[Option[Any]] = []
        runs = False
        # The engines that run this artifact but only on a card (named when the fleet has none).
        gpu_only: list[str] = []
        for key in keys():
            # Checked before the engine is imported: an engine not planned, or that cannot run the
            # artifact's format, costs nothing.
            if not planned(key, settings.engines) or not may_run(key, art.format):
                continue
            e = engine(key)
            if not e.runs(art):
                continue
            runs = True
            if key not in ran:
                ran.append(key)
            if not e.layouts.cpu:
                gpu_only.append(e.name)
            if charges is None:
                charges = e.attention(shape, context)
            job = Job(art, model, shape, fleet, tuple(pools), context, settings)
            result = e.plan(job)
            if settings.calibration:
                # Imported where a calibration is applied: a plan without one (most) needs none
                # of it.
                from llmfit.plan.calibration import calibrated, calibration_notes

                result = replace(result, options=calibrated(result.options, settings.calibration))
                engine_notes += [
                    n for n in calibration_notes(result.options, settings.calibration, e.name)
                    if n not in engine_notes
                ]  # fmt: skip
            for o in result.options:
                # An engine's own search may stray; what its commands cannot launch is never
                # offered (plan/layout.py LayoutSpace).
                why = e.layouts.refusal(o.layout)
                if why is None:
                    found.append(o)
                else:
                    where = e.where(o)
                    rejected.append(Rejection(art.name, key, where, f"{e.name} cannot launch "
                                              f"it: {why}", what_if=o.what_if))  # fmt: skip
            rejected += result.rejected
            engine_notes += [n for n in result.notes if n not in engine_notes]
        if not runs:
            asked = ", ".join(settings.engines) or "any engine"
            rejected.append(Rejection(art.name, asked, "any", f"{asked} cannot run {art.format}"))
        if settings.context is None and not any(o.what_if is None for o in found):
            found += _shorter(model, art, fleet, settings, rejected)
        if found:
            options.extend(found)
        elif settings.pins.any:
            u = _nearest(art, rejected, pools, gpu_only, pinned=True)
            fit = _nearest_fit(model, art, fleet, settings)
            pins = settings.pins
            if fit is not None:
                # The user's pins, each at the value the nearest layout has.
                given = Pins(
                    tp=fit.tp if pins.tp is not None else None,
                    pp=fit.pp if pins.pp is not None else None,
                    dp=fit.dp if pins.dp is not None else None,
                    ep=fit.expert_parallel if pins.ep is not None else None,
                    gpus=fit.gpus if pins.gpus is not None else None,
                )
                u = replace(u, nearest=fit, nearest_pins=given.describe())
            unplaced.append(u)
        else:
            unplaced.append(_nearest(art, rejected, pools, gpu_only))
    shapes = _host_shapes(pools)
    options = [_with_fleet(o, shapes, settings.replicas) for o in options]
    budget_notes: tuple[str, ...] = ()
    if settings.budget is not None:
        options, budget_notes = _within_budget(options, settings.budget)
    workload = settings.workload
    serving_notes: tuple[str, ...] = ()
    gpu = [o for o in options if o.serving is not None]
    if gpu and all(o.serving.replicas is None for o in gpu if o.serving):
        serving_notes = (
            "no option serves the workload within its targets at any load (the nearest are "
            "first): relax --tpot or --ttft, or plan for faster cards",
        )
    ranked = rank(options, settings.rank)
    disaggregated, disagg_notes = _disaggregated(ranked, shape, pools, ran, settings)
    return Plan(
        model=model,
        context=context,
        ceiling=ceiling(ranked),
        options=tuple(ranked),
        rejected=tuple(rejected),
        unplaced=tuple(unplaced),
        notes=(
            desktop_notes
            + model.notes
            + fleet.notes
            + _context_notes(model, context, tuple(ran), settings.given is None)
            + tuple(engine_notes)
            + serving_notes
            + budget_notes
            + disagg_notes
        ),
        kv_bytes_per_token=shape.kv_bytes_per_token(),
        attention=charges if charges is not None else _charges(shape, context, settings.engines),
        workload=workload,
        rank=settings.rank,
        disaggregated=disaggregated,
        ran=tuple(ran),
    )


# Disaggregated options listed where none is asked for by name (`--disagg auto`, `on`): the best
# few; --all lists every one.
DISAGG_SHOWN = 3


def _disaggregated(
    ranked: list[Option[Any]],
    shape: Shape,
    pools: list[ClassPool],
    ran: list[str],
    settings: PlanSettings,
) -> tuple[tuple[Offer, ...], tuple[str, ...]]:
    """The plan's disaggregated options, and what the plan says of them where it was asked for
    them (`--disagg on`, or a pin) and found none. None for a checked command (one launch, as
    given) or a burst of requests (served in waves, not a steady state two pools share)."""
    d = settings.disagg
    asked = d.mode == "on" or d.pinned
    if d.mode == "off" or settings.given is not None or not ranked:
        return (), ()
    w = settings.workload
    if w.requests is not None:
        return (), (
            ("disaggregated prefill and decode is planned for a steady load (--rate, "
             "--concurrency), not a burst of requests sent at once",) if asked else ()
        )  # fmt: skip
    engines = Engines({k: engine(k).name for k in ran}, {k: engine(k).layouts for k in ran})
    found = offers(
        ranked, w, shape, engines, class_nodes(pools), d, every=asked, rank=settings.rank
    )
    if not found and asked:
        refusals = [f"{engine(k).name} launches no disaggregated prefill and decode" for k in ran
                    if engine(k).layouts.pairs is None]  # fmt: skip
        why = "; ".join(refusals) or (
            "no pair of the plan's layouts meets the targets as prefill and decode workers"
        )
        return (), (f"no disaggregated option: {why}",)
    return tuple(found if settings.every_layout else found[:DISAGG_SHOWN]), ()


# Identical hosts of a class, counted: (cards a node, free cards a node, price) -> nodes.
Shapes = dict[tuple[int, int, float | None], int]


def _host_shapes(pools: list[ClassPool]) -> dict[tuple[str, str | None], Shapes]:
    """The fleet's hosts of each class, by fabric (None: on any), counted by shape. A fleet of
    100,000 nodes has a few shapes: every option's replica counts add those up, where summing
    every host for each option took 3 s of a 4 s plan."""
    out: dict[tuple[str, str | None], Shapes] = {}
    for p in pools:
        for h in p.hosts:
            rows = out.setdefault((p.gpu_class, h.fabric), {})
            shape = (h.gpus, h.free, h.node.price)
            rows[shape] = rows.get(shape, 0) + h.count
    for (gpu_class, _), rows in list(out.items()):
        anywhere = out.setdefault((gpu_class, None), {})
        for shape, n in rows.items():
            anywhere[shape] = anywhere.get(shape, 0) + n
    return out


def _with_fleet(
    o: Option[Any], shapes: dict[tuple[str, str | None], Shapes], asked: int | None = None
) -> Option[Any]:
    """The option with how many replicas of it the fleet's cards could run (all of them, and
    the free ones now): the load they could serve is that times its capacity; and how many of
    it its launch starts (`asked`, --replicas, else what the load needs)."""
    o = replace(o, launched=launch_scale(o, asked))
    if o.card is None or o.gpu_class is None:
        return o
    lay = o.layout
    per_node = lay.cards_per_node
    rows = shapes.get((o.gpu_class, o.fabric or None), {})

    def units(free: bool) -> int:
        if not per_node:
            return 0
        if lay.nodes <= 1:
            return sum(n * ((f if free else g) // per_node) for (g, f, _), n in rows.items())
        return (
            sum(n for (g, f, _), n in rows.items() if (f if free else g) >= per_node) // lay.nodes
        )

    # A card's price an hour: the cheapest node's of those that could run it, where all of them
    # are priced.
    prices = [price for (g, _, price) in rows if g >= per_node]
    cheapest = min(prices) if prices and None not in prices else None  # type: ignore[type-var]
    return replace(o, free_replicas=units(True), fleet_replicas=units(False),
                   price=cheapest)  # fmt: skip


def _within_budget(
    options: list[Option[Any]], budget: float
) -> tuple[list[Option[Any]], tuple[str, ...]]:
    """The options that cost at most `budget` an hour (an unpriced one, a CPU's, is kept), and
    the note that says what was left out: nothing is dropped unsaid."""
    kept: list[Option[Any]] = []
    over: list[float] = []
    for o in options:
        cost = hourly(o)
        if cost is not None and cost > budget * (1 + 1e-9):
            over.append(cost)
        else:
            kept.append(o)
    if not over:
        return kept, ()
    n = len(over)
    return kept, (
        f"--budget {budget:g} an hour: {n} option{'s' if n != 1 else ''} that cost"
        f"{'s' if n == 1 else ''} more left out (the cheapest of them ${min(over):,.2f} an hour)",
    )


def _charges(shape: Shape, context: int, named: tuple[str, ...]) -> tuple[AttentionCharge, ...]:
    """How each kind of layer is charged, in the words of the first engine planned, where no
    engine ran an artifact (a repository with none, or of a format none runs)."""
    first = next((k for k in keys() if planned(k, named)), None)
    return engine(first).attention(shape, context) if first else ()


# The what-if of a checkpoint served as shipped, but at a shorter context than it was trained for.
SHORTER = "shorter context"


def _shorter(
    model: Model, art: Artifact, fleet: Fleet, settings: PlanSettings, rejected: list[Rejection]
) -> list[Option[Any]]:
    """Where the trained context fits nowhere as the checkpoint is stored, the checkpoint as
    stored at the longest context it holds is an option beside the what-ifs, ranked by the same
    rules: a user offered only a quantised what-if at the full context would not see that the
    model as shipped runs at, say, 40,000 tokens on the same card.

    Each class of card at its own longest, on one node and on several: on a fleet of L40S and
    H100 nodes the H100's longer context must not hide what the L40S would hold, nor two nodes'
    longer context what one node holds (the plan spans nodes only where one will not do)."""
    longest: dict[tuple[str | None, bool], int] = {}
    for r in rejected:
        if r.artifact == art.name and not r.what_if and r.max_context > 0:
            key = (r.gpu_class, r.nodes > 1)
            longest[key] = max(longest.get(key, 0), r.max_context)
    out: list[Option[Any]] = []
    # A way on a class no refusal named (one that spans classes) is kept at the longest of all.
    top = max(longest.values(), default=0)
    for context in sorted(set(longest.values()), reverse=True):
        if settings.workload.tokens > context:
            # A context shorter than one request serves none of them.
            continue
        narrower = replace(settings, context=context, precision="stored")
        again = plan(model, [art], fleet, narrower)
        out += [
            replace(o, what_if=SHORTER, changes=1)
            for o in again.options
            if longest.get((o.gpu_class, o.nodes > 1), top) == context
        ]
    return out


def _context_notes(
    model: Model, context: int, ran: tuple[str, ...], ours: bool = True
) -> tuple[str, ...]:
    """`ran`: the engines whose commands the plan prints; `ours`: the commands are llmfit's own
    (not a checked command's, which say for themselves what they set)."""
    if not (model.max_context and context > model.max_context):
        return ()
    stretch = yarn_overrides(model, context)
    if stretch is not None and model.yarn is not None:
        # The model's own way past its trained context: the commands carry its rope overrides,
        # each engine's in its own flag.
        rope = stretch["rope_scaling"]
        assert isinstance(rope, dict)
        return (
            f"a context of {context:,} is past the {model.max_context:,} the model was trained "
            f"for: the commands stretch it with YaRN (factor {rope['factor']} over "
            f"{model.yarn.original:,} tokens), as {model.yarn.source} documents up to "
            f"{model.yarn.longest:,}; the card notes that static YaRN may cost some quality on "
            "short texts",
        )
    # Some engines refuse a context past the model's own unless an environment variable says
    # otherwise; the commands set it, and the note says which and that quality is not promised.
    switches = [f"{name}={value}" for key in ran for name, value in engine(key).long_context_env]
    said = (
        f"; the commands set {' and '.join(switches)}, without which the engine refuses it"
        if switches and ours
        else ""
    )
    return (
        f"a context of {context:,} is past the {model.max_context:,} the model was trained for"
        f"{said}; answers past it may degrade",
    )


def _nearest_fit(
    model: Model, art: Artifact, fleet: Fleet, settings: PlanSettings
) -> Option[Any] | None:
    """Of the layouts that fit without the pins (every one, not only the best of each kind), the
    one nearest them: the most pinned sizes it has, then the least far from the others, then the
    best ranked."""
    free = plan(model, [art], fleet, replace(settings, pins=Pins(), every_layout=True))
    if not free.options:
        return None
    pins = settings.pins
    asked = [(pins.tp, "tp"), (pins.pp, "pp"), (pins.dp, "dp"), (pins.gpus, "gpus")]

    def far(o: Option[Any]) -> tuple[int, int, int]:
        sizes = {"tp": o.tp, "pp": o.pp, "dp": o.dp, "gpus": o.gpus}
        missed = sum(1 for v, k in asked if v is not None and sizes[k] != v)
        missed += int(pins.ep is not None and o.expert_parallel != pins.ep)
        distance = sum(abs(sizes[k] - v) for v, k in asked if v is not None)
        return missed, distance, free.options.index(o)

    return min(free.options, key=far)


def _nearest(
    art: Artifact,
    rejected: list[Rejection],
    pools: list[ClassPool],
    gpu_only: list[str],
    pinned: bool = False,
) -> Unplaced:
    if not pools and gpu_only:
        return Unplaced(art.name, f"the fleet has no GPU that {' or '.join(gpu_only)} could use")
    sized = [r for r in rejected if r.artifact == art.name and r.need and not r.what_if]
    if not sized:
        mine = [r for r in rejected if r.artifact == art.name and r.kind != "dominated"]
        # A refusal on the cards before one of the CPU nodes (that safetensors do not run there):
        # with pins, the rule that refused them, said with where it was tried.
        on_cards = [r for r in mine if r.gpu_class] or mine
        if pinned and on_cards:
            r = on_cards[0]
            return Unplaced(art.name, r.reason if r.where == "any" else f"{r.where}: {r.reason}")
        reasons = [r.reason for r in on_cards]
        return Unplaced(art.name, reasons[-1] if reasons else "no way to place it was found")
    # A card whose engine reserves all of it (have 0) is the farthest miss, not a division by 0.
    best = min(sized, key=lambda r: r.need / r.have if r.have > 0 else float("inf"))
    # Where the weights fit and only the context does not, the longest context that would.
    shorter = max(sized, key=lambda r: r.max_context)
    return Unplaced(
        art.name,
        where=best.where,
        need=best.need,
        have=best.have,
        fits_at=shorter.max_context,
        fits_where=shorter.where if shorter.max_context else "",
        wants_ram=next(
            (
                engine(r.engine).name
                for r in rejected
                if r.artifact == art.name and r.reason == NO_RAM
            ),
            "",
        ),
    )
