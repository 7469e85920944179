"""vLLM, the engine: the layouts it accepts for a safetensors checkpoint, what each card holds
under them, and the `vllm serve` lines that launch them.

Layouts (vllm/config/parallel.py, vllm/engine/arg_utils.py, 0.33):
- tensor parallel within a node, a width that divides the attention heads and divides or is a
  multiple of the KV heads (width_refusal);
- pipeline parallel across the nodes of one fabric (one stage a node, the node's cards its
  width) or within a node; stages take runs of layers by get_pp_indices, the first also holding
  the embedding and the last the output layer, so the fullest stage is the one checked;
- data parallel ranks (`--data-parallel-size`): for a dense model, full copies of the model, each
  with its own KV cache; for a MoE, ranks that each run their own attention and KV cache while
  the routed experts are sharded over all tp × dp ranks (FusedMoEParallelConfig flattens tp
  across dp) with `--enable-expert-parallel`: the DeepSeek/Kimi/Qwen3-MoE recipe, within a node
  or across the nodes of a fabric;
- expert parallelism for a MoE on more than one card.

What one card holds is vllm_memory's, for the vLLM release asked for (`--vllm-version`, default
the newest modelled): its weights part by part, its profile run, CUDA graphs and KV pool, each as
that release's code works it out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from llmfit.plan import speed as speeds
from llmfit.plan.artifact import Artifact, WeightLayout
from llmfit.plan.credentials import Vault
from llmfit.plan.engines import (
    NO_ENV,
    Assumed,
    Explanation,
    Found,
    Image,
    Job,
    Part,
    Request,
    knobs,
    serving,
    serving_speed,
)
from llmfit.plan.engines import vllm_memory as vm
from llmfit.plan.engines.serving import Variant, flag_value, kv_source, source, split_refusal
from llmfit.plan.engines.vllm_options import VllmOptions
from llmfit.plan.engines.vllm_versions import NEWEST, VllmVersion
from llmfit.plan.launch import Command, Given
from llmfit.plan.layout import ACROSS, Card, Layout, LayoutSpace, PairRules
from llmfit.plan.layouts import Sized, Tried
from llmfit.plan.model import AttentionCharge, Model, Shape, yarn_json
from llmfit.plan.options import Option, PerCard
from llmfit.plan.pools import ClassPool
from llmfit.plan.settings import PlanSettings
from llmfit.plan.weights import pp_partition

# The port the head's data-parallel coordinator listens on for the other nodes' ranks (vLLM's
# multi-node data-parallel example uses 13345; any free port will do).
DP_RPC_PORT = 13345
LONG_CONTEXT_ENV = ("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "1")
# Online quantisation and KV dtype, as vLLM's parser spells them (the quantisation flag respelt
# for the release modelled: VllmVersion.quantization_fp8_flag).
FP8_WEIGHTS = ("--quantization", "fp8")
FP8_KV = ("--kv-cache-dtype", "fp8")
# The vLLM release the plan models (its memory arithmetic, its flags); the image a container runs
# is this release's (`--vllm-version`, once it lands, sets VllmLaunch.version).
# vLLM's image on Docker Hub: one tag a release, v0.X.Y (docs/deployment/docker.md); its
# ENTRYPOINT is `vllm serve` (docker/Dockerfile, vllm-openai target), its server answers on 8000
# and says it is ready on /health (vllm/entrypoints/openai/api_server.py).
IMAGE = "vllm/vllm-openai"
PORT = 8000
# True once a Ray cluster has {nodes} live nodes: `ray start` returns before the workers join,
# and a serve started before they have fails to place its ranks.
RAY_JOINED = (
    'python3 -c \'import ray; ray.init(address="auto", logging_level="ERROR"); '
    'raise SystemExit(sum(n["Alive"] for n in ray.nodes()) < {nodes})\''
)


def image_tag(version: str) -> str:
    """ "0.33" → "v0.33.0", "0.27.1" → "v0.27.1": vLLM tags every release with its full number."""
    parts = version.removeprefix("v").split(".")
    return "v" + ".".join(parts + ["0"] * (3 - len(parts)))


@dataclass(frozen=True)
class VllmLaunch:
    """What a `vllm serve` line of an option is made of, beside its layout."""

    max_model_len: int
    gpu_memory_utilization: float
    # --kv-cache-dtype as vLLM spells it; None leaves it at auto.
    kv_cache_dtype: str | None
    # The what-if's flags (--quantization fp8, --kv-cache-dtype fp8), as they are passed.
    flags: tuple[str, ...]
    # The batch vLLM profiles its working memory with (its default on this card, or the user's).
    batched_tokens: int
    # The knobs the user set (vllm_options.py), passed on as given.
    options: VllmOptions = VllmOptions()
    # A context past the trained one, which vLLM refuses without VLLM_ALLOW_LONG_MAX_MODEL_LEN.
    long_context: bool = False
    # Or, where the model's documentation stretches it with YaRN, the config overrides that do
    # (model.yarn_overrides), as --hf-overrides JSON; None where there are none.
    rope_overrides: str | None = None
    # The config names code of its own (auto_map: Kimi-K2's tokenizer, DeepSeek's modelling
    # files), which vLLM loads only with --trust-remote-code.
    trust_remote_code: bool = False
    # The release the plan modelled (which a container's image follows), and its fullest card
    # part by part (for --explain).
    version: VllmVersion = NEWEST
    memory: vm.VllmMemory | None = None
    # A command being checked, which the launch runs as given (llmfit check).
    given: Given | None = None
    # Whether the command passes --gpu-memory-utilization: always before 0.34; from 0.34 only
    # where the user named one (vLLM resolves its own, 1.0 with the extensible KV cache).
    pass_utilization: bool = True
    # Where --gpu-memory-utilization and --kv-cache-dtype came from (engines.Assumed's source).
    utilization_source: str = "default"
    kv_source: str = "default"


def variants(art: Artifact, model: Model, kv_dtype: str, settings: PlanSettings) -> list[Variant]:
    """The checkpoint as stored and, for a 16-bit one, what vLLM's `--quantization fp8` and
    `--kv-cache-dtype fp8` would make of it (serving.variants)."""
    return serving.variants(art, model, kv_dtype, settings, fp8_weights=FP8_WEIGHTS, fp8_kv=FP8_KV)


# The fp8 KV formats vLLM takes by name besides "fp8" (vllm/config/cache.py CacheDType): each is a
# byte a value, sized as "fp8", and passed on as asked.
EXACT_FP8 = ("fp8_e4m3", "fp8_e5m2")


def engine_kv_dtype(model: Model, settings: PlanSettings) -> str | None:
    """The --kv-cache-dtype the plan relied on, in vLLM's spelling; None where auto gives it."""
    chosen = settings.kv_cache_dtype if settings.kv_cache_dtype != "auto" else model.kv_cache_dtype
    if not chosen:
        return None
    if chosen in EXACT_FP8:
        return chosen  # the fp8 format asked for, as vLLM spells it (issue 34)
    return "fp8" if chosen.startswith(("fp8", "float8")) else chosen


