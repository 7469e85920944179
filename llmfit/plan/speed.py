"""How fast an option runs: decode tokens a second for one sequence and for all at once, prefill
tokens a second and the time to the first token, and what bounds each.

A decode step reads, on every card of a replica, the weights the card holds (of a MoE's routed
experts, only the share the batch routes to: 1 − (1 − k/E)^b of them for b tokens choosing k of E
experts), plus each sequence's KV cache, against the card's memory bandwidth; it multiplies two
FLOPs a parameter a token (and four per query element a context token in attention) against the
card's tensor rate; a tensor-parallel layer all-reduces its activations twice over the link
between the cards; a pipeline hands activations from stage to stage over the link, or the fabric
between nodes. Layers llama.cpp keeps in host RAM are read at the host's RAM bandwidth. Prefill
is the same sums for the whole prompt, mostly compute-bound. The step time of each stage is
max(memory, compute) + a per-layer cost + its collectives; stages run one after another for one
sequence.

The efficiencies and per-layer costs are FITTED (see `FITTED` below and benchmarks/
accuracy_speed.py), not guessed: to ../shared/calibration/speed.jsonl, a copy of which is in
fixtures/calibration/speed.jsonl. Everything here is arithmetic on the numbers it is given: the
engines (plan/engines/*) fill `SpeedInputs`, directly or through `inputs_for`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from llmfit.plan.artifact import WeightLayout
from llmfit.plan.cards import DEFAULT_FABRIC_BANDWIDTH, CardSpec
from llmfit.plan.model import AttentionKind, Model

# A host whose RAM bandwidth the fleet does not state is taken as a desktop's two channels of
# DDR5-6400 (102.4 GB/s): the low end of what a GPU host has, so that layers kept on the host are
# never planned faster than they run. A fleet entry's ram_bandwidth_gbs replaces it.
DEFAULT_RAM_BANDWIDTH = 102.4e9


@dataclass(frozen=True)
class Stage:
    """One pipeline stage of a replica as ONE of its tensor-parallel cards sees it.

    llama.cpp's layer split over k cards is k stages of one card each.
    """

    layers: int
    # Weights this card reads every decode step, whatever the batch: all but the routed experts
    # (attention, norms, dense and shared-expert FFNs), and the output head on the last stage.
    dense_bytes: float
    # Routed-expert weights this card holds; a step reads the share its batch routes to.
    expert_bytes: float = 0.0
    # What one token of context costs this card's KV cache (0 for windows and states).
    kv_bytes_per_token: float = 0.0
    # Parameters this card multiplies for one token (a MoE's active ones): 2 FLOPs each.
    params: float = 0.0
    # Σ over this card's context-growing attention layers of query heads × head dim: attention
    # costs 4 FLOPs per element per context token in decode, 2 per element per prompt token² in
    # prefill (causal).
    attention_width: float = 0.0


@dataclass(frozen=True)
class HostPart:
    """What llama.cpp keeps in host RAM: the first layers (`-ngl` below the layer count) and/or
    the routed experts of the first layers (`--n-cpu-moe`)."""

    layers: int  # layers the host runs whole (attention too)
    dense_bytes: float  # host weights read every step
    expert_bytes: float = 0.0  # routed experts kept on the host
    kv_bytes_per_token: float = 0.0  # the host's layers' KV
    params: float = 0.0  # active parameters multiplied on the host per token
    # Times a token's activations cross between host and card in one step: 1 for leading layers on
    # the host, 2 for each layer whose experts stay on the host.
    crossings: int = 1
    ram_bandwidth: float = DEFAULT_RAM_BANDWIDTH


@dataclass(frozen=True)
class SpeedInputs:
    """Every number the speed model needs, for one option. Bytes, FLOP/s and bytes/s."""

    engine: str  # "vllm", "sglang" or "llama.cpp": whose fitted constants apply
    stages: tuple[Stage, ...]  # one replica's pipeline, first stage first; () for a CPU-only plan
    memory_bandwidth: float  # one card's (CardSpec.memory_bandwidth)
    flops: float | None  # one card's dense tensor rate at `compute_dtype`; None: unknown
    compute_dtype: str = "bf16"  # what `flops` is the rate of, for saying so
    backend: str = "cuda"  # "cuda", "rocm" or "metal" (CardSpec.backend)
    tp: int = 1  # tensor-parallel cards in each stage
    replicas: int = 1  # independent copies serving at once (data parallel, or several servers)
    nodes: int = 1  # nodes one replica spans; the pipeline crosses the fabric nodes − 1 times
    link: str = "none"  # between the cards of a node: CardSpec.link_family
    link_bandwidth: float = 0.0  # one way, bytes/s
    fabric_bandwidth: float = DEFAULT_FABRIC_BANDWIDTH  # one way, bytes/s, between nodes
    pcie_bandwidth: float = 32e9  # card ↔ host, one way, bytes/s
    host: HostPart | None = None
    experts: int = 0  # routed experts per MoE layer (0: dense)
    experts_active: int = 0  # experts each token is routed to
    hidden_size: int = 0  # what an all-reduce or a hand-off carries a token (× activation_bytes)
    activation_bytes: int = 2
    context: int = 4096  # tokens in each sequence's cache as it decodes
    concurrency: int = 1  # sequences decoding at once, over all replicas
    prompt_tokens: int = 0  # the prompt prefilled for TTFT; 0: `context`
    flash_attention: bool = True
    prefill_chunk: int = 0  # tokens a prefill step carries; 0: the engine's default
    # Block-quantized weights the kernels dequantize (GGUF's k-quants, Q4_0, …): llama.cpp
    # prefills them at its own fitted efficiency.
    quantized: bool = False


@dataclass(frozen=True)
class Constants:
    """What an engine is fitted to: the share of a card's peaks it reaches, and fixed costs."""

    weight_efficiency: float  # share of memory bandwidth weights stream at in decode
    kv_efficiency: float  # share KV is read at without flash attention (with it: weights')
    layer_s: float  # a layer's fixed cost in one step (kernel launches, small-GEMM slack)
    step_s: float  # a step's fixed cost
    sequence_s: float  # a step's cost for each sequence in its batch (scheduling, sampling)
    hop_s: float  # a pipeline hand-off's fixed cost, beyond its bytes over the link
    prefill_efficiency: float  # share of the dense tensor rate prefill reaches (float weights)
    quant_prefill_efficiency: float  # … with block-quantized weights (GGUF k-quants, Q4_0, …)
    ttft_s: float  # fixed cost before the first token (tokenising, scheduling, the HTTP hop)
    prefill_chunk: int  # tokens a prefill step carries by default
    # Whether pipeline stages decode different micro-batches at once (vLLM's and SGLang's
    # virtual engines); llama.cpp runs one batch through its stages in turn.
    decode_pipelined: bool
    # Per backend (("metal", x): Apple GPUs), what multiplies the bandwidth efficiencies, and
    # the prefill efficiencies. A backend not named is 1.
    backend_bandwidth: tuple[tuple[str, float], ...] = ()
    backend_compute: tuple[tuple[str, float], ...] = ()


