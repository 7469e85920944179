"""SGLang, the engine: the layouts it accepts for a safetensors checkpoint, what each card holds
under them, and the `sglang serve` lines that launch them (SGLang 0.5.23).

Layouts (sglang/srt/server_args.py and arg_groups/, 0.5.23):
- tensor parallel within a node (`--tp-size`), a width that divides the attention heads and
  divides or is a multiple of the KV heads (models/*.py assert both; `width_refusal`);
- pipeline parallel (`--pp-size`) across the nodes of one fabric, one stage a node, or within a
  node; stages take runs of layers by SGLang's get_pp_indices (distributed/utils.py), which gives
  the extra layers of an uneven split to the last stages;
- for a dense model, replicas (`--dp-size`): SGLang's data-parallel controller runs `dp` copies
  of a `--tp-size` group behind one server, each with its own KV pool (one node only:
  check_server_args refuses data-parallel replicas over several nodes);
- for a MoE, data-parallel attention with expert parallelism (`--attn-dp-size`, formerly
  `--dp-size N --enable-dp-attention`): one `--tp-size` group of tp × dp cards whose attention
  runs in dp groups of tp cards, each with its own KV pool, the routed experts sharded over all
  of them (`--ep-size`), within a node or across the nodes of a fabric;
- expert parallelism (`--ep-size`, the whole group) for a MoE on more than one card.
Across nodes, every node runs the same command with its `--node-rank`, `--nnodes` and the head's
`--dist-init-addr` (or, with `--ray`, one command on the head of a Ray cluster, `--use-ray`).

Which models: SGLang is planned when it is named (`--engine sglang`, or `llmfit check -- sglang
serve …`); see `llmfit/plan/engines/__init__.py` for why it is not among the defaults.

The memory arithmetic of one card is sglang_sizes'.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llmfit.plan import speed as speeds
from llmfit.plan.artifact import Artifact
from llmfit.plan.credentials import Vault
from llmfit.plan.engines import (
    NO_ENV,
    Assumed,
    Explanation,
    Image,
    Job,
    Part,
    Request,
    knobs,
    serving,
    serving_speed,
)
from llmfit.plan.engines import sglang_sizes as sizes
from llmfit.plan.engines.serving import Variant, split_refusal
from llmfit.plan.engines.sglang_options import SglangOptions
from llmfit.plan.engines.vllm_weights import (
    Parts,
    elem_bytes,
    layer_mlp_params,
    layer_params,
    parts_of,
)
from llmfit.plan.launch import Command, Given
from llmfit.plan.layout import ACROSS, Layout, LayoutSpace, PairRules
from llmfit.plan.layouts import Sized, Tried
from llmfit.plan.model import AttentionCharge, AttentionKind, Model, ModelShapes, Shape, yarn_json
from llmfit.plan.options import Option, PerCard
from llmfit.plan.pools import ClassPool
from llmfit.plan.settings import PlanSettings
from llmfit.plan.weights import layout_of

# The launcher SGLang's docs and its own deprecation warning name (sglang/launch_server.py:
# "'sglang serve' is the recommended entrypoint"); `python -m sglang.launch_server` takes the
# same flags and is read back too.
LAUNCHER = ("sglang", "serve")
# SGLang listens on 127.0.0.1:30000 by default (ServerArgs host, port); a server on a fleet node
# is asked for from elsewhere, so the command says where.
HOST, PORT = "0.0.0.0", 30000
# The head's port for torch.distributed across nodes (--dist-init-addr HOST:PORT; SGLang's
# multi-node examples use 50000).
DIST_INIT_PORT = 50000
# A --context-length past the model's own is refused unless this is set
# (configs/model_config.py ModelConfig._derive_context_length).
LONG_CONTEXT_ENV = ("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN", "1")
# SGLang's official image, tagged by the release the plan models (lmsysorg/sglang:vX.Y.Z, beside
# its -cuXXX variants). It has no ENTRYPOINT: its docs give `docker run … lmsysorg/sglang
# python3 -m sglang.launch_server …`, the whole command. Ray is not in it (an extra of the
# package), so the --ray form has no container launch.
IMAGE = f"lmsysorg/sglang:v{sizes.VERSION}"
# Online quantisation and KV dtype, as SGLang's parser spells them.
FP8_WEIGHTS = ("--quantization", "fp8")
FP8_KV = ("--kv-cache-dtype", "fp8_e4m3")


@dataclass(frozen=True)
class SglangLaunch:
    """What an `sglang serve` line of an option is made of, beside its layout, and the figures
    the plan took from SGLang's sizing (for saying how it was worked out)."""

    context_length: int
    mem_fraction_static: float
    # Whether that share is SGLang's own default on this card and layout (else the user's).
    default_share: bool
    # SGLang's own parallel sizes (--tp-size is tp × dp for data-parallel attention).
    server: sizes.ServerSizes
    # --kv-cache-dtype as SGLang spells it; None leaves it at auto.
    kv_cache_dtype: str | None
    trust_remote_code: bool
    long_context: bool
    # SGLang's defaults on this card (activation and CUDA graph room outside the static share).
    chunked_prefill_size: int
    decode_max_bs: int
    reserved: int
    # The fullest rank's pool as SGLang would log it.
    pool_tokens: int
    max_running_requests: int
    request_table: int
    state_slots: int
    # The knobs the user set (sglang_options.py), passed on as given.
    options: SglangOptions = SglangOptions()
    # A command being checked, which the launch runs as given (llmfit check).
    given: Given | None = None
    # YaRN past the trained context, as --json-model-override-args JSON (model.yarn_overrides).
    rope_overrides: str | None = None
    # SGLang's aiter backend (ROCm, past 8,192 tokens) takes 0.85 of the share passed.
    aiter: bool = False
    # Where --kv-cache-dtype came from (engines.Assumed's source).
    kv_source: str = "default"