def width_refusal(shape: Shape, tp: int, expert_parallel: bool = False) -> str | None:
    """The reason vLLM refuses this tensor-parallel width, or None when it accepts it: its
    attention heads, in vLLM's words, then the layers it splits (serving.split_refusal)."""
    if shape.attention_heads and shape.attention_heads % tp:
        # ModelConfig.verify_with_parallel_config, word for word.
        return (
            f"Total number of attention heads ({shape.attention_heads}) must be divisible by "
            f"tensor parallel size ({tp})."
        )
    kv = shape.kv_heads
    if kv and kv % tp and tp % kv:
        # QKVParallelLinear splits KV heads evenly, or past their number replicates them evenly.
        return (
            f"{kv} KV heads can be neither split evenly across nor replicated evenly over "
            f"{tp} cards."
        )
    return split_refusal(shape, tp, expert_parallel)


def version_of(opts: VllmOptions) -> VllmVersion:
    """The release a plan models: the one asked for, else the newest llmfit knows."""
    return VllmVersion.parse(opts.version) if opts.version else NEWEST


def planned_utilization(s: PlanSettings, version: VllmVersion) -> float | None:
    """The --gpu-memory-utilization a plan passes: the user's, or the plan's default where the
    release has no resolution of its own; None (vLLM's own: 1.0 with the extensible KV cache,
    CacheConfig.resolved_gpu_memory_utilization) from 0.34 where the user named none."""
    if version.has("gpu_memory_utilization_1_extensible") and not s.utilization_named:
        # Off, the release's 0.92 is resolved by vLLM too (resolved_gpu_memory_utilization).
        return None
    return s.gpu_memory_utilization