# One all-reduce's fixed latency, seconds. NVLink: the custom all-reduce vLLM and SGLang run there,
# 3.7, 4.8 and 5.9 µs at 2, 4 and 8 H100s for 512 bytes (sgl-project/sglang#2904, its table of
# vLLM's kernel); wider groups are charged the 8-card figure. Infinity Fabric is taken as NVLink
# (no measurement at hand). PCIe: NCCL's 8-byte all-reduce over eight PCIe RTX 4090s took
# 42.56 µs (NVIDIA/nccl#1530; eight RTX 3090s 54.18 µs, nccl#1439), charged at any width.
NVLINK_ALLREDUCE_S: dict[int, float] = {2: 3.7e-6, 4: 4.8e-6, 8: 5.9e-6}
PCIE_ALLREDUCE_S = 42.56e-6


def collective_latency(family: str, tp: int) -> float:
    """The fixed latency of one all-reduce over `tp` cards joined by a link of `family`."""
    if tp <= 1 or family == "none":
        return 0.0
    if family in ("nvlink", "infinity-fabric"):
        return NVLINK_ALLREDUCE_S[min((w for w in NVLINK_ALLREDUCE_S if w >= tp), default=8)]
    return PCIE_ALLREDUCE_S


# FITTED by benchmarks/accuracy_speed.py --fit to fixtures/calibration/speed.jsonl (a copy of
# ../shared/calibration/speed.jsonl): least squares on log errors with a robust loss (soft L1),
# rows weighted by their confidence (high 1, medium 0.7, low 0.4), prefill, TTFT and decode at
# concurrency at half weight, the fixed hold-out left out; rounded to two or three figures.
# docs/accuracy.md ("Speed") has every row, and the medians these constants give.
#
# llama.cpp: llama-bench and ./main rows of 2023-2026 builds (RTX 30x0/40x0, A6000, RTX 6000 Ada,
# A100, P40, RX 7900 XTX, Apple M1 Ultra/M3/M3 Max). Single-sequence decode: median absolute
# error 5.0 % on the 44 fitted rows, 6.8 % on the 14 held out. The weights stream at 94 % of the
# card's bandwidth with 113 µs a layer a token besides (kernel launches and the small-matrix
# slack of a batch of one: what makes a 1B model far slower than its bytes say); without flash
# attention the cache reads at 37 %. Apple GPUs reach 87 % of that bandwidth efficiency and 92 %
# of the prefill one. Prefill: 88 % of the 16-bit tensor rate for f16 weights, 74 % for
# block-quantized ones (median error 9.8 % fitted, 11.1 % held out).
LLAMA_CPP = Constants(
    weight_efficiency=0.94,
    kv_efficiency=0.37,
    layer_s=113e-6,
    step_s=0.0,
    sequence_s=0.0,  # no llama.cpp row runs several sequences
    hop_s=31e-6,
    prefill_efficiency=0.88,
    quant_prefill_efficiency=0.74,
    ttft_s=0.0,  # llama-bench times the prompt alone; no server row to fit a fixed cost
    prefill_chunk=512,  # --ubatch-size
    decode_pipelined=False,
    backend_bandwidth=(("metal", 0.87),),
    backend_compute=(("metal", 0.92),),
)
# vLLM and SGLang, fitted together (CUDA graphs, custom all-reduce, FlashInfer/FlashAttention
# kernels in both): 13 runs at concurrency 1 (SGLang at TP 8 on 8 A100s and 8 B200s, vLLM at
# TP 1 on an A100 and a B200) and 20 at concurrency 4-100 (SGLang), of which 9 and 15 are fitted
# and 4 and 5 held out. Single-sequence decode: median absolute error 11.6 % on the 9 fitted
# rows; the hold-out (DeepSeek-R1 on 8 B200s, Qwen3-14B on one A100) 27.5 %: DeepSeek's MLA and
# fp8 block-scaled MoE layers cost more than the fitted 80 µs a layer. Weights stream at 65 % of
# the bandwidth, 80 µs a layer, 0.6 ms a step and 63 µs a sequence a step (scheduling,
# sampling); compute at 73 % of the tensor rate; 39 ms before the first token besides the
# prefill. No row runs pipeline parallelism: a hand-off is charged llama.cpp's fitted 31 µs.
SERVING = Constants(
    weight_efficiency=0.65,
    kv_efficiency=0.65,  # both engines always use flash attention kernels: the weights' figure
    layer_s=80e-6,
    step_s=0.6e-3,
    sequence_s=63e-6,
    hop_s=31e-6,
    prefill_efficiency=0.73,
    quant_prefill_efficiency=0.73,
    ttft_s=0.039,
    prefill_chunk=8192,  # --max-num-batched-tokens on large cards (plan/engines/vllm.py)
    decode_pipelined=True,
)
FITTED: dict[str, Constants] = {"llama.cpp": LLAMA_CPP, "vllm": SERVING, "sglang": SERVING}