def variants(art: Artifact, model: Model, kv_dtype: str, settings: PlanSettings) -> list[Variant]:
    """The checkpoint as stored and, for a 16-bit one, what SGLang's `--quantization fp8`
    (Fp8LinearMethod, layers/quantization/fp8.py) and `--kv-cache-dtype fp8_e4m3` would make of
    it (serving.variants)."""
    return serving.variants(art, model, kv_dtype, settings, fp8_weights=FP8_WEIGHTS, fp8_kv=FP8_KV)


def engine_kv_dtype(model: Model, settings: PlanSettings) -> str | None:
    """The --kv-cache-dtype the plan relied on, in SGLang's spelling (fp8_e4m3, bfloat16: not
    vLLM's, hence not vllm.engine_kv_dtype); None where auto gives the model's own dtype."""
    chosen = settings.kv_cache_dtype if settings.kv_cache_dtype != "auto" else model.kv_cache_dtype
    if not chosen:
        return None
    if chosen in ("fp8_e5m2", "float8_e5m2"):
        return "fp8_e5m2"  # asked by name: SGLang takes it (server_args.py, --kv-cache-dtype)
    if chosen.startswith(("fp8", "float8")):
        return "fp8_e4m3"
    return "bfloat16" if chosen in ("bfloat16", "bf16") else chosen


def width_refusal(shape: Shape, tp: int, expert_parallel: bool = False) -> str | None:
    """Why SGLang refuses this attention tensor-parallel width, or None when it accepts it.

    The heads: SGLang's attention layers assert `total_num_heads % attn_tp_size == 0` and, for the
    KV heads, divisibility one way or the other (models/llama.py LlamaAttention, models/qwen3.py
    Qwen3Attention, with no message of their own). Quantisation blocks: a rank's share of a
    split intermediate size must be a whole number of blocks (layers/quantization/fp8.py and
    fp8_utils.validate_fp8_block_shape, whose sentences serving.split_refusal gives), except for
    routed experts kept whole by expert parallelism.
    """
    # The same head checks as vLLM's (vllm.width_refusal), kept apart for their words:
    # vLLM's are its own sentences, SGLang asserts with none, so these say it in llmfit's.
    if shape.attention_heads and shape.attention_heads % tp:
        return (
            f"SGLang's attention asserts its {shape.attention_heads} heads divide evenly over "
            f"a tensor-parallel size of {tp}."
        )
    kv = shape.kv_heads
    if kv and kv % tp and tp % kv:
        return (
            f"SGLang's attention asserts its {kv} KV heads divide evenly over {tp} cards, or "
            f"{tp} cards over them."
        )
    return split_refusal(shape, tp, expert_parallel)


def pp_partition(layers: int, pp: int) -> tuple[int, ...]:
    """Layers per pipeline stage as SGLang splits them (get_pp_indices in
    sglang/srt/distributed/utils.py): evenly, the remainder one each to the last stages. Not
    vLLM's split (weights.pp_partition), which gives it to the stages before the last."""
    base, extra = divmod(layers, pp)
    return tuple(base + (1 if s >= pp - extra else 0) for s in range(pp))