def memory_settings(job: Job, v: Variant) -> vm.Settings:
    """What vllm_memory needs of the plan's settings, for one variant of the checkpoint."""
    s = job.settings
    o = s.options(VllmOptions)
    kv = v.kv_dtype if v.kv_dtype != job.model.kv_dtype or s.kv_cache_dtype != "auto" else "auto"
    return vm.Settings(
        version=version_of(o),
        gpu_memory_utilization=planned_utilization(s, version_of(o)),
        max_model_len=job.context,
        kv_cache_dtype="fp8" if kv.startswith(("fp8", "float8")) else kv,
        max_num_seqs=o.max_num_seqs,
        max_num_batched_tokens=o.max_num_batched_tokens,
        enforce_eager=o.enforce_eager,
        enable_prefix_caching=o.enable_prefix_caching,
        enable_extensible_kv_cache=o.enable_extensible_kv_cache,
        kv_cache_memory_bytes=o.kv_cache_memory_bytes,
        num_gpu_blocks_override=o.num_gpu_blocks_override,
        cpu_offload_gb=o.cpu_offload_gb or 0.0,
        lora=vm.LoRA(*o.lora) if o.lora else None,
        speculative=o.speculative,
        limit_mm_per_prompt=o.limits,
        quantization="fp8" if v.quant == "fp8" and job.model.quantization is None else None,
    )


def _pinned_value(opts: VllmOptions, flag: str) -> int:
    """The value of the flag that set the pool's size."""
    if flag == "--num-gpu-blocks-override":
        return opts.num_gpu_blocks_override or 0
    return opts.kv_cache_memory_bytes or 0


def _card(m: vm.VllmMemory) -> PerCard:
    """A rank's memory in the parts an option reports: its weights, one sequence of the context
    in whole blocks (a hybrid's states are blocks of the same pool), and what else its budget
    pays (VllmMemory.runtime): the profile run's peak with a multimodal model's encoder cache
    and encoder run (activations), CUDA graphs where they come out of the budget, and the
    runner's buffers, memory outside torch, a MoE's workspace and a later pipeline stage's
    receive buffers (runtime)."""
    one = m.layout.blocks_per_request * m.layout.bytes_per_block if m.layout else 0
    if m.kv_pinned:
        # --kv-cache-memory-bytes or --num-gpu-blocks-override: the card holds the whole pool
        # the flag sized.
        one = m.kv_cache
    return PerCard(
        weights=m.weights.total,
        kv_cache=one,
        activations=m.activation + m.encoder_cache + m.encoder_peak,
        graphs=m.cuda_graphs if m.cuda_graphs_in_budget else 0,
        runtime=m.persistent_buffers + m.non_torch + m.moe_workspace + m.stage_buffers,
    )


def _assumed(o: Option[VllmLaunch], m: vm.VllmMemory) -> tuple[Assumed, ...]:
    """The settings the card's figures rest on, with where each came from."""
    launch, opts = o.launch, o.launch.options
    ctx = "given" if launch.given is not None else "plan"
    kv, kv_from = launch.kv_cache_dtype or "auto", launch.kv_source
    if (what_if := flag_value(o.engine_flags, "--kv-cache-dtype")) is not None:
        kv, kv_from = what_if, "what-if"
    out = [
        Assumed("--max-model-len", str(launch.max_model_len), ctx),
        Assumed(m.kv_pinned, f"{_pinned_value(opts, m.kv_pinned):,}", "given")
        if m.kv_pinned
        else Assumed(
            "--gpu-memory-utilization", f"{m.gpu_memory_utilization:.2f}", launch.utilization_source
        ),
        Assumed("--kv-cache-dtype", kv, kv_from),
        Assumed("--max-num-seqs", str(m.max_num_seqs), source(opts.max_num_seqs)),
        Assumed(
            "--max-num-batched-tokens",
            str(m.max_num_batched_tokens),
            source(opts.max_num_batched_tokens),
        ),
    ]
    if (quant := flag_value(o.engine_flags, "--quantization")) is not None:
        out.append(Assumed("--quantization", quant, "what-if"))
    if opts.enforce_eager:
        out.append(Assumed("--enforce-eager", "on", "given"))
    return tuple(out)