@dataclass(frozen=True)
class Speed:
    """How fast one option runs, with what bounds it and what the figures assume."""

    decode_tokens_per_s: float  # one sequence alone, at `context` tokens of cache
    decode_tokens_per_s_total: float  # all `concurrency` sequences together, every replica
    prefill_tokens_per_s: float | None  # one prompt alone (None: the card's FLOPs are unknown)
    ttft_s: float | None  # time to the first token of that prompt
    bound: str  # what bounds single-sequence decode: "memory", "compute" or "link"
    bound_total: str  # … decode at `concurrency`
    bound_prefill: str | None  # … prefill
    assumptions: tuple[str, ...]


def expert_share(experts: int, active: int, tokens: float) -> float:
    """The share of a MoE layer's routed experts that `tokens` tokens choosing `active` each
    touch, if they choose at random: 1 − (1 − k/E)^b. One token: k/E."""
    if experts <= 0 or active <= 0:
        return 1.0
    return 1.0 - float((1.0 - min(active, experts) / experts) ** max(tokens, 0.0))


def collective_s(family: str, tp: int, nbytes: float, bandwidth: float) -> float:
    """One all-reduce of `nbytes` over `tp` cards: its latency plus a ring's 2(tp − 1)/tp of the
    bytes over the link, one way."""
    if tp <= 1:
        return 0.0
    move = 2 * (tp - 1) / tp * nbytes / bandwidth if bandwidth > 0 else 0.0
    return collective_latency(family, tp) + move