def rank_weights(
    model: Model,
    p: Parts,
    start: int,
    end: int,
    first: bool,
    last: bool,
    ss: sizes.ServerSizes,
    *,
    dp_lm_head: bool = False,
    pp: int = 1,
) -> int:
    """What one rank of layers [start, end) loads, as SGLang places it (models/deepseek_v2.py,
    qwen3_moe.py, llama.py; the checkpoint's bytes by part as vllm_weights.parts_of reads them):

    - attention over the attention's TP width (`attn_tp`, the tp of one data-parallel-attention
      group);
    - the dense MLP layers and a MoE's shared experts over the whole --tp-size group
      (DeepseekV2MLP's parallel_group "tp"), routed experts over it too (--ep-size or TP);
    - what stays whole on every rank: norms, the router gate, MLA's fused q/kv-a projection;
    - the embedding over the attention's group (the whole group for llama.py and mixtral.py),
      the output head over the whole group unless --enable-dp-lm-head (then over the
      attention's group); a tied head is the embedding
      on one stage, its own copy on a last stage that is not the first;
    - at load, MLA's w_kc and w_vc (kv_b_proj split and kept in bf16: kv_lora_rank × heads a
      rank × (qk_nope + v_head) × 2 B a layer) and the fp32 rotary cos/sin cache (max
      positions × rotary dims × 4 B, one a distinct rotary);
    - never an MTP module (built only for speculative decoding), nor a tied head the checkpoint
      stores beside the embedding.
    """
    s = model.shapes or ModelShapes()
    h, vocab = model.hidden_size or 0, model.vocab_size or 0
    elem = elem_bytes(model)
    attn = mlp = experts = replicated = 0
    for i in range(start, min(end, len(p.layer_bytes))):
        params, expert, rep_lin, sixteen = layer_params(model, i)
        split = p.layer_bytes[i] - p.expert_bytes[i] - p.replicated_bytes[i]
        lin = params - expert - rep_lin - sixteen
        mlp_b = int(split * layer_mlp_params(model, i) / lin) if lin > 0 else 0
        attn += split - mlp_b
        mlp += mlp_b
        experts += p.expert_bytes[i]
        replicated += p.replicated_bytes[i]
    w = -(-attn // ss.attn_tp) + -(-mlp // ss.tp_size) + -(-experts // ss.tp_size) + replicated
    if first:
        # Under data-parallel attention most models build the embedding over the attention's
        # group, not the whole --tp-size one (VocabParallelEmbedding(use_attn_tp_group=
        # is_dp_attention_enabled()) in qwen2.py, qwen2_moe.py, glm4_moe.py, gpt_oss.py, ...;
        # deepseek_v2.py through vocab_parallel_embedding.py get_embedding_tp_kwargs): each rank
        # of DeepSeek-V3's attention DP 8 holds the whole table. llama.py and mixtral.py split
        # it over the whole group.
        embed_tp = ss.tp_size if model.architecture in WHOLE_TP_EMBEDDING else ss.attn_tp
        w += -(-p.embed_bytes // embed_tp) + p.extra_bytes + -(-p.vision_bytes // ss.tp_size)
    if last:
        norm = h * elem
        head = vocab * h * elem if s.tied_embeddings and pp > 1 else max(0, p.output_bytes - norm)
        w += norm + -(-head // (ss.attn_tp if dp_lm_head else ss.tp_size))
    kinds = s.layer_kinds[start:end] if s.layer_kinds else ()
    if s.kv_lora_rank:
        n = sum(1 for k in kinds if k == "mla")
        w += (
            n
            * s.kv_lora_rank
            * (model.attention_heads // ss.attn_tp)
            * 2
            * (s.qk_nope_head_dim + s.v_head_dim)
        )
    if s.rotary_dim and model.max_context and any(k in ROTARY_KINDS for k in kinds):
        w += s.rope_caches * model.max_context * s.rotary_dim * 4
    return w


# Architectures whose SGLang model splits the embedding over the whole --tp-size group even
# under data-parallel attention (VocabParallelEmbedding without use_attn_tp_group: models/llama.py,
# whose Mistral extends it, and models/mixtral.py in 0.5.23).
WHOLE_TP_EMBEDDING = frozenset({"LlamaForCausalLM", "MistralForCausalLM", "MixtralForCausalLM"})

# The layers whose attention rotates positions (SGLang builds each rotary cache once).
ROTARY_KINDS = ("full", "sliding", "chunked", "mla")


@dataclass(frozen=True)
class _Sizing:
    """What the sizing of one layout kept for the launch line and the explanation."""

    share: float
    default_share: bool
    reserve: sizes.Reserve
    server: sizes.ServerSizes
    pool: sizes.Pool
    # Whether SGLang's aiter backend (ROCm, past 8,192 tokens) takes 0.85 of the share.
    aiter: bool = False


def _assumed(o: Option[SglangLaunch]) -> tuple[Assumed, ...]:
    """The settings the card's figures rest on, with where each came from."""
    launch, opts = o.launch, o.launch.options
    kv, kv_from = launch.kv_cache_dtype or "auto", launch.kv_source
    if (what_if := serving.flag_value(o.engine_flags, "--kv-cache-dtype")) is not None:
        kv, kv_from = what_if, "what-if"
    out = [
        Assumed(
            "--context-length",
            str(launch.context_length),
            "given" if launch.given is not None else "plan",
        ),
        Assumed(
            "--mem-fraction-static",
            f"{launch.mem_fraction_static:.3f}",
            "default" if launch.default_share else "given",
        ),
        Assumed("--kv-cache-dtype", kv, kv_from),
        Assumed(
            "--chunked-prefill-size",
            str(launch.chunked_prefill_size),
            serving.source(opts.chunked_prefill_size),
        ),
        Assumed("--cuda-graph-max-bs", str(launch.decode_max_bs), "default"),
        Assumed(
            "--max-running-requests",
            str(launch.max_running_requests),
            serving.source(opts.max_running_requests),
        ),
    ]
    if (quant := serving.flag_value(o.engine_flags, "--quantization")) is not None:
        out.append(Assumed("--quantization", quant, "what-if"))
    return tuple(out)


def _effective(launch: SglangLaunch) -> float:
    """The static share SGLang applies: --mem-fraction-static, of which its aiter backend (ROCm,
    past 8,192 tokens) takes 0.85."""
    share = launch.mem_fraction_static
    return share * sizes.AITER_SHARE_FACTOR if launch.aiter else share


class Sglang(serving.Serving[SglangLaunch]):
    key = "sglang"
    name = "SGLang"
    # `sglang serve …`, and `python -m sglang.launch_server …` (for_argv reads the module name).
    programs = ("sglang", "sglang.launch_server")
    # --tp-size, --pp-size, --dp-size (a dense model's copies) or --attn-dp-size (a MoE's
    # attention groups), --ep-size; across nodes by --nnodes and --node-rank, its stages or a MoE's
    # attention groups (check_server_args refuses a dense model's copies over several nodes).
    long_context_env = (LONG_CONTEXT_ENV,)
    layouts = LayoutSpace(
        tensor=True, pipeline=True, data=True, experts=True, replicas=True,
        across_nodes=frozenset(ACROSS),
        # SGLang 0.5.23's --disaggregation-mode prefill|decode: the decode side reads the
        # prefill's parallel sizes from its bootstrap server and maps ranks whatever the two
        # attention TP sizes (each a multiple of the other), MLA from one prefill rank
        # (disaggregation/common/conn.py `_resolve_rank_mapping`), state-space state resliced
        # (mooncake/conn.py `_send_mamba_state_slice`); decode pipeline stages 1 or the
        # prefill's; the same page size and --kv-cache-dtype (conn.py `try_ensure_parallel_info`).
        # Its decode side admits a transferred request only where its pool, less
        # --num-reserved-decode-tokens (512) a request it holds, holds the prompt and 512 more
        # (disaggregation/decode.py `_allocatable_token_budgets`, `_prealloc_required_tokens`).
        pairs=PairRules(
            transport="mooncake, nixl", unequal_tp=True, decode_pp_matches=True,
            decode_reserve=512,
            source="sglang/srt/disaggregation (SGLang 0.5.23)",
            launch="llmfit.plan.engines.sglang_disagg:roles",
            role="llmfit.plan.engines.sglang_disagg:role_refusal",
        ),
    )  # fmt: skip

    # -- planning -------------------------------------------------------------------------------

    def _variants(self, job: Job) -> list[Variant]:
        return variants(job.artifact, job.model, job.shape.kv_dtype, job.settings)

    def _width_refusal(self, shape: Shape, tp: int, expert_parallel: bool) -> str | None:
        return width_refusal(shape, tp, expert_parallel=expert_parallel)

    def _sizer(
        self, job: Job, art: Artifact, shape: Shape, pool: ClassPool, v: Variant
    ) -> Callable[[Layout], Sized]:
        model, settings, context = job.model, job.settings, job.context
        opts = settings.options(SglangOptions)
        weights = layout_of(art, model)
        stored = job.artifact
        exact = stored.layout if stored.layout is not None else (
            stored.weights if stored.weights_exact else None
        )  # fmt: skip
        parts = parts_of(model, art.bytes, exact if art.bytes == stored.bytes else None)
        trained = model.max_context
        swa_pool = sizes.hybrid_swa(model.architecture)
        mla = any(g.kind is AttentionKind.MLA for g in shape.layer_groups)
        # The multimodal cache SGLang keeps back from the KV budget (mm_runtime_reservation_gb).
        vlm = sizes.VLM_CACHE if sizes.multimodal(model.architecture, model.vision_tower) else 0
        spec = pool.spec
        backend = spec.backend if spec is not None else "cuda"
        mamba = model.shapes.mamba if model.shapes else None
        # The methods SGLang computes in fp8 (vLLM's list has ptpc_fp8 in place of w8a8_fp8).
        fp8 = (art.quant or "").lower().startswith("fp8") or model.quantization in (
            "fp8", "modelopt", "fbgemm_fp8", "w8a8_fp8",
        )  # fmt: skip

        def size(layout: Layout) -> Sized:
            ss = sizes.server_sizes(layout, model.is_moe)
            reserve = sizes.default_reserve(
                sizes.smi_bytes(pool.gpu_class, pool.card_bytes),
                ss,
                mla=mla,
                chunked_prefill_size=opts.chunked_prefill_size,
                max_running_requests=opts.max_running_requests,
                vision_tower=model.vision_tower,
                architecture=model.architecture,
                backend=backend,
                graphs=not opts.disable_cuda_graph,
                decode_max_bs=opts.cuda_graph_max_bs_decode,
            )
            # The command passes the share to three places (SGLang's own default is that, but for
            # a vision tower's factor): the plan holds what the command asks, rounded down.
            share = opts.mem_fraction_static or sizes.three_places(reserve.mem_fraction_static)
            # On ROCm past 8,192 tokens the aiter backend takes 0.85 of it, even of a given one.
            aiter = sizes.aiter_scaled(backend, mla, model.kv_heads // ss.tp_size, context)
            effective = share * sizes.AITER_SHARE_FACTOR if aiter else share
            pre = sizes.pre_baseline(pool.gpu_class, ss.tp_size)
            static = sizes.static_budget(pool.card_bytes, effective, pre)
            # SGLang may use the whole card: its static share is a split within it, the rest
            # kept back for activations, CUDA graphs and the request table (the card's
            # `reserve`), after what the process held before SGLang measured it (`runtime`).
            # What is left free is what the static share leaves of the weights and one
            # sequence, as SGLang's own check reckons it.
            have = pool.card_bytes
            kept = pool.card_bytes - pre - static
            worst: PerCard | None = None
            worst_token = 0
            fullest: sizes.Pool | None = None
            tokens = reqs = 1 << 62
            start = offloaded = 0
            partition = pp_partition(model.layers or weights.layers, layout.pp)
            for s_i, n in enumerate(partition):
                w = rank_weights(
                    model, parts, start, start + n, s_i == 0, s_i == layout.pp - 1, ss,
                    dp_lm_head=opts.enable_dp_lm_head, pp=layout.pp,
                )  # fmt: skip
                if opts.cpu_offload_gb:
                    # The decoder layers' parameters move to the host one after another up to
                    # the limit (OffloaderV1.maybe_offload_to_cpu); the embedding and the head
                    # stay. Counted to the limit, within one tensor.
                    layers_only = rank_weights(
                        model, parts, start, start + n, False, False, ss,
                        dp_lm_head=opts.enable_dp_lm_head, pp=layout.pp,
                    )  # fmt: skip
                    moved = min(int(opts.cpu_offload_gb * (1 << 30)), layers_only)
                    offloaded = max(offloaded, moved)
                    w -= moved
                start += n
                stage = shape.stage(n)
                c = sizes.cells(stage, ss.attn_tp, swa_pool=swa_pool)
                states = sizes.state_bytes(stage, ss.attn_tp, mamba)
                budget = static - w - vlm
                p = sizes.kv_pool(
                    max(budget, 0),
                    c,
                    state_per_request=states,
                    context_len=context,
                    attn_dp=ss.attn_dp_size,
                    max_running_requests=opts.max_running_requests,
                    max_total_tokens=opts.max_total_tokens,
                )
                kv = sizes.sequence_bytes(c, 0, context)
                card = PerCard(
                    weights=w,
                    kv_cache=kv,
                    states=sizes.sequence_bytes(c, states, context) - kv,
                    # The multimodal cache SGLang keeps back from the pool for encoder outputs.
                    activations=vlm,
                    runtime=pre,
                    reserve=kept,
                )
                if worst is None or card.need > worst.need:
                    worst, worst_token = card, math.ceil(c.token())
                # Every stage keeps as many tokens as the one with the fewest (SGLang takes the
                # minimum over the pipeline's ranks, _apply_token_constraints).
                if budget <= 0 or p.tokens < tokens:
                    tokens = p.tokens if budget > 0 else 0
                    fullest = p
                reqs = min(reqs, p.max_running_requests)
            assert worst is not None and fullest is not None
            per_rank = min(tokens / context, reqs) if tokens and context else 0.0
            held = round(per_rank * ss.ranks, 2)
            longest = min(tokens, trained) if trained else tokens
            # The step model with SGLang's knobs: prefill batches of --chunked-prefill-size
            # that pause decoding (no --enable-mixed-chunk), CUDA graphs up to
            # --cuda-graph-max-bs.
            inputs = serving.speed_inputs(
                serving_speed.SGLANG, model, weights, spec, layout, context, worst_token,
                held, fp8, pp_partition, graph_batch=reserve.decode_max_bs,
                eager=opts.disable_cuda_graph,
                # The overlap scheduler, unless turned off or pipeline-parallel (server_args.py
                # _handle_pipeline_parallelism turns it off there).
                overlap=not opts.disable_overlap_schedule and layout.pp == 1,
                curves_backend="sglang",
            )  # fmt: skip
            if inputs is not None and offloaded:
                inputs = serving.offloaded_inputs(inputs, offloaded)
            speed = speeds.estimate(inputs) if inputs else None
            replica = serving.replica(
                inputs, layout, model, pool_tokens=tokens, max_batch=reqs,
                budget=reserve.chunked_prefill_size, mixed=False,
            )  # fmt: skip
            return Sized(
                per_card=worst,
                have=have,
                held=held,
                max_context=longest,
                kv_per_token=worst_token,
                kv_tokens=tokens,
                extra=_Sizing(share, opts.mem_fraction_static is None, reserve, ss, fullest, aiter),
                speed=speed,
                replica=replica,
            )

        return size

    def _option(self, job: Job, art: Artifact, pool: ClassPool, t: Tried) -> Option[SglangLaunch]:
        model, settings = job.model, job.settings
        extra = t.sized.extra
        assert isinstance(extra, _Sizing)
        launch = SglangLaunch(
            context_length=job.context,
            mem_fraction_static=extra.share,
            default_share=extra.default_share,
            server=extra.server,
            kv_cache_dtype=engine_kv_dtype(model, settings),
            trust_remote_code=model.custom_code,
            long_context=bool(model.max_context and job.context > model.max_context)
            and yarn_json(model, job.context) is None,
            rope_overrides=yarn_json(model, job.context),
            chunked_prefill_size=extra.reserve.chunked_prefill_size,
            decode_max_bs=extra.reserve.decode_max_bs,
            reserved=int(extra.reserve.reserved_mib * sizes.MIB),
            pool_tokens=extra.pool.tokens,
            max_running_requests=extra.pool.max_running_requests,
            request_table=extra.pool.request_table,
            state_slots=extra.pool.state_slots,
            options=settings.options(SglangOptions),
            given=settings.given,
            aiter=extra.aiter,
            kv_source=serving.kv_source(model, settings),
        )
        # The whole card: --mem-fraction-static (and, on ROCm past 8,192 tokens, the 0.85 of it
        # the aiter backend applies) splits it between the static share and the reserve.
        return serving.option_of(job, self.key, art, pool, t, launch, share=1.0)

    # -- launching ------------------------------------------------------------------------------

    def commands(
        self, option: Option[SglangLaunch], repo_id: str, revision: str | None, *, ray: bool = False
    ) -> list[Command]:
        o = option
        launch = o.launch
        lay, ss = o.layout, launch.server
        # The serve line itself stays SGLang's own: vLLM's is built alike, but of other flags,
        # from the layout rather than SGLang's server sizes.
        argv = [*LAUNCHER, "--model-path", repo_id]
        if revision:
            argv += ["--revision", revision]
        argv += ["--tp-size", str(ss.tp_size)]
        if ss.pp_size > 1:
            argv += ["--pp-size", str(ss.pp_size)]
        if ss.dp_size > 1:
            argv += ["--dp-size", str(ss.dp_size)]
        if ss.attn_dp_size > 1:
            argv += ["--attn-dp-size", str(ss.attn_dp_size)]
        if ss.ep_size > 1:
            argv += ["--ep-size", str(ss.ep_size)]
        argv += o.engine_flags
        # Every value the plan relied on is passed, so that SGLang's defaults (which changed
        # from a table by TP size to a reserve by card size in 0.4.9) cannot change the plan.
        argv += [
            "--context-length",
            str(launch.context_length),
            "--mem-fraction-static",
            f"{launch.mem_fraction_static:.3f}",
        ]
        if launch.kv_cache_dtype and "--kv-cache-dtype" not in o.engine_flags:
            argv += ["--kv-cache-dtype", launch.kv_cache_dtype]
        if launch.rope_overrides:
            # YaRN past the trained context: merged into the loaded config's rope_scaling
            # (utils/hf_transformers/config.py get_config, model_override_args).
            argv += ["--json-model-override-args", launch.rope_overrides]
        argv += knobs.argv(launch.options)
        if launch.trust_remote_code:
            argv.append("--trust-remote-code")
        argv += ["--host", HOST, "--port", str(PORT)]
        env: tuple[tuple[str, str], ...] = self.long_context_env if launch.long_context else ()
        given = launch.given
        if given is not None:
            # A checked command is launched as the user wrote it; only its placement on the nodes
            # is added.
            argv, env = list(given.argv), given.env
        # With --ray, one server on the head of a Ray cluster that places its ranks on the
        # cluster's nodes (sglang/srt/ray/engine.py RayEngine). Else the same command on every
        # node, by rank; the head's address for torch.distributed given to all. Node 0 serves the
        # API; the others run their ranks only.
        use_ray = ("--nnodes", str(lay.nodes), "--use-ray")

        def by_rank(rank: int, head: str) -> list[str]:
            return [
                "--nnodes", str(lay.nodes),
                "--node-rank", str(rank),
                "--dist-init-addr", f"{head}:{DIST_INIT_PORT}",
            ]  # fmt: skip

        return serving.processes(
            o, argv, env, ray=use_ray if ray else None, by_rank=by_rank,
            secrets=given.secrets if given else (),
        )  # fmt: skip

    # -- explaining -----------------------------------------------------------------------------

    def attention(self, shape: Shape, context: int) -> tuple[AttentionCharge, ...]:
        # SGLang's windows and states are sized in its own pools (sglang_sizes); the summary of
        # the model's kinds of layer is vLLM's, whose terms both engines share.
        from llmfit.plan.engines.vllm_kv import attention_charges

        return attention_charges(shape, context)

    def explain(self, option: Option[SglangLaunch], model: Model) -> Explanation:
        o, c = option, option.per_card
        launch = o.launch
        lay, ss = o.layout, launch.server
        width = f"tensor parallel {lay.tp} × pipeline {lay.pp}"
        if ss.attn_dp_size > 1:
            width += f" × attention data parallel {ss.attn_dp_size}"
        elif ss.dp_size > 1:
            width += f" × {ss.dp_size} replicas"
        share = serving.weights_share(
            lay,
            width,
            experts_over=ss.tp_size if model.is_moe and ss.attn_dp_size > 1 else 0,
            copy="replica" if ss.dp_size > 1 else "",
        )
        if ss.attn_dp_size > 1:
            head = "" if launch.options.enable_dp_lm_head else ", the output head"
            whole_tp = model.architecture in WHOLE_TP_EMBEDDING
            embed, within = (", the embedding", "") if whole_tp else ("", " and the embedding")
            share += (
                f"; the dense MLPs, shared experts{embed}{head} over all {ss.tp_size} "
                f"ranks, attention{within} within its group"
            )
        if launch.options.cpu_offload_gb:
            share += (
                f"; less up to {launch.options.cpu_offload_gb:g} GiB of its layers kept in the "
                "host's memory (--cpu-offload-gb)"
            )
        gpu_class = o.card.gpu_class if o.card is not None else ""
        per_token = f"{o.kv_per_token:,} B a token a card"
        whose = "SGLang's default here" if launch.default_share else "as given"
        pre = sizes.pre_baseline(gpu_class, ss.tp_size)
        named = [
            Part(
                "weights",
                c.weights,
                f"{o.artifact.bytes / (1 << 30):.1f} GiB of {o.artifact.quant or '?'}: {share}",
            ),
            Part("KV cache", c.kv_cache, f"{o.context:,} tokens × {per_token}"),
            Part(
                "states",
                c.states,
                f"{sizes.MAMBA_FULL_MEMORY_RATIO:g}× the KV cache beside it for recurrent "
                f"states ({launch.state_slots:,} slots a rank)",
            ),
            Part("activations", c.activations, "the multimodal cache SGLang keeps back"),
            Part(
                "runtime",
                c.runtime,
                f"what CUDA and NCCL hold before SGLang measures the card "
                f"({round(pre / (1 << 30), 2):g} GiB, by its start-up logs)",
            ),
            Part(
                "reserve",
                c.reserve,
                f"what the static share ({launch.mem_fraction_static:.3f}, {whose}) of the rest "
                "leaves, for activations, CUDA graphs and the request table",
            ),
        ]
        parts = tuple(p for p in named if p.bytes or p.name in ("weights", "KV cache"))
        # SGLang's own reserve is reckoned of the card's total ((total − reserved) / total): the
        # share given is checked against it on the same footing.
        outside = o.total - int(o.total * _effective(launch))
        assumes = (
            f"SGLang {sizes.VERSION}: --mem-fraction-static {launch.mem_fraction_static:.3f} of "
            "the free memory it measures holds the weights and the KV pool "
            f"({launch.pool_tokens:,} tokens a rank, {launch.max_running_requests:,} requests "
            "at once); the "
            f"{c.reserve / (1 << 30):.1f} GiB outside it is for activations of "
            f"{launch.chunked_prefill_size:,} chunked-prefill tokens, CUDA graphs up to batch "
            f"{launch.decode_max_bs} and the request table "
            f"({launch.request_table / (1 << 30):.2f} GiB), "
            + (
                f"as SGLang's own reserve reckons them ({launch.reserved / (1 << 30):.1f} GiB)"
                # SGLang's default share is its reserve, to three places.
                if launch.default_share or outside >= launch.reserved
                else f"less than SGLang's own reserve reckons them "
                f"({launch.reserved / (1 << 30):.1f} GiB): activations or CUDA graphs may not fit"
            )
            + f"; pages of {sizes.PAGE_SIZE} token"
        )
        if ss.ranks > 1:
            assumes += f"; each of the {ss.ranks} data-parallel ranks keeps its own KV pool"
        if launch.aiter:
            assumes += (
                f"; on ROCm past {sizes.AITER_CONTEXT:,} tokens SGLang's aiter attention takes "
                f"{sizes.AITER_SHARE_FACTOR:g} of --mem-fraction-static "
                f"({launch.mem_fraction_static * sizes.AITER_SHARE_FACTOR:.3f} in effect)"
            )
        # KV heads split over the tensor-parallel ranks up to their number, one a rank past it.
        heads = max(1, model.kv_heads // lay.tp) if lay.tp > 1 else None
        return Explanation(parts, assumes, kv_heads=heads, settings=_assumed(o))

    def image(self, option: Option[SglangLaunch]) -> Image:
        return Image(
            name=IMAGE,
            entrypoint=(),
            port=PORT,
            # SGLang's HTTP server answers /health once the model is loaded (entrypoints/
            # http_server.py).
            health="/health",
            programs=("sglang", "python3"),
            # PyTorch's workers pass tensors through /dev/shm (SGLang's docs run its image with
            # --ipc=host or --shm-size 32g).
            shared_memory=True,
        )

    def values(self, option: Option[SglangLaunch]) -> dict[str, object]:
        return {}

    # -- reading a command ----------------------------------------------------------------------

    def read_command(
        self,
        argv: Sequence[str],
        defaults: PlanSettings,
        env: Mapping[str, str] = NO_ENV,
        vault: Vault | None = None,
        load: Callable[[str], Any] | None = None,
    ) -> Request:
        from llmfit.plan.engines.sglang_command import read

        return read(argv, defaults, env, vault, load)


ENGINE = Sglang()