def _size(n: int) -> str:
    """ "0.98 GiB", or "32.0 MiB" below a tenth of a GiB."""
    return f"{n / (1 << 30):.2f} GiB" if n >= (1 << 30) // 10 else f"{n / (1 << 20):.1f} MiB"


def _kv_words(o: Option[VllmLaunch], m: vm.VllmMemory) -> str:
    """How one sequence's cache is laid out: "one sequence of 32,768 tokens: 2,048 blocks of 16
    tokens", with the layer groups and state pages of a hybrid model."""
    layout = m.layout
    if layout is None:
        return "no KV cache"
    if m.kv_pinned:
        return (
            f"the pool of {m.kv_tokens:,} tokens {m.kv_pinned} sets: "
            f"{m.num_blocks:,} blocks of {layout.block_size:,} tokens × "
            f"{layout.bytes_per_block:,} B a block"
        )
    kinds = ", ".join(
        f"{k.groups} {k.kind} group{'s' if k.groups != 1 else ''} × {k.blocks_per_request:,}"
        for k in layout.kinds
    )
    words = (
        f"one sequence of {o.context:,} tokens: {layout.blocks_per_request:,} blocks of "
        f"{layout.block_size:,} tokens ({kinds}) × {layout.bytes_per_block:,} B a block"
    )
    if layout.mamba_mode:
        words += f"; state layers in '{layout.mamba_mode}' mode"
    return words


def _verdicts(
    asked: list[Option[VllmLaunch]], newest: list[Option[VllmLaunch]], version: VllmVersion
) -> str | None:
    """One sentence where the release asked for and the newest disagree on what fits."""

    def keys(options: list[Option[VllmLaunch]]) -> set[tuple[str | None, Layout, str | None]]:
        return {(o.gpu_class, o.layout, o.what_if) for o in options}

    only_asked, only_newest = keys(asked) - keys(newest), keys(newest) - keys(asked)
    if not only_asked and not only_newest:
        return None
    parts = []
    if only_newest:
        parts.append(f"{len(only_newest)} layout{'s' if len(only_newest) > 1 else ''} more fit")
    if only_asked:
        parts.append(f"{len(only_asked)} of these do not")
    return (
        f"under vLLM {NEWEST} (the newest llmfit models) the verdict differs from vLLM "
        f"{version}'s: " + " and ".join(parts) + f" (plan with --vllm-version {NEWEST} to see them)"
    )


def _batch_refusal(m: vm.VllmMemory) -> str | None:
    """vLLM's refusal of a step of fewer tokens than sequences, where --max-num-seqs asks for
    more than the card's default batch (vllm/config/scheduler.py SchedulerConfig, its words)."""
    if m.max_num_batched_tokens >= m.max_num_seqs:
        return None
    return (
        f"vLLM refuses it: max_num_batched_tokens ({m.max_num_batched_tokens}) must be greater "
        f"than or equal to max_num_seqs ({m.max_num_seqs}); give --max-num-batched-tokens "
        f"{m.max_num_seqs} or more"
    )