@dataclass(frozen=True)
class Time:
    """Seconds, by what spent them. A part takes max(memory, compute) + the rest: bytes and
    FLOPs overlap; fixed costs and collectives do not."""

    memory: float = 0.0  # bytes read at the bandwidth the engine reaches
    compute: float = 0.0  # FLOPs at the tensor rate the engine reaches
    overhead: float = 0.0  # fixed costs of the kernels: per layer, per hand-off
    scheduling: float = 0.0  # fixed costs of the engine's own loop: per step, per sequence
    link: float = 0.0  # collectives and hand-offs: their bytes and latencies

    def __add__(self, o: Time) -> Time:
        return Time(self.memory + o.memory, self.compute + o.compute, self.overhead + o.overhead,
                    self.scheduling + o.scheduling, self.link + o.link)  # fmt: skip

    @property
    def total(self) -> float:
        return max(self.memory, self.compute) + self.overhead + self.scheduling + self.link

    @property
    def bound(self) -> str:
        """What the time is mostly spent on: "memory" (with the kernels' fixed costs: the
        latency of streaming the weights layer by layer), "compute" (with the engine's own
        per-step and per-sequence work) or "link"."""
        parts = {
            "memory": self.memory + self.overhead,
            "compute": self.compute + self.scheduling,
            "link": self.link,
        }
        return max(parts, key=lambda k: parts[k])


def _consts(inp: SpeedInputs) -> Constants:
    try:
        return FITTED[inp.engine]
    except KeyError:
        raise ValueError(f"no speed constants for engine {inp.engine!r}") from None


def _rates(inp: SpeedInputs, k: Constants) -> tuple[float, float, float | None]:
    """(weight bandwidth, KV bandwidth, tensor rate) the engine reaches on this card."""
    bb = dict(k.backend_bandwidth).get(inp.backend, 1.0)
    bw = inp.memory_bandwidth * k.weight_efficiency * bb
    kv = bw if inp.flash_attention else inp.memory_bandwidth * k.kv_efficiency * bb
    eff = k.quant_prefill_efficiency if inp.quantized else k.prefill_efficiency
    rate = inp.flops * eff * dict(k.backend_compute).get(inp.backend, 1.0) if inp.flops else None
    return bw, kv, rate


def _stage_decode(inp: SpeedInputs, k: Constants, s: Stage, b: float, ctx: int) -> Time:
    """One stage's share of a decode step for a batch of b sequences at ctx tokens each."""
    bw, kv_bw, rate = _rates(inp, k)
    share = expert_share(inp.experts, inp.experts_active, b)
    memory = (s.dense_bytes + s.expert_bytes * share) / bw + s.kv_bytes_per_token * ctx * b / kv_bw
    compute = (2 * s.params * b + 4 * s.attention_width * ctx * b) / rate if rate else 0.0
    nbytes = b * inp.hidden_size * inp.activation_bytes
    link = s.layers * 2 * collective_s(inp.link, inp.tp, nbytes, inp.link_bandwidth)
    return Time(memory=memory, compute=compute, overhead=s.layers * k.layer_s, link=link)


def _hops(inp: SpeedInputs, k: Constants, tokens: float) -> Time:
    """The pipeline's hand-offs of `tokens` tokens' activations, stage to stage."""
    boundaries = max(len(inp.stages) - 1, 0)
    cross = min(max(inp.nodes - 1, 0), boundaries)
    nbytes = tokens * inp.hidden_size * inp.activation_bytes
    in_node = inp.link_bandwidth or inp.pcie_bandwidth
    link = (boundaries - cross) * nbytes / in_node + cross * nbytes / inp.fabric_bandwidth
    return Time(overhead=boundaries * k.hop_s, link=link)


