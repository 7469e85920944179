"""A fourth engine, as a test double: `toy-serve`, registered through the real registry.

It is what a new engine's module looks like and nothing more: its knobs declared once (one
float, one count), its layout space declared (tensor parallel within one node: no pipeline, no
data-parallel ranks, no nodes), a memory model that is arithmetic a test can redo by hand, its
launch, its reader, its image. The shared search, the planner, the renderers, `llmfit check` and
the JSON document meet it through the registry alone; nothing outside this file and its registry
line names it. Memory, a card of a layout: the weights split over the tensor-parallel width, one
GiB of runtime, and the KV cache (the model's KV bytes a token, split as the heads split) out of
`--kv-fraction` of the card (0.9 by default).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from llmfit.plan.artifact import Artifact
from llmfit.plan.credentials import Vault
from llmfit.plan.engines import (
    NO_ENV,
    Explanation,
    Image,
    Job,
    Part,
    Registered,
    Request,
    knobs,
    serving,
)
from llmfit.plan.engines.argv import scan, whole
from llmfit.plan.engines.knobs import MEMORY, knob
from llmfit.plan.engines.serving import Variant
from llmfit.plan.launch import Command
from llmfit.plan.layout import Layout, LayoutSpace
from llmfit.plan.layouts import Sized, Tried
from llmfit.plan.model import AttentionCharge, Model, Shape
from llmfit.plan.options import Option, PerCard
from llmfit.plan.pools import ClassPool
from llmfit.plan.settings import Pins, PlanSettings

GIB = 1 << 30
RUNTIME = GIB
DEFAULT_FRACTION = 0.9

LINE = Registered(
    "tests.plan.toy_engine", "Toy", "tests.plan.toy_engine:ToyOptions", ("toy_width",),
    formats=("safetensors",), programs=("toy-serve",),
    cases=(("Qwen/Qwen3-8B", "8xh100-80g"),), knob_case=("Qwen/Qwen3-8B", "1xh100-80g"),
)  # fmt: skip


@dataclass(frozen=True)
class ToyOptions:
    kv_fraction: float | None = knob(
        None, "--kv-fraction", kind="float", low=0, high=1, open_low=True, changes=(MEMORY,),
        help="the share of a card the engine takes.", example="0.5",
    )  # fmt: skip
    # Passed on, and changes nothing the toy plans: it has no speed model to change.
    max_batch: int | None = knob(
        None, "--max-batch", "-B", low=1, high=4096,
        help="sequences a step (passed on).", example="32",
    )  # fmt: skip


@dataclass(frozen=True)
class ToyLaunch:
    context: int
    options: ToyOptions


class Toy(serving.Serving):
    key = "toy"
    name = "Toy"
    programs = ("toy-serve",)
    layouts = LayoutSpace(tensor=True)
    long_context_env: tuple[tuple[str, str], ...] = ()

    def _variants(self, job: Job) -> list[Variant]:
        return [Variant(job.artifact.bytes, job.artifact.quant, job.shape.kv_dtype)]

    def _width_refusal(self, shape: Shape, tp: int, expert_parallel: bool) -> str | None:
        heads = shape.attention_heads
        return None if heads % tp == 0 else f"{heads} heads do not split over {tp}"

    def _sizer(
        self, job: Job, art: Artifact, shape: Shape, pool: ClassPool, v: Variant
    ) -> Callable[[Layout], Sized]:
        fraction = job.settings.options(ToyOptions).kv_fraction or DEFAULT_FRACTION

        def size(layout: Layout) -> Sized:
            weights = -(-v.weight_bytes // layout.tp)
            token = shape.kv_bytes_per_token(layout.tp)
            one = token * job.context
            have = int(pool.card_bytes * fraction)
            room = have - weights - RUNTIME
            return Sized(
                per_card=PerCard(weights, one, RUNTIME),
                have=have,
                held=round(max(room, 0) / one, 2) if one else 0.0,
                max_context=max(room, 0) // token if token else 0,
                kv_per_token=token,
                kv_tokens=max(room, 0) // token if token else 0,
            )

        return size

    def _option(self, job: Job, art: Artifact, pool: ClassPool, t: Tried) -> Option:
        launch = ToyLaunch(job.context, job.settings.options(ToyOptions))
        fraction = launch.options.kv_fraction or DEFAULT_FRACTION
        return serving.option_of(job, self.key, art, pool, t, launch, share=fraction)

    def commands(
        self, option: Option, repo_id: str, revision: str | None, *, ray: bool = False
    ) -> list[Command]:
        launch = option.launch
        assert isinstance(launch, ToyLaunch)
        argv = ["toy-serve", repo_id, "--tp", str(option.layout.tp), "--ctx", str(launch.context)]
        return [Command("all", (*argv, *knobs.argv(launch.options)))]

    def attention(self, shape: Shape, context: int) -> tuple[AttentionCharge, ...]:
        return tuple(
            AttentionCharge("full", g.layers, shape.kv_bytes_per_token(), 0, "K and V a token")
            for g in shape.layer_groups
        )

    def explain(self, option: Option, model: Model) -> Explanation:
        c = option.per_card
        return Explanation(
            (
                Part("weights", c.weights, f"1/{option.layout.tp} of the checkpoint"),
                Part("KV cache", c.kv_cache, f"one sequence of {option.context:,} tokens"),
                Part("overhead", c.overhead, "one GiB of runtime"),
            ),
            "the toy engine's arithmetic",
        )

    def image(self, option: Option) -> Image:
        return Image("example.com/toy:1", ("toy-serve",), 9000, "/ready")

    def values(self, option: Option) -> dict[str, object]:
        return {"toy_width": option.layout.tp}

    def read_command(
        self,
        argv: Sequence[str],
        defaults: PlanSettings,
        env: Mapping[str, str] = NO_ENV,
        vault: Vault | None = None,
        load: Callable[[str], Any] | None = None,
    ) -> Request:
        args = list(argv[1:])
        tables = knobs.tables(ToyOptions)
        words = scan(
            args, {"--tp": "tp", "--ctx": "ctx", **tables.valued}, tables.switches, set(), set()
        )
        if not words.positional:
            raise ValueError("the toy command names no model: toy-serve REPO ….")
        mine = {k: v for k, v in words.got.items() if k in tables.valued.values()}
        options = knobs.build(ToyOptions, knobs.read(ToyOptions, mine, words.on))
        settings = replace(
            defaults,
            context=whole("--ctx", words.got["ctx"]) if "ctx" in words.got else None,
            precision="stored",
            pins=Pins(tp=whole("--tp", words.got.get("tp", "1")), pp=1, dp=1),
            engines=(self.key,),
            every_layout=True,
        ).with_options(options)
        return Request(repo=words.positional[0], settings=settings, ignored=tuple(words.ignored))


ENGINE = Toy()