class Vllm(serving.Serving[VllmLaunch]):
    key = "vllm"
    name = "vLLM"
    programs = ("vllm",)
    # Tensor × pipeline parallel, data-parallel ranks (copies of a dense model; a MoE's ranks
    # sharing its experts), expert parallelism; stages across nodes by --nnodes (or Ray), a MoE's
    # ranks across nodes by --data-parallel-size-local (vllm/config/parallel.py ParallelConfig).
    long_context_env = (LONG_CONTEXT_ENV,)
    layouts = LayoutSpace(
        tensor=True, pipeline=True, data=True, experts=True, replicas=True,
        across_nodes=frozenset(ACROSS),
        # vLLM 0.34's NixlConnector (--kv-transfer-config, kv_connector NixlConnector): the two
        # sides' TP may differ, each a multiple of the other (distributed/kv_transfer/
        # kv_connector/utils.py TransferTopology.tp_ratio); a non-MLA, non-hybrid prefill wider
        # than decode only where it does not replicate KV heads (nixl/base_worker.py
        # `_validate_remote_agent_handshake`); MLA reads one prefill rank's latent and state-space
        # state is resliced by rank (nixl/tp_mapping.py `compute_tp_mapping`); decode runs no
        # pipeline stages, nor does a hybrid model (base_worker.py, NixlPushConnector's
        # pipeline checks). Same vLLM version, model, dtype, KV-cache dtype, attention backend
        # and speculative config on both sides (nixl/metadata.py
        # `compute_nixl_compatibility_hash`).
        pairs=PairRules(
            transport="NixlConnector", unequal_tp=True, no_wider_replicated_prefill=True,
            hybrid_no_pp=True, decode_pp_one=True,
            source="vllm/distributed/kv_transfer/kv_connector/v1/nixl (vLLM 0.34.0)",
            launch="llmfit.plan.engines.vllm_disagg:roles",
            role="llmfit.plan.engines.vllm_disagg:role_refusal",
        ),
    )  # fmt: skip

    # -- planning -------------------------------------------------------------------------------

    def plan(self, job: Job) -> Found:
        found = super().plan(job)
        opts = job.settings.options(VllmOptions)
        asked = version_of(opts)
        if asked != NEWEST:
            newest = super().plan(replace(job, settings=job.settings.with_options(
                replace(opts, version=None))))  # fmt: skip
            note = _verdicts(found.options, newest.options, asked)
            if note:
                found.notes.append(note)
        return found

    def _variants(self, job: Job) -> list[Variant]:
        version = version_of(job.settings.options(VllmOptions))
        out = []
        for v in variants(job.artifact, job.model, job.shape.kv_dtype, job.settings):
            if "--quantization" in v.flags:
                # Online fp8, spelled as the release modelled spells it (an alias from 0.31).
                at = v.flags.index("--quantization") + 1
                flags = (*v.flags[:at], version.quantization_fp8_flag, *v.flags[at + 1 :])
                v = replace(v, flags=flags)
            out.append(v)
        return out

    def _width_refusal(self, shape: Shape, tp: int, expert_parallel: bool) -> str | None:
        return width_refusal(shape, tp, expert_parallel=expert_parallel)

    def _sizer(
        self, job: Job, art: Artifact, shape: Shape, pool: ClassPool, v: Variant
    ) -> Callable[[Layout], Sized]:
        """Each layout's fullest card under the release modelled (vllm_memory): every pipeline
        stage is estimated, the stages share the fewest blocks any of them has, and the card
        checked is the stage that needs the most."""
        model, context = job.model, job.context
        card = Card(pool.gpu_class, pool.card_bytes, pool.override)
        settings = memory_settings(job, v)
        stored = job.artifact
        exact = (
            stored.layout
            if stored.layout is not None
            else (stored.weights if stored.weights_exact else None)
        )
        parts = vm.parts_of(model, v.weight_bytes, None)
        weights = WeightLayout(
            parts.layer_bytes, parts.expert_bytes, parts.embed_bytes, parts.output_bytes,
            bool(model.shapes and model.shapes.tied_embeddings),
        )  # fmt: skip
        spec = pool.spec
        fp8 = (art.quant or "").lower().startswith("fp8") or model.quantization in (
            "fp8", "modelopt", "fbgemm_fp8", "ptpc_fp8",
        )  # fmt: skip

        def size(layout: Layout) -> Sized:
            stages = [
                vm.estimate(model, stored.bytes, vm.Rank.of(layout, s), card, settings, exact)
                for s in range(layout.pp)
            ]
            _, per_rank, tokens = vm.combine_stages(stages)
            fullest = max(stages, key=lambda m: _card(m).need)
            per_card = _card(fullest)
            n = vm.pp_indices(model.layers, stages.index(fullest), layout.pp)
            token = shape.stage(n[1] - n[0]).kv_bytes_per_token(layout.tp)
            held = round(per_rank * layout.dp, 2)
            # The step model on this layout, with vLLM's knobs: CUDA graphs up to its largest
            # capture size (vllm/config/vllm.py _set_cudagraph_sizes: 2 × max_num_seqs, at most
            # 512 tokens, at most the step's budget), none under --enforce-eager.
            graphs = min(2 * fullest.max_num_seqs, 512, fullest.max_num_batched_tokens)
            opts = job.settings.options(VllmOptions)
            eager = opts.enforce_eager
            # Async scheduling (vllm_versions "async_scheduling"): the CPU's work a step runs
            # beside the GPU's, unless --no-async-scheduling (or the release) says otherwise.
            overlap = (
                opts.async_scheduling
                if opts.async_scheduling is not None
                else fullest.version.async_scheduling(layout.pp)
            )
            inputs = serving.speed_inputs(
                serving_speed.VLLM, model, weights, spec, layout, context, token, held,
                fp8, pp_partition, eager=eager, graph_batch=graphs, overlap=overlap,
                curves_backend="vllm",
            )  # fmt: skip
            if inputs is not None and fullest.weights.offloaded:
                inputs = serving.offloaded_inputs(inputs, fullest.weights.offloaded)
            speed = speeds.estimate(inputs) if inputs else None
            replica = serving.replica(
                inputs, layout, model, pool_tokens=tokens, max_batch=fullest.max_num_seqs,
                budget=fullest.max_num_batched_tokens, mixed=True,
                frontends=opts.api_server_count or fullest.version.api_servers(layout.dp),
            )  # fmt: skip
            return Sized(
                per_card=per_card,
                have=fullest.requested,
                held=held,
                max_context=min(m.max_model_len_fit for m in stages),
                kv_per_token=token,
                kv_tokens=tokens,
                extra=fullest,
                fits=all(m.fits for m in stages),
                speed=speed,
                refusal=_batch_refusal(fullest),
                replica=replica,
            )

        return size

    def _option(self, job: Job, art: Artifact, pool: ClassPool, t: Tried) -> Option[VllmLaunch]:
        model, settings = job.model, job.settings
        memory = t.sized.extra
        assert isinstance(memory, vm.VllmMemory)
        share = memory.gpu_memory_utilization
        launch = VllmLaunch(
            max_model_len=job.context,
            gpu_memory_utilization=share,
            kv_cache_dtype=engine_kv_dtype(model, settings),
            flags=(),
            batched_tokens=memory.max_num_batched_tokens,
            options=settings.options(VllmOptions),
            long_context=bool(model.max_context and job.context > model.max_context)
            and yarn_json(model, job.context) is None,
            rope_overrides=yarn_json(model, job.context),
            trust_remote_code=model.custom_code,
            version=memory.version,
            memory=memory,
            given=settings.given,
            pass_utilization=planned_utilization(settings, memory.version) is not None,
            utilization_source="given" if settings.utilization_named else "default",
            kv_source=kv_source(model, settings),
        )
        return serving.option_of(job, self.key, art, pool, t, launch, share=share)

    # -- launching ------------------------------------------------------------------------------

    def commands(
        self, option: Option[VllmLaunch], repo_id: str, revision: str | None, *, ray: bool = False
    ) -> list[Command]:
        o = option
        launch = o.launch
        lay = o.layout
        given = launch.given
        # The serve line itself stays vLLM's own: SGLang's is built alike, but of other flags and
        # of its own parallel sizes (a --tp-size of tp × dp with data-parallel attention).
        argv = ["vllm", "serve", repo_id]
        if revision:
            argv += ["--revision", revision]
        argv += ["--tensor-parallel-size", str(lay.tp)]
        if lay.pp > 1:
            argv += ["--pipeline-parallel-size", str(lay.pp)]
        if lay.dp > 1:
            argv += ["--data-parallel-size", str(lay.dp)]
        if lay.ep:
            argv.append("--enable-expert-parallel")
        argv += o.engine_flags
        # Every value the plan relied on is passed explicitly, so the engine's defaults (which
        # have changed between releases: 0.9 then 0.92 utilisation) cannot change the plan;
        # from 0.34 the share is vLLM's own to resolve (1.0 with the extensible KV cache, which
        # warns at a share below it) unless the user named one.
        argv += ["--max-model-len", str(launch.max_model_len)]
        if launch.pass_utilization:
            argv += ["--gpu-memory-utilization", f"{launch.gpu_memory_utilization:.2f}"]
        if launch.kv_cache_dtype and "--kv-cache-dtype" not in o.engine_flags:
            argv += ["--kv-cache-dtype", launch.kv_cache_dtype]
        if launch.rope_overrides:
            # YaRN past the trained context (ModelConfig.hf_overrides: a dict value is set on the
            # loaded config, vllm/config/model.py _apply_dict_overrides).
            argv += ["--hf-overrides", launch.rope_overrides]
        argv += knobs.argv(launch.options)
        if launch.trust_remote_code:
            argv.append("--trust-remote-code")
        env: tuple[tuple[str, str], ...] = self.long_context_env if launch.long_context else ()
        if given is not None:
            # A checked command is launched as the user wrote it; only its placement on the nodes
            # is added (the plan changes none of its flags: what it would, it says in a note).
            argv, env = list(given.argv), given.env
        # Ray: a cluster first, then one serve on the head. vLLM no longer picks Ray by itself
        # when the replica is wider than the node.
        backend = (
            ("--data-parallel-backend", "ray")
            if lay.dp > 1
            else ("--distributed-executor-backend", "ray")
        )
        local = lay.dp // lay.nodes

        def by_rank(rank: int, head: str) -> list[str]:
            if lay.dp > 1:
                # Data-parallel ranks across nodes (vLLM's multi-node data-parallel form): each
                # node runs its share of the ranks; the head also serves the API, the others are
                # headless.
                role_args = [
                    "--data-parallel-size-local", str(local),
                    "--data-parallel-address", head,
                    "--data-parallel-rpc-port", str(DP_RPC_PORT),
                ]  # fmt: skip
                if rank:
                    role_args += ["--data-parallel-start-rank", str(rank * local), "--headless"]
                return role_args
            # Pipeline stages across nodes without Ray (vLLM's multiprocessing executor): the
            # same command on each node, by rank, the head's address given to all, the workers
            # headless.
            role_args = [
                "--nnodes",
                str(lay.nodes),
                "--node-rank",
                str(rank),
                "--master-addr",
                head,
            ]
            if rank:
                role_args.append("--headless")
            return role_args

        return serving.processes(
            o, argv, env, ray=backend if ray else None, by_rank=by_rank,
            secrets=given.secrets if given else (),
        )  # fmt: skip

    # -- explaining -----------------------------------------------------------------------------

    def attention(self, shape: Shape, context: int) -> tuple[AttentionCharge, ...]:
        from llmfit.plan.engines.vllm_kv import attention_charges

        return attention_charges(shape, context)

    def explain(self, option: Option[VllmLaunch], model: Model) -> Explanation:
        o, c = option, option.per_card
        launch = o.launch
        m = launch.memory
        assert m is not None
        lay = o.layout
        width = f"tensor parallel {lay.tp} × pipeline {lay.pp}"
        if lay.dp > 1:
            width += f" × data parallel {lay.dp}"
        share = serving.weights_share(
            lay,
            width,
            experts_over=lay.tp * lay.dp if model.is_moe and lay.dp > 1 else 0,
            copy="rank" if lay.dp > 1 else "",
        )
        w = m.weights
        named = [
            (w.experts, "routed experts"), (w.replicated, "kept whole on every rank"),
            (w.embedding, "embedding"), (w.output, "output head"), (w.rope, "rotary cache"),
            (w.mla_decompressed, "MLA's decompressed W_UK/W_UV"),
            (w.mxfp4_padding, "mxfp4 padding"), (w.vision, "vision tower"),
        ]  # fmt: skip
        shown = ", ".join(f"{name} {_size(b)}" for b, name in named if b)
        if w.lora:
            by = ", ".join(f"{name} {_size(b)}" for name, b in w.lora_parts)
            slots = launch.options.lora or (0, 0)
            shown += (", " if shown else "") + (
                f"LoRA slots {_size(w.lora)} ({slots[0]} of rank {slots[1]}: {by})"
            )
        if w.draft:
            shown += (", " if shown else "") + f"speculative draft {_size(w.draft)} a rank"
        weights = f"{o.artifact.bytes / (1 << 30):.1f} GiB of {o.artifact.quant or '?'}: {share}"
        if shown:
            weights += f"; of it: {shown}"
        if w.skipped:
            weights += f"; {_size(w.skipped)} of the checkpoint not loaded (MTP)"
        if w.offloaded:
            weights += (
                f"; less {_size(w.offloaded)} of the layers kept in the host's memory "
                "(--cpu-offload-gb)"
            )
        activations = (
            f"a profile run of {m.max_num_batched_tokens:,} tokens, {m.max_num_seqs:,} sequences"
            + (
                f", of it FlashInfer's MoE scratch {_size(m.moe_scratch)}, freed after each call"
                if m.moe_scratch and m.moe_scratch < m.activation
                else ""
            )
            + (f"; encoder cache {_size(m.encoder_cache)}" if m.encoder_cache else "")
            + (
                f"; encoder profile {_size(m.encoder_peak)} more (the vision encoder run on "
                f"{m.encoder.items} {m.encoder.modality}"
                f"{'s' if m.encoder.items != 1 else ''} of {m.encoder.tokens_per_item:,} tokens)"
                if m.encoder_peak
                else ""
            )
        )
        runtime = ", ".join(
            words
            for words in (
                f"buffers {_size(m.persistent_buffers)}" if m.persistent_buffers else "",
                f"non-torch {_size(m.non_torch)}",
                f"MoE workspace {_size(m.moe_workspace)} (the experts' buffers for "
                f"{m.max_num_batched_tokens * max(lay.dp, 1):,} tokens"
                + (f", every rank's batch of {lay.dp}" if lay.dp > 1 else "")
                + ")"
                if m.moe_workspace
                else "",
                f"stage buffers {_size(m.stage_buffers)} (the activations this stage receives)"
                if m.stage_buffers
                else "",
            )
            if words
        )
        told = (
            Part("weights", c.weights, weights),
            Part("KV cache", c.kv_cache, _kv_words(o, m)),
            Part("activations", c.activations, activations),
            Part("graphs", c.graphs, "CUDA graphs, captured before the KV cache is sized"),
            Part("runtime", c.runtime, runtime),
        )
        parts = tuple(p for p in told if p.bytes or p.name in ("weights", "KV cache"))
        assumes = (
            f"vLLM {m.version} (--vllm-version); --gpu-memory-utilization is a share of the "
            "card's total, so other processes' memory must fit in the rest"
        )
        if m.extensible_kv_cache:
            assumes = (
                f"vLLM {m.version} (--vllm-version); the KV cache is measured after warm-up and "
                "CUDA-graph capture, from the memory then free less a margin of max(1 GiB, 0.75 × "
                f"the transient peak), within {m.gpu_memory_utilization:.2f} of the card's total "
                "(--gpu-memory-utilization), so other processes' memory must fit in the rest"
            )
        if m.kv_pinned:
            assumes = (
                f"vLLM {m.version} (--vllm-version); the KV cache is what {m.kv_pinned} sets on "
                "each card, whatever --gpu-memory-utilization says: vLLM checks it against "
                "nothing, so the card runs out of memory at start where the rest does not fit "
                "beside it"
            )
        if not m.cuda_graphs_in_budget and m.cuda_graphs:
            assumes += (
                f"; its CUDA graphs ({m.cuda_graphs / (1 << 30):.2f} GiB) are captured after the "
                "KV cache, in what --gpu-memory-utilization leaves"
            )
        if launch.options.enforce_eager:
            assumes += "; no CUDA graphs (--enforce-eager)"
        if lay.dp > 1:
            assumes += f"; each of the {lay.dp} data-parallel ranks keeps its own KV cache"
        # KV heads split over the tensor-parallel ranks up to their number, one a rank past it.
        heads = max(1, model.kv_heads // lay.tp) if lay.tp > 1 else None
        return Explanation(parts, assumes, kv_heads=heads, settings=_assumed(o, m))

    def image(self, option: Option[VllmLaunch]) -> Image:
        version = str(option.launch.version)
        return Image(
            name=f"{IMAGE}:{image_tag(version)}",
            entrypoint=("vllm", "serve"),
            port=PORT,
            health="/health",
            programs=("vllm", "ray", "python3"),
            # PyTorch's workers pass tensors through /dev/shm (docs/deployment/docker.md).
            shared_memory=True,
            foreground=(("ray", "--block"),),
            joined=RAY_JOINED,
        )

    # The vLLM release the option was sized for.
    def values(self, option: Option[VllmLaunch]) -> dict[str, object]:
        launch = option.launch
        return {"vllm_version": str(launch.version)}

    # -- reading a command ----------------------------------------------------------------------

    def read_command(
        self,
        argv: Sequence[str],
        defaults: PlanSettings,
        env: Mapping[str, str] = NO_ENV,
        vault: Vault | None = None,
        load: Callable[[str], Any] | None = None,
    ) -> Request:
        from llmfit.plan.engines.vllm_command import read

        return read(argv, defaults, env, vault, load)


ENGINE = Vllm()