def _host_decode(inp: SpeedInputs, k: Constants, b: float, ctx: int) -> Time:
    h = inp.host
    if h is None:
        return Time()
    share = expert_share(inp.experts, inp.experts_active, b)
    bw = h.ram_bandwidth * k.weight_efficiency
    memory = (h.dense_bytes + h.expert_bytes * share + h.kv_bytes_per_token * ctx * b) / bw
    crossings = h.crossings if inp.stages else 0
    link = crossings * b * inp.hidden_size * inp.activation_bytes / inp.pcie_bandwidth
    return Time(memory=memory, overhead=h.layers * k.layer_s + crossings * k.hop_s, link=link)


@dataclass(frozen=True)
class Cost:
    """Parts that run one after another (stages, hand-offs, the host): their times add, each
    part's own memory and compute overlapping within it, not across parts."""

    parts: tuple[Time, ...]

    @property
    def total(self) -> float:
        return sum(p.total for p in self.parts)

    @property
    def bound(self) -> str:
        return sum(self.parts, Time()).bound


def decode_step(inp: SpeedInputs, batch: float, context: int | None = None) -> Cost:
    """Seconds one replica takes to give each of `batch` sequences one more token, one stage
    after another, with what each part cost."""
    k = _consts(inp)
    ctx = inp.context if context is None else context
    parts = [_stage_decode(inp, k, s, batch, ctx) for s in inp.stages]
    parts += [
        _hops(inp, k, batch),
        _host_decode(inp, k, batch, ctx),
        Time(scheduling=k.step_s + k.sequence_s * batch),
    ]
    return Cost(tuple(parts))


def _total_rate(inp: SpeedInputs) -> tuple[float, str]:
    """Tokens a second over every replica with `concurrency` sequences decoding."""
    k = _consts(inp)
    c = max(inp.concurrency, 1)
    busy = min(inp.replicas, c)
    b = c / busy
    pp = len(inp.stages)
    step = decode_step(inp, b)
    if k.decode_pipelined and pp > 1 and b > 1:
        # vLLM and SGLang keep up to pp micro-batches in flight: while one is in a stage the
        # others are in the rest, so a round takes the slowest stage's time for each of them.
        n = min(pp, b)
        micro = b / n
        slowest = max(_stage_decode(inp, k, s, micro, inp.context).total for s in inp.stages)
        round_s = max(decode_step(inp, micro).total, n * slowest)
        return busy * b / round_s, step.bound
    return busy * b / step.total, step.bound


def prefill_time(inp: SpeedInputs, prompt: int | None = None) -> Cost | None:
    """Seconds one prompt takes to prefill alone, by what spent them; None without FLOPs.

    The prompt goes through in steps of `prefill_chunk` tokens, each reading the weights once
    (and, for a MoE, the experts its tokens touch) and paying each layer's fixed cost; its
    FLOPs are 2 a parameter a token plus causal attention's 2 per query element per token².
    Stages run one after another: neither engine overlaps one prompt's chunks across stages
    (llama.cpp's PR #6017 pipeline measured 14,723 tok/s on 8 A100s where overlapped stages
    would give several times more; see docs/accuracy.md).
    """
    k = _consts(inp)
    bw, _, rate = _rates(inp, k)
    if rate is None:
        return None
    p = max(prompt or inp.prompt_tokens or inp.context, 1)
    chunk = min(p, inp.prefill_chunk or k.prefill_chunk)
    n = math.ceil(p / chunk)
    share = expert_share(inp.experts, inp.experts_active, chunk)
    parts: list[Time] = []
    for s in inp.stages:
        compute = (2 * s.params * p + 2 * s.attention_width * p * p) / rate
        memory = n * (s.dense_bytes + s.expert_bytes * share) / bw
        nbytes = chunk * inp.hidden_size * inp.activation_bytes
        link = n * s.layers * 2 * collective_s(inp.link, inp.tp, nbytes, inp.link_bandwidth)
        parts.append(
            Time(memory=memory, compute=compute, overhead=n * s.layers * k.layer_s, link=link)
        )
    hops = _hops(inp, k, chunk)
    parts.append(Time(overhead=n * hops.overhead, link=n * hops.link))
    h = inp.host
    if h is not None:
        if not inp.stages:
            return None  # a CPU-only plan: its prefill needs the CPU's FLOPs, not modelled
        # llama.cpp multiplies a big batch's host-kept weights on the card, copying them up over
        # PCIe for every ubatch (ggml's op offload, from 32 tokens a batch).
        up = n * (h.dense_bytes + h.expert_bytes) / inp.pcie_bandwidth
        parts.append(Time(compute=2 * h.params * p / rate, link=up))
    return Cost(tuple(parts))


def estimate(inp: SpeedInputs) -> Speed:
    """Decode for one sequence and at `concurrency`, prefill and TTFT, with their bounds."""
    if inp.tp < 1 or inp.replicas < 1 or inp.nodes < 1:
        raise ValueError("tp, replicas and nodes must be at least 1")
    if not inp.stages and inp.host is None:
        raise ValueError("a speed needs at least one stage or a host part")
    k = _consts(inp)
    one = decode_step(inp, 1)
    total, bound_total = _total_rate(inp)
    pre = prefill_time(inp)
    p = max(inp.prompt_tokens or inp.context, 1)
    chunk = min(p, inp.prefill_chunk or k.prefill_chunk)
    assumptions = (
        f"decode at {inp.context:,} tokens of context a sequence",
        f"{inp.concurrency} sequence{'s' if inp.concurrency != 1 else ''} decoding at once over "
        f"{inp.replicas} replica{'s' if inp.replicas != 1 else ''}, no prefill between",
        f"prefill of {p:,} tokens alone, {chunk:,} a step",
        f"flash attention {'on' if inp.flash_attention else 'off'}",
        f"{inp.compute_dtype} tensor rate for prefill",
        *(["a MoE's experts chosen at random: 1 − (1 − k/E)^b of them read a step of b tokens"]
          if inp.experts else []),
    )  # fmt: skip
    return Speed(
        decode_tokens_per_s=1.0 / one.total,
        decode_tokens_per_s_total=total,
        prefill_tokens_per_s=p / pre.total if pre else None,
        ttft_s=pre.total + k.ttft_s if pre else None,
        bound=one.bound,
        bound_total=bound_total,
        bound_prefill=pre.bound if pre else None,
        assumptions=assumptions,
    )


# --- The convenience builder the engines call ---------------------------------------------------


def _split(n: int, parts: int) -> list[int]:
    """n layers over `parts` stages by count, the remainder to the first stages."""
    base, extra = divmod(n, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def inputs_for(
    model: Model,
    weights: WeightLayout,
    card: CardSpec,
    *,
    engine: str,
    context: int,
    kv_bytes_per_token: float,
    tp: int = 1,
    pp: int = 1,
    replicas: int = 1,
    ep: bool = False,
    nodes: int = 1,
    concurrency: int = 1,
    stage_layers: tuple[int, ...] | None = None,
    gpu_layers: int | None = None,
    cpu_moe: int = 0,
    compute_dtype: str = "bf16",
    fabric_bandwidth: float = DEFAULT_FABRIC_BANDWIDTH,
    ram_bandwidth: float = DEFAULT_RAM_BANDWIDTH,
    prompt_tokens: int = 0,
    flash_attention: bool = True,
    prefill_chunk: int = 0,
    quantized: bool = False,
) -> SpeedInputs:
    """SpeedInputs for a replica of `tp` × `pp` cards (vLLM, SGLang) or of llama.cpp's layer split
    over `pp` cards (tp 1) with `gpu_layers` of the layers on them (None: all, and the output
    layer) and the routed experts of the first `cpu_moe` layers on the host.

    `kv_bytes_per_token` is what one token of context costs one card of the fullest stage (the
    engine's own figure; for a CPU-only plan, the host); each stage and the host are charged it
    in proportion to their layers. `ep` only says
    that routed experts are whole on each card rather than sliced; either way a card holds 1/tp
    of them and a step reads the share the batch routes to. The output head is read every step
    (the embedding only when tied to it: a step looks up one row of an untied embedding).
    Active parameters are the model's (else all of them, else bytes ÷ 2). `compute_dtype`
    ("bf16", "fp8", "int8") picks the card's tensor rate for prefill and batched decode; a card
    without it computes at its bf16 rate, and the inputs say so.
    """
    layers = weights.layers
    if stage_layers is None:
        on_cards = layers if gpu_layers is None else min(gpu_layers, layers)
        stage_layers = tuple(_split(on_cards, pp)) if on_cards else ()
    on_cards = sum(stage_layers)
    first = layers - on_cards  # llama.cpp offloads the LAST gpu_layers layers
    head = weights.output_bytes + (weights.embed_bytes if weights.tied_embeddings else 0)
    vocab_params = (model.vocab_size or 0) * (model.hidden_size or 0)
    total_params = model.params or weights.total / 2
    active = model.active_params or total_params
    body_params = max(active - vocab_params * (1 if weights.tied_embeddings else 2), 0.0)
    per_layer_params = body_params / layers if layers else 0.0
    head_dim = model.head_dim
    width_layers = sum(g.layers for g in model.layer_groups
                       if g.kind in (AttentionKind.FULL, AttentionKind.MLA))  # fmt: skip
    width_per_layer = (width_layers / layers if layers else 0) * model.attention_heads * head_dim
    # The layers `kv_bytes_per_token` is the cost of: the fullest card's, or the host's alone.
    fullest = max(stage_layers, default=0) or max(first, 1)

    stages: list[Stage] = []
    at = first
    for i, n in enumerate(stage_layers):
        idx = range(at, at + n)
        at += n
        dense = sum(weights.layer_bytes[j] - weights.expert_bytes[j] for j in idx)
        # Routed experts of the first `cpu_moe` layers stay on the host.
        experts = sum(weights.expert_bytes[j] for j in idx if j >= cpu_moe)
        last = i == len(stage_layers) - 1
        holds_head = last and (gpu_layers is None or gpu_layers > layers)
        stages.append(
            Stage(
                layers=n,
                dense_bytes=(dense + (head if holds_head else 0)) / tp,
                expert_bytes=experts / tp,
                kv_bytes_per_token=kv_bytes_per_token * n / fullest,
                params=(per_layer_params * n + (vocab_params if holds_head else 0)) / tp,
                attention_width=width_per_layer * n / tp,
            )
        )
    host: HostPart | None = None
    head_on_host = gpu_layers is not None and gpu_layers <= layers
    host_experts = sum(weights.expert_bytes[j] for j in range(max(cpu_moe, first)))
    if first or host_experts or head_on_host:
        lead = range(first)
        host = HostPart(
            layers=first,
            dense_bytes=sum(weights.layer_bytes[j] - weights.expert_bytes[j] for j in lead)
            + (head if head_on_host else 0),
            expert_bytes=host_experts,
            kv_bytes_per_token=kv_bytes_per_token * first / fullest,
            params=per_layer_params * first + (vocab_params if head_on_host else 0),
            crossings=(1 if first and stages else 0) + (1 if head_on_host and stages else 0)
            + 2 * max(min(cpu_moe, layers) - first, 0),
            ram_bandwidth=ram_bandwidth,
        )  # fmt: skip
    # A card without the asked rate (fp8 on an A100) computes at its 16-bit one.
    flops = {"fp8": card.fp8_flops, "int8": card.int8_ops}.get(compute_dtype)
    if flops is None:
        flops, compute_dtype = card.bf16_flops, "bf16"
    return SpeedInputs(
        engine=engine,
        stages=tuple(stages),
        memory_bandwidth=card.memory_bandwidth,
        flops=flops,
        compute_dtype=compute_dtype,
        backend=card.backend,
        tp=tp,
        replicas=replicas,
        nodes=nodes,
        link=card.link_family if (tp > 1 or len(stages) > 1) else "none",
        link_bandwidth=card.link_bandwidth or card.pcie_bandwidth,
        fabric_bandwidth=fabric_bandwidth,
        pcie_bandwidth=card.pcie_bandwidth,
        host=host,
        experts=(model.experts or 0) if model.is_moe else 0,
        experts_active=(model.experts_active or 0) if model.is_moe else 0,
        hidden_size=model.hidden_size or 0,
        context=context,
        concurrency=concurrency,
        prompt_tokens=prompt_tokens,
        flash_attention=flash_attention,
        prefill_chunk=prefill_chunk,
        quantized=quantized,
    )
