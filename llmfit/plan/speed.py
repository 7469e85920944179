"""How long an engine's step takes on one replica, and how fast an option runs for one sequence.

A step carries a batch of sequences that each decode one token, and perhaps a chunk of prompt
tokens being prefilled beside them. On every card of a replica it reads the weights the card
holds (of a MoE's routed experts, only the share the step's tokens route to: 1 − (1 − k/E)^n of
them for n tokens choosing k of E experts), each sequence's KV cache (and a linear layer's
state), against the card's memory bandwidth; it multiplies two FLOPs a parameter a token (and
four a query element a context token in attention) against the card's tensor rate; a
tensor-parallel layer all-reduces its activations twice over the link between the cards, a MoE
whose attention runs in data-parallel ranks sends each token to its experts and back (an
all-to-all), and a pipeline hands activations from stage to stage over the link, or the fabric
between nodes. Layers llama.cpp keeps in host RAM are read at the host's RAM bandwidth. A card's
part of a step takes max(weights, their FLOPs) + max(routed experts reached, their FLOPs) +
max(KV, attention's FLOPs) (the kernels run one after another: a GEMM overlaps its weights' reads
and its FLOPs, the attention kernel its KV reads and its own, not each other's) + its kernels'
fixed costs (a layer's, more without CUDA graphs) + its collectives; a micro-batch's stages run
one after another, and an engine that pipelines (vLLM, SGLang) keeps as many micro-batches in
flight as it has stages. The engine's own CPU work a step (scheduling, sampling) adds to that, or,
where the engine overlaps it with the GPU's (vLLM's async scheduling, SGLang's overlap
scheduler), the step takes the longer of the two.

Every efficiency is a share of the card's datasheet figure, at most 1, and the tensor side is a
curve in the work's size: a GEMM of n tokens reaches n / (n + rows) of its most, a MoE's grouped
GEMM t / (t + rows) at t tokens an expert (bandwidth-bound at a few, tensor-bound at thousands).
No figure this module gives implies more than the card's peak (tests/plan/test_peaks.py).

A step can instead be priced by the card's measured kernels (`SpeedInputs.curves`, from
plan/curves.py): each part's roofline at the datasheet figures over the efficiency measured at
its size (GEMMs by tokens, the grouped GEMM by tokens an expert, decode attention by sequences ×
context, a prompt's by its length, all-reduces and all-to-alls by message bytes), or the routed
experts' grouped GEMM alone so (`curves_experts_only`), which the plans do where the fitted
constants set `expert_curves` (docs/accuracy.md "Priced by the measured kernels": the grouped
GEMM alone was closer on runs the fit never saw, every part so further off);
benchmarks/accuracy_load.py --curves and --curves-experts measure them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from llmfit.plan.artifact import WeightLayout
from llmfit.plan.by_identity import ByIdentity
from llmfit.plan.cards import DEFAULT_FABRIC_BANDWIDTH, CardSpec
from llmfit.plan.curves import Collective, Curve, KernelCurves
from llmfit.plan.kernels import layer_kernels
from llmfit.plan.model import AttentionKind, Model

# A host whose RAM bandwidth the fleet does not state is taken as a desktop's two channels of
# DDR5-6400 (102.4 GB/s): the low end of what a GPU host has, so that layers kept on the host are
# never planned faster than they run. A fleet entry's ram_bandwidth_gbs replaces it.
DEFAULT_RAM_BANDWIDTH = 102.4e9


@dataclass(frozen=True)
class Constants:
    """What an engine reaches on a family of cards: its share of their peaks, and fixed costs.

    Fitted (benchmarks/accuracy_speed.py, accuracy_load.py) and kept by each engine with the
    residuals of the fit; every field has the meaning its comment gives whatever the engine.
    """

    weight_efficiency: float  # share of memory bandwidth weights stream at in decode
    kv_efficiency: float  # share KV is read at without flash attention (with it: weights')
    layer_s: float  # a layer's fixed cost in one step (kernel launches, small-GEMM slack)
    step_s: float  # a step's fixed cost (the scheduler, the sampler's launch, the HTTP loop)
    sequence_s: float  # a step's cost for each sequence in its batch (scheduling, sampling)
    hop_s: float  # a pipeline hand-off's fixed cost, beyond its bytes over the link
    prefill_efficiency: float  # share of the dense tensor rate prefill reaches (float weights)
    quant_prefill_efficiency: float  # … with block-quantized weights (GGUF k-quants, Q4_0, …)
    ttft_s: float  # fixed cost before the first token (tokenising, scheduling, the HTTP hop)
    prefill_chunk: int  # tokens a prefill step carries by default
    # Whether pipeline stages decode different micro-batches at once (vLLM's and SGLang's
    # virtual engines); llama.cpp runs one batch through its stages in turn.
    decode_pipelined: bool
    # A MoE layer's fixed cost beyond a dense one's. 0 for vLLM and SGLang: their routed experts'
    # grouped GEMM is timed from the tokens each expert gets (`expert_rows`), not by a constant.
    moe_layer_s: float = 0.0
    # A layer's fixed cost without CUDA graphs (eager mode, or a batch past the captured sizes);
    # 0: as with them.
    eager_layer_s: float = 0.0
    # A graphed kernel's fixed cost (its launch and tail latency in a CUDA graph). Above 0, a
    # layer's fixed cost is the kernels it launches (Stage.kernels, plan/kernels.py) at this
    # each, in place of `layer_s` and `moe_layer_s`; 0: those.
    kernel_s: float = 0.0
    # The share of the weights' bandwidth routed experts stream at (grouped GEMMs over many
    # small matrices): 1 streams them as the dense weights.
    expert_efficiency: float = 1.0
    # The share of the weights' bandwidth the KV cache is read at by the attention kernels with
    # flash attention on (paged attention over many sequences).
    attention_efficiency: float = 1.0
    # One all-to-all's fixed latency (expert parallelism's dispatch or combine).
    all_to_all_s: float = 0.0
    # The share of the prefill's tensor rate a MoE's routed experts reach at most (a grouped
    # GEMM of thousands of tokens an expert): 1 multiplies them as the dense weights. The product
    # with `prefill_efficiency` is held at 1 or below.
    expert_prefill_efficiency: float = 1.0
    # A GEMM's tensor efficiency as a curve in the tokens it multiplies: n / (n + rows) of its
    # most (`prefill_efficiency`). The rows its tiles run beyond its tokens (a tile of 64 or 128
    # rows holds a decode batch of a few sequences, mostly empty): a few at thousands of tokens,
    # most of the work at one. Time is then (n + rows) tokens' FLOPs: the roofline's
    # compute side never reaches the peak, and a batch of one is charged its tile. 0: no curve
    # (llama.cpp's fit, which predates it).
    gemm_rows: float = 0.0
    # The same for each expert of a grouped GEMM that a step's tokens reach: t / (t + rows) of its
    # most at t tokens an expert (bandwidth-bound at a few, tensor-bound at thousands).
    expert_rows: float = 0.0
    # The share of the bandwidth block-quantized weights (GGUF's k-quants, Q4_0, …) stream at in
    # decode, where the kernel dequantizes every block it reads (llama.cpp's mul_mat_vec_q);
    # 0: as `weight_efficiency`. The KV cache keeps the plain share.
    quant_weight_efficiency: float = 0.0
    # Where a card's kernels were measured (SpeedInputs.curves): the engine's kernels reach this
    # multiple of the measured efficiencies (1: each kernel as fast as timed alone), the product
    # held at 1 or below. The efficiencies above then price only cards no table covers.
    curve_share: float = 1.0
    # Price the routed experts' grouped GEMM by the card's measured curve where a table covers
    # the card (the rest by the shares above), with `curve_share` and `moe_layer_s` fitted for
    # it (benchmarks/accuracy_load.py --fit --curves-experts). Off until a fit sets it on.
    expert_curves: bool = False
    # The engine's front end (its HTTP handler, chat template and tokenizer, in one process:
    # vLLM's API server) takes one request after another, `ttft_s` each: prompts sent at once
    # reach the scheduler `ttft_s` apart, and a burst of short ones is prefilled as they arrive,
    # not as fast as the card goes (plan/load.py `burst`). False: they reach it together
    # (SGLang's, whose first tokens at 100 requests in flight rule the turn out).
    serial_frontend: bool = False
    # Bytes a second one thread block of a split-KV decode kernel streams its share of the
    # cache at (SGLang's Triton decode, SpeedInputs.split_decode): where the blocks running at
    # once (at most one a multiprocessor) stream slower than the card's bandwidth share, they
    # bound the read. 0, as every engine ships: the cache is read at the bandwidth share
    # (benchmarks/accuracy_load.py --split-decode measures it; docs/accuracy.md "SGLang's
    # Triton decode, block by block" says why it is not shipped).
    split_kv_rate: float = 0.0


@dataclass(frozen=True)
class SplitDecode:
    """A decode attention kernel whose grid is a block for each sequence × head block × split
    of its cache (SGLang's Triton backend, srt/layers/attention/triton_ops/decode_attention.py
    `_decode_grouped_att_m_fwd`): each block reads its split of one KV head's cache on its own
    multiprocessor, one tile after another."""

    heads: int  # head blocks a sequence's layer runs on one card: ceil(H / min(16, H / kv))
    reads: float  # times a token's cache is read a layer: head blocks ÷ KV heads on the card
    max_splits: int  # the most splits of a sequence's cache (--triton-attention-num-kv-splits)
    units: int  # the card's multiprocessors (SMs, CUs): blocks that run at once


def split_decode_seconds(
    sd: SplitDecode, rate: float, cache: float, batch: float, context: float
) -> float:
    """Seconds a split-KV decode (`sd`) takes over a card's layers to read `cache` bytes a
    sequence's token of context (all its layers) for `batch` sequences at `context` tokens, each
    of its blocks streaming at `rate`. The splits are SGLang's for sequences of one length
    (srt/layers/attention/triton_backend.py `get_num_kv_splits_triton`): as many as fill the
    card's units, log2(context / 64) times over, at most `max_splits`; a grid of fewer blocks
    than units runs them all at once, the rest of the card idle."""
    if batch <= 0 or context <= 0 or rate <= 0:
        return 0.0
    if not (batch < math.inf and context < math.inf):
        return math.inf  # a search's unbounded batch (the bandwidth's read is as unbounded)
    seqs = max(math.ceil(batch - 1e-9), 1)
    wide = int(sd.units * max(math.log2(context / 64), 1.0))
    splits = max(min(-(-wide // (seqs * sd.heads)), sd.max_splits), 1)
    blocks = batch * sd.heads * splits
    busy = blocks if blocks < sd.units else sd.units
    return cache * sd.reads * batch * context / (busy * rate)


# One all-reduce's fixed latency, seconds. NVLink: the custom all-reduce vLLM and SGLang run there,
# 3.7, 4.8 and 5.9 µs at 2, 4 and 8 H100s for 512 bytes (sgl-project/sglang#2904, its table of
# vLLM's kernel); wider groups are charged the 8-card figure. Infinity Fabric is taken as NVLink
# (no measurement at hand). PCIe: NCCL's 8-byte all-reduce over eight PCIe RTX 4090s took
# 42.56 µs (NVIDIA/nccl#1530; eight RTX 3090s 54.18 µs, nccl#1439), charged at any width.
NVLINK_ALLREDUCE_S: dict[int, float] = {2: 3.7e-6, 4: 4.8e-6, 8: 5.9e-6}
PCIE_ALLREDUCE_S = 42.56e-6
# Across nodes (InfiniBand, RoCE): NCCL's small-message all-reduce over two nodes of eight H100s
# on 400 Gb/s InfiniBand is about 25 µs (nccl-tests all_reduce_perf at 8 bytes, as NVIDIA's
# nccl-tests README tables it); a fabric not measured is charged the same.
FABRIC_COLLECTIVE_S = 25e-6


def collective_latency(family: str, tp: int) -> float:
    """The fixed latency of one all-reduce over `tp` cards joined by a link of `family`."""
    if tp <= 1 or family == "none":
        return 0.0
    if family in ("nvlink", "infinity-fabric"):
        return NVLINK_ALLREDUCE_S[min((w for w in NVLINK_ALLREDUCE_S if w >= tp), default=8)]
    if family == "fabric":
        return FABRIC_COLLECTIVE_S
    return PCIE_ALLREDUCE_S


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
    # Of its layers, the MoE ones (their experts' fixed costs; their all-to-alls).
    moe_layers: int = 0
    # What one sequence's recurrent state (linear attention, Mamba) costs this card: read and
    # written every step.
    state_bytes: float = 0.0
    # Of `params`, the routed experts' a token is sent to (a MoE's k of E).
    expert_params: float = 0.0
    # The kernels its layers launch in one graphed decode step, all-reduces apart
    # (plan/kernels.py layer_kernels): their fixed costs where the constants price a kernel.
    kernels: float = 0.0


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
    """Every number the step model needs, for one option. Bytes, FLOP/s and bytes/s."""

    constants: Constants  # the engine's, for this card family
    stages: tuple[Stage, ...]  # one replica's pipeline, first stage first; () for a CPU-only plan
    memory_bandwidth: float  # one card's (CardSpec.memory_bandwidth)
    flops: float | None  # one card's dense tensor rate at `compute_dtype`; None: unknown
    compute_dtype: str = "bf16"  # what `flops` is the rate of, for saying so
    tp: int = 1  # tensor-parallel cards in each stage
    replicas: int = 1  # independent copies serving at once (data parallel, or several servers)
    # Data-parallel attention ranks of one replica (a MoE's DP + EP): each runs its own share of
    # the batch through its own attention; the experts see every rank's tokens.
    ranks: int = 1
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
    batch: int = 1  # sequences decoding at once, over all replicas
    prompt_tokens: int = 0  # the prompt prefilled for TTFT; 0: `context`
    flash_attention: bool = True
    prefill_chunk: int = 0  # tokens a prefill step carries; 0: the engine's default
    # Tokens the kernels compute at once (llama.cpp's --ubatch-size): a step of more reads the
    # weights once for each; 0: a step is one pass whatever its size.
    ubatch: int = 0
    # No CUDA graphs (--enforce-eager): every layer's launches count where they outlast the GPU.
    eager: bool = False
    # The largest batch run as a captured CUDA graph (0: any). A step past it launches its kernels
    # from the host (eager): the launches are charged where they outlast the GPU's work.
    graph_batch: int = 0
    # Block-quantized weights the kernels dequantize (GGUF's k-quants, Q4_0, …): llama.cpp
    # prefills them at its own fitted efficiency.
    quantized: bool = False
    # The engine schedules the next step on the CPU while the GPU runs this one (vLLM's async
    # scheduling, SGLang's overlap scheduler): a step costs the longer of its CPU work (`step_s`,
    # `sequence_s`) and its GPU work, not their sum.
    overlap: bool = False
    # The card's measured kernels under the engine (plan/curves.py), where a table covers the
    # card or its architecture: GEMMs, grouped GEMMs, attention and collectives are then priced
    # as roofline time ÷ the measured efficiency at their size, not by the parametric shares.
    curves: KernelCurves | None = None
    curve_dtype: str = "bf16"  # the weights' kernels' dtype in the curves ("fp8", "w4a16", …)
    attention_flops: float | None = None  # the card's 16-bit tensor rate (attention runs in it)
    mla: bool = False  # the model's attention is MLA (its latent cache: the MLA decode curve)
    # Only the routed experts' grouped GEMM priced by its measured curve, the rest by the
    # constants' shares (a measurement's variant: benchmarks/accuracy_load.py --curves-experts).
    curves_experts_only: bool = False
    # The ways each routed expert is cut (its columns over the cards that hold it), for its
    # measured grouped GEMM (KernelCurves.moe): 1, whole experts, as plans price them. Without
    # expert parallelism vLLM and SGLang cut every expert over the MoE layers' tensor-parallel
    # group, data-parallel ranks' cards too (vLLM: model_executor/layers/fused_moe/config.py
    # FusedMoEParallelConfig.make flattens dp × tp into the MoE's tp; SGLang:
    # srt/distributed/parallel_state.py initialize_model_parallel, moe_tp_size =
    # tensor_model_parallel_size // moe_ep_size): benchmarks/accuracy_load.py --sliced-experts
    # prices runs by the slice's own curve, which did not do better on runs never seen
    # (docs/accuracy.md "Priced by the measured kernels").
    expert_slices: int = 1
    # The decode attention's grid where it bounds the cache's read (SGLang's Triton backend):
    # None where the kernel reads it at the card's bandwidth share.
    split_decode: SplitDecode | None = None

    @property
    def cards(self) -> int:
        """Cards of one replica."""
        return self.tp * max(len(self.stages), 1) * self.ranks


@dataclass(frozen=True)
class Speed:
    """How fast one option runs, with what bounds it and what the figures assume."""

    decode_tokens_per_s: float  # one sequence alone, at `context` tokens of cache
    decode_tokens_per_s_total: float  # all `batch` sequences together, every replica
    prefill_tokens_per_s: float | None  # one prompt alone (None: the card's FLOPs are unknown)
    ttft_s: float | None  # time to the first token of that prompt
    bound: str  # what bounds single-sequence decode: "memory", "compute" or "link"
    bound_total: str  # … decode at `batch`
    bound_prefill: str | None  # … prefill
    assumptions: tuple[str, ...]


def expert_share(experts: int, active: int, tokens: float) -> float:
    """The share of a MoE layer's routed experts that `tokens` tokens choosing `active` each
    touch, if they choose at random: 1 − (1 − k/E)^b. One token: k/E."""
    if experts <= 0 or active <= 0:
        return 1.0
    return 1.0 - float((1.0 - min(active, experts) / experts) ** max(tokens, 0.0))


@dataclass(frozen=True)
class Time:
    """Seconds, by what spent them. A part takes max(weights, their FLOPs) + max(routed experts'
    bytes, their FLOPs) + max(KV, attention's FLOPs) + the rest: a kernel's bytes and FLOPs
    overlap, the dense GEMMs', the grouped GEMM's and the attention's do not (they run one after
    another), nor fixed costs and collectives."""

    memory: float = 0.0  # weights read at the bandwidth the engine reaches
    compute: float = 0.0  # the weights' FLOPs (the GEMMs) at the tensor rate the engine reaches
    overhead: float = 0.0  # fixed costs of the kernels: per layer, per hand-off
    scheduling: float = 0.0  # the engine's own CPU work: per step, per sequence
    link: float = 0.0  # collectives and hand-offs: their bytes and latencies
    kv: float = 0.0  # the KV cache (and linear states) read at the bandwidth the engine reaches
    attention: float = 0.0  # attention's FLOPs over the context, at the same rate
    experts: float = 0.0  # the routed experts a step's tokens reach, read
    expert_compute: float = 0.0  # … their grouped GEMM's FLOPs, on its efficiency curve

    def __add__(self, o: Time) -> Time:
        return Time(self.memory + o.memory, self.compute + o.compute, self.overhead + o.overhead,
                    self.scheduling + o.scheduling, self.link + o.link, self.kv + o.kv,
                    self.attention + o.attention, self.experts + o.experts,
                    self.expert_compute + o.expert_compute)  # fmt: skip

    def scaled(self, f: float) -> Time:
        return Time(self.memory * f, self.compute * f, self.overhead * f, self.scheduling * f,
                    self.link * f, self.kv * f, self.attention * f, self.experts * f,
                    self.expert_compute * f)  # fmt: skip

    @property
    def gpu(self) -> float:
        """The part's time on the cards (all but the engine's CPU work)."""
        return (
            max(self.memory, self.compute)
            + max(self.experts, self.expert_compute)
            + max(self.kv, self.attention)
            + self.overhead
            + self.link
        )

    @property
    def total(self) -> float:
        return self.gpu + self.scheduling

    @property
    def bound(self) -> str:
        """What the time is mostly spent on: "memory" (with the kernels' fixed costs: the
        latency of streaming the weights layer by layer), "compute" (with the engine's own
        per-step and per-sequence work) or "link"."""
        # The first of the largest, as max over them in this order picks it.
        most, bound = self.memory + self.experts + self.kv + self.overhead, "memory"
        compute = self.compute + self.expert_compute + self.attention + self.scheduling
        if compute > most:
            most, bound = compute, "compute"
        if self.link > most:
            bound = "link"
        return bound


def _rates(inp: SpeedInputs) -> tuple[float, float, float | None]:
    """(weight bandwidth, KV bandwidth, tensor rate) the engine reaches on this card: every
    efficiency a share of the card's own datasheet figure, held at 1 or below."""
    k = inp.constants
    full = inp.memory_bandwidth
    plain = full * min(k.weight_efficiency, 1.0)
    bw = plain
    if inp.quantized and k.quant_weight_efficiency:
        bw = full * min(k.quant_weight_efficiency, 1.0)
    kv = (
        full * min(k.weight_efficiency * k.attention_efficiency, 1.0)
        if inp.flash_attention
        else full * min(k.kv_efficiency, 1.0)
    )
    eff = k.quant_prefill_efficiency if inp.quantized else k.prefill_efficiency
    rate = inp.flops * min(eff, 1.0) if inp.flops else None
    return bw, kv, rate


@dataclass(frozen=True)
class _Coef:
    """One stage's arithmetic as seconds a unit: what a step's batch, chunk and context cost it.
    Worked out once from a SpeedInputs; `stage_parts` is the one place the units are added up."""

    dense: float  # its always-read weights
    experts: float  # all its routed experts (a step reads the share its tokens route to)
    kv: float  # a sequence's token of context (each rank its share of the batch)
    state: float  # a sequence's recurrent state, read and written
    token: float  # a token's dense FLOPs (each rank its share), at the GEMMs' most
    expert_token: float  # a token's routed experts' FLOPs, at the grouped GEMM's most
    attention: float  # a token's attention FLOPs, a token of context
    link_fixed: float  # its all-reduces' and all-to-alls' latencies
    link_token: float  # their bytes, a token
    graph: float  # its kernels' fixed costs with CUDA graphs
    eager: float  # … without
    layers: int = 0  # its layers (their all-reduces, priced by a measured curve)
    moe_layers: int = 0  # … of them MoE (their all-to-alls)
    cache: float = 0.0  # bytes of a sequence's token of context on the card (a split decode's)


@dataclass(frozen=True)
class _Kernels:
    """A card's measured kernel curves as a step reads them (SpeedInputs.curves): each part's
    roofline time (bytes at the datasheet bandwidth, FLOPs at the datasheet peak) divided by the
    measured efficiency at its size, times the engine's `curve_share` of it."""

    gemm: Curve  # by tokens a GEMM multiplies (on one rank)
    moe: Curve  # by tokens each of a layer's routed experts gets, on average over all of them
    attention: Curve  # decode: by sequences × tokens of context one rank's kernel reads
    prefill: Curve  # a prompt's attention: by its tokens
    allreduce: Collective | None  # over the stage's tp cards (None: tp 1, or across nodes)
    alltoall: Collective | None  # over the replica's expert-parallel cards (None: none)
    share: float  # Constants.curve_share
    experts_only: bool  # SpeedInputs.curves_experts_only
    ranks: int  # attention ranks: each runs 1/ranks of the step's tokens through its GEMMs
    act: float  # bytes of a token's activations (an all-reduce's message a token)
    routed: float  # k / E: a token's share of a MoE layer's experts (0: dense)
    active: int  # k: experts a token is sent to (an all-to-all's message a token)

    @classmethod
    def of(cls, inp: SpeedInputs) -> _Kernels | None:
        kc = inp.curves
        if kc is None:
            return None
        a = max(inp.ranks, 1)
        n = a * inp.tp
        local = inp.nodes <= 1  # the tables measured collectives within a node
        return cls(
            gemm=kc.gemm(inp.curve_dtype),
            # fp8 MoE checkpoints are block-scaled (DeepSeek's 128 × 128 blocks, as Qwen's,
            # GLM's and MiniMax's fp8 releases): their grouped GEMM is the block-scaled kernel,
            # not the per-tensor one (vLLM's measured per-tensor fp8 MoE is 4-5 times slower).
            moe=kc.moe(
                "fp8_block" if inp.curve_dtype == "fp8" else inp.curve_dtype, inp.expert_slices
            ),
            attention=kc.mla_decode if inp.mla and kc.mla_decode else kc.attention_decode,
            prefill=kc.attention_prefill,
            allreduce=kc.allreduce(inp.tp) if inp.tp > 1 and local else None,
            alltoall=kc.alltoall(n) if a > 1 and inp.experts and n > 1 and local else None,
            share=max(inp.constants.curve_share, 1e-3),
            experts_only=inp.curves_experts_only,
            ranks=a,
            act=inp.hidden_size * inp.activation_bytes,
            routed=min(inp.experts_active, inp.experts) / inp.experts if inp.experts else 0.0,
            active=inp.experts_active,
        )


def _coef(inp: SpeedInputs, s: Stage) -> _Coef:
    if inp.curves is not None and inp.curves_experts_only:
        # The shares' coefficients, the experts' as their roofline (the curve divides them).
        return _shares_coef(inp, s, experts_roofline=True)
    if inp.curves is not None:
        return _raw_coef(inp, s)
    return _shares_coef(inp, s)


def _shares_coef(inp: SpeedInputs, s: Stage, experts_roofline: bool = False) -> _Coef:
    """A stage's coefficients by the constants' shares of the card's figures (its curves, if
    any, unread); with `experts_roofline`, the routed experts' at the datasheet bandwidth and
    peak instead (their measured curve divides them: `_coef`)."""
    bw, kv_bw, rate = _rates(inp)
    k = inp.constants
    a = max(inp.ranks, 1)
    ar_fixed, ar_token, a2a_fixed, a2a_token = _links(inp, s)
    if experts_roofline:
        peak = inp.flops or 0.0
        experts = s.expert_bytes / inp.memory_bandwidth
        expert_token = 2 * s.expert_params / a / peak if peak else 0.0
    else:
        experts = s.expert_bytes / min(k.expert_efficiency, 1.0) / bw
        # The grouped GEMM's most: its share of the dense GEMMs' rate, never above the card's
        # peak.
        expert_rate = (
            min(rate * k.expert_prefill_efficiency, inp.flops) if rate and inp.flops else 0.0
        )
        expert_token = 2 * s.expert_params / a / expert_rate if expert_rate else 0.0
    return _Coef(
        dense=s.dense_bytes / bw,
        experts=experts,
        kv=s.kv_bytes_per_token / a / kv_bw,
        state=2 * s.state_bytes / a / kv_bw,
        token=2 * (s.params - s.expert_params) / a / rate if rate else 0.0,
        expert_token=expert_token,
        attention=4 * s.attention_width / a / rate if rate else 0.0,
        link_fixed=ar_fixed + a2a_fixed,
        link_token=ar_token + a2a_token,
        graph=_graph(k, s),
        eager=_eager(k, s),
        cache=s.kv_bytes_per_token,
    )


def _graph(k: Constants, s: Stage) -> float:
    """A stage's kernels' fixed costs in a graphed step: its kernels at `kernel_s` each where
    the constants price a kernel, else a constant a layer and a MoE layer."""
    if k.kernel_s > 0 and s.kernels > 0:
        return s.kernels * k.kernel_s
    return s.layers * k.layer_s + s.moe_layers * k.moe_layer_s


def _eager(k: Constants, s: Stage) -> float:
    """… and without CUDA graphs: each layer's launches from the host, never less than the
    graphed kernels' own costs."""
    eager = k.eager_layer_s if k.eager_layer_s > k.layer_s else k.layer_s
    return max(s.layers * eager + s.moe_layers * k.moe_layer_s, _graph(k, s))


def _links(inp: SpeedInputs, s: Stage) -> tuple[float, float, float, float]:
    """A stage's all-reduces' (fixed seconds, seconds a token) and its all-to-alls'."""
    k = inp.constants
    a = max(inp.ranks, 1)
    act = inp.hidden_size * inp.activation_bytes
    link_fixed = link_token = 0.0
    if inp.tp > 1:
        # Two all-reduces a layer: a ring's 2(tp − 1)/tp of the activations over the link.
        link_fixed += s.layers * 2 * collective_latency(inp.link, inp.tp)
        if inp.link_bandwidth > 0:
            link_token += s.layers * 2 * 2 * (inp.tp - 1) / inp.tp * act / a / inp.link_bandwidth
    n = a * inp.tp
    if a > 1 and s.moe_layers and n > 1:
        # Expert parallelism over data-parallel attention ranks: each MoE layer sends each
        # token's activations to its experts' ranks and back (dispatch and combine), the share
        # that leaves the card over the link or, across nodes, the slower fabric: a latency and
        # the message's bytes over the link (its efficiency a curve in the message's size).
        via = inp.link_bandwidth or inp.pcie_bandwidth
        if inp.nodes > 1:
            via = min(via, inp.fabric_bandwidth)
        a2a_fixed = s.moe_layers * 2 * k.all_to_all_s
        a2a_token = s.moe_layers * 2 * inp.experts_active * act * (n - 1) / n / a / via
        return link_fixed, link_token, a2a_fixed, a2a_token
    return link_fixed, link_token, 0.0, 0.0


def _raw_coef(inp: SpeedInputs, s: Stage) -> _Coef:
    """A stage's roofline at the card's datasheet figures, for pricing by measured curves
    (`_Kernels`): bytes at the full bandwidth, FLOPs at the full peak; the link's parts are the
    parametric ones, used only where no curve measured the collective."""
    k = inp.constants
    full = inp.memory_bandwidth
    peak = inp.flops or 0.0
    att_peak = inp.attention_flops or peak
    a = max(inp.ranks, 1)
    # The collectives a table measured are priced by it (`_measured_parts`); the rest, as ever.
    ar_fixed, ar_token, a2a_fixed, a2a_token = _links(inp, s)
    local = inp.nodes <= 1
    if local and inp.tp > 1:
        ar_fixed = ar_token = 0.0
    if local and a > 1:
        a2a_fixed = a2a_token = 0.0
    return _Coef(
        dense=s.dense_bytes / full,
        experts=s.expert_bytes / full,
        kv=s.kv_bytes_per_token / a / full,
        state=2 * s.state_bytes / a / full,
        token=2 * (s.params - s.expert_params) / a / peak if peak else 0.0,
        expert_token=2 * s.expert_params / a / peak if peak else 0.0,
        attention=4 * s.attention_width / a / att_peak if att_peak else 0.0,
        link_fixed=ar_fixed + a2a_fixed,
        link_token=ar_token + a2a_token,
        graph=_graph(k, s),
        eager=_eager(k, s),
        layers=s.layers,
        moe_layers=s.moe_layers,
        cache=s.kv_bytes_per_token,
    )


@dataclass(frozen=True)
class Stepper:
    """A SpeedInputs' stages as coefficients, worked out once: a step's time is then a few
    multiplications a stage (a plan times thousands of steps)."""

    coefs: tuple[_Coef, ...]
    keep: float  # 1 − k/E: the share of a MoE layer's experts one token does not choose
    ubatch: int
    graph_batch: int
    eager: bool
    hop_fixed: float
    hop_token: float
    step_s: float
    sequence_s: float
    # Rows the dense GEMMs' tiles run beyond a step's tokens (Constants.gemm_rows).
    rows: float = 0.0
    # … the grouped GEMM's, in tokens of the whole step, when every expert is reached:
    # expert_rows × E / k (a step reaching a share s of the experts pays s of it).
    expert_pad: float = 0.0
    overlap: bool = False  # CPU work runs beside the GPU's (SpeedInputs.overlap)
    kernels: _Kernels | None = None  # the card's measured curves, where they price the step
    # Stages the engine keeps a micro-batch in flight in (`_pipelined`), 0 where it does not.
    pipelined: int = 0
    host: bool = False  # a host part (SpeedInputs.host)
    # The decode attention's grid where it bounds the cache's read (SpeedInputs.split_decode,
    # priced at Constants.split_kv_rate a block), None elsewhere; the attention ranks a step's
    # sequences are spread over.
    split: SplitDecode | None = None
    split_rate: float = 0.0
    ranks: int = 1
    # Which way a step is priced, decided once (`Stepper.of`): `curve`, the kernels where a
    # step is one pass whose routed experts alone go by their measured curve, with no split
    # decode (`_experts_measured_total`); `shares`, one pass by the constants' shares alone
    # (`step_total`'s own sums); `ubatch_shares`, the shares in passes of the ubatch
    # (`_ubatch_total`). Anything else takes `stage_parts` stage by stage.
    curve: _Kernels | None = None
    shares: bool = False
    ubatch_shares: bool = False

    @classmethod
    def of(cls, inp: SpeedInputs) -> Stepper:
        k = inp.constants
        boundaries = max(len(inp.stages) - 1, 0)
        cross = min(max(inp.nodes - 1, 0), boundaries)
        act = inp.hidden_size * inp.activation_bytes / max(inp.ranks, 1)
        in_node = inp.link_bandwidth or inp.pcie_bandwidth
        e, kk = inp.experts, inp.experts_active
        kernels = _Kernels.of(inp)
        split = inp.split_decode if k.split_kv_rate > 0 else None
        plain = split is None and kernels is None
        return cls(
            coefs=tuple(_coef(inp, s) for s in inp.stages),
            keep=1.0 - min(kk, e) / e if e > 0 and kk > 0 else 0.0,
            ubatch=inp.ubatch,
            graph_batch=inp.graph_batch,
            eager=inp.eager,
            hop_fixed=boundaries * k.hop_s,
            hop_token=(boundaries - cross) * act / in_node + cross * act / inp.fabric_bandwidth,
            step_s=k.step_s,
            sequence_s=k.sequence_s,
            rows=k.gemm_rows,
            expert_pad=k.expert_rows * e / min(kk, e) if e > 0 and kk > 0 else 0.0,
            overlap=inp.overlap,
            kernels=kernels,
            pipelined=len(inp.stages) if k.decode_pipelined and len(inp.stages) > 1 else 0,
            host=inp.host is not None,
            split=split,
            split_rate=k.split_kv_rate,
            ranks=max(inp.ranks, 1),
            curve=(
                kernels
                if kernels is not None and kernels.experts_only and not inp.ubatch and split is None
                else None
            ),
            shares=plain and not inp.ubatch,
            ubatch_shares=plain and bool(inp.ubatch),
        )

    def eager_at(self, tokens: float) -> bool:
        """Whether a step of `tokens` runs without a CUDA graph: --enforce-eager, or past the
        largest batch captured (the engine then launches every kernel from the host)."""
        return self.eager or (self.graph_batch > 0 and tokens > self.graph_batch)


def stage_parts(
    st: Stepper, c: _Coef, batch: float, context: float, chunk: float, chunk_context: float
) -> tuple[float, float, float, float, float, float, float, float]:
    """(weights, experts, KV, GEMMs, grouped GEMM, attention, overhead, link) seconds of one
    stage's share of a step: `batch` sequences each decoding one token at `context` tokens of
    cache, and `chunk` prompt tokens at `chunk_context` tokens on average before them. Each
    decoding sequence reads its whole cache (a chunk's attention reads its prompt's own, which
    its FLOPs, not its bytes, bound); a step of more tokens than the kernels take at once
    (llama.cpp's ubatch) reads its weights once a pass; a GEMM runs its tokens and its tiles'
    empty rows (its efficiency curve, `Constants.gemm_rows`), a grouped GEMM each expert's
    tokens and its rows; without a CUDA graph (--enforce-eager, or a step past the largest
    batch captured) the kernels' launches count where they outlast the GPU's work."""
    if st.kernels is not None and not st.kernels.experts_only:
        return _measured_parts(st, st.kernels, c, batch, context, chunk, chunk_context)
    n = batch + chunk
    ub = st.ubatch
    passes = max(math.ceil(n / ub), 1) if ub and n > ub else 1
    share = 1.0 - st.keep ** (n / passes) if st.keep else 1.0
    weights = passes * c.dense
    experts = passes * c.experts * share
    kv = c.kv * batch * context + c.state * batch
    if st.split is not None:
        kv = _split_read(st, c, batch, context, c.kv * batch * context) + c.state * batch
    gemm = c.token * (n + passes * st.rows) if n > 0 else 0.0
    grouped = 0.0
    if st.kernels is not None and n > 0 and c.experts:
        # The grouped GEMM at its measured efficiency for the tokens each expert gets.
        eff = min(st.kernels.share * st.kernels.moe.at(n / passes * st.kernels.routed), 1.0)
        experts, grouped = experts / eff, c.expert_token * n / eff
    elif n > 0 and c.expert_token:
        grouped = c.expert_token * (n + passes * st.expert_pad * share)
    attention = c.attention * (batch * context + chunk * chunk_context)
    overhead = passes * c.graph
    if st.eager_at(n) and c.eager > c.graph:
        # Without a graph each kernel is launched from the host: the launches overlap the GPU's
        # work, so they cost only where they outlast it (a small step, not a prompt chunk's).
        busy = max(weights, gemm) + max(experts, grouped) + max(kv, attention)
        overhead += max(passes * (c.eager - c.graph) - busy, 0.0)
    link = c.link_fixed + c.link_token * n
    return weights, experts, kv, gemm, grouped, attention, overhead, link


def _measured_parts(
    st: Stepper, kn: _Kernels, c: _Coef, batch: float, context: float, chunk: float,
    chunk_context: float,
) -> tuple[float, float, float, float, float, float, float, float]:  # fmt: skip
    """`stage_parts` priced by the card's measured kernels: each part's roofline (`_raw_coef`)
    over the efficiency its kernel was measured at for its size. The dense GEMMs by the tokens
    one rank multiplies; the routed experts' grouped GEMM by the tokens each expert gets (n·k/E:
    its bytes are those of the experts the tokens reach, 1 − (1 − k/E)^n of them); decode's
    attention by the sequences × context one rank reads, a prompt chunk's by its prompt's
    length; each layer's two all-reduces and each MoE layer's dispatch and combine by their
    message's bytes."""
    n = batch + chunk
    if n <= 0:
        return 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, c.graph, c.link_fixed
    per_rank = n / kn.ranks
    f = kn.share
    dense = min(f * kn.gemm.at(per_rank), 1.0)
    weights, gemm = c.dense / dense, c.token * n / dense
    experts = grouped = 0.0
    if c.experts:
        share = 1.0 - st.keep**n if st.keep else 1.0
        moe = min(f * kn.moe.at(n * kn.routed), 1.0)
        experts, grouped = c.experts * share / moe, c.expert_token * n / moe
    kv = att = 0.0
    if batch > 0:
        held = batch / kn.ranks * context
        eff = min(f * kn.attention.at(held if held > 0 else 1.0), 1.0)
        kv = (c.kv * batch * context + c.state * batch) / eff
        if st.split is not None:
            read = c.kv * batch * context / eff
            kv = _split_read(st, c, batch, context, read) + c.state * batch / eff
        att = c.attention * batch * context / eff
    if chunk > 0 and chunk_context > 0:
        att += c.attention * chunk * chunk_context / min(f * kn.prefill.at(2 * chunk_context), 1.0)
    overhead = c.graph
    if st.eager_at(n) and c.eager > c.graph:
        busy = max(weights, gemm) + max(experts, grouped) + max(kv, att)
        overhead += max(c.eager - c.graph - busy, 0.0)
    link = c.link_fixed + c.link_token * n
    if kn.allreduce is not None:
        link += 2 * c.layers * kn.allreduce.at(per_rank * kn.act)
    if kn.alltoall is not None and c.moe_layers:
        link += 2 * c.moe_layers * kn.alltoall.at(per_rank * kn.active * kn.act)
    return weights, experts, kv, gemm, grouped, att, overhead, link


def _split_read(st: Stepper, c: _Coef, batch: float, context: float, read: float) -> float:
    """A stage's read of its sequences' caches where a split decode's grid may bound it: the
    longer of `read` (at the card's bandwidth share) and the split decode's blocks' time. Each
    attention rank runs its share of the batch through a grid of its own."""
    sd = st.split
    if sd is None:
        return read
    grid = split_decode_seconds(sd, st.split_rate, c.cache, batch / st.ranks, context)
    return grid if grid > read else read


def _stage_total(st: Stepper, c: _Coef, b: float, ctx: float, t: float, tctx: float) -> float:
    w, e, kv, gemm, grouped, att, ov, link = stage_parts(st, c, b, ctx, t, tctx)
    return max(w, gemm) + max(e, grouped) + max(kv, att) + ov + link


def _experts_measured_total(
    st: Stepper, kn: _Kernels, batch: float, context: float, chunk: float, chunk_context: float
) -> float:
    """The stages' `_stage_total`s summed, for a step of one pass (no ubatch) of `n` > 0 tokens
    whose routed experts alone are priced by their measured curve (`_Kernels.experts_only`, what
    every plan's MoE is): `stage_parts`' own arithmetic, operation for operation, so the sum is
    the same to the last bit (tests/plan/test_speed_experts_curve.py), with the grouped GEMM's
    efficiency, the same for every stage, looked up once. A plan asks for thousands of steps."""
    n = batch + chunk
    share = 1.0 - st.keep**n if st.keep else 1.0
    eff = min(kn.share * kn.moe.at(n * kn.routed), 1.0)
    eager = st.eager_at(n)
    held = batch * context
    attended = held + chunk * chunk_context
    rows = n + st.rows
    total = 0.0
    for c in st.coefs:
        experts = c.experts * share
        grouped = 0.0
        if c.experts:
            experts, grouped = experts / eff, c.expert_token * n / eff
        elif c.expert_token:
            grouped = c.expert_token * (n + st.expert_pad * share)
        w, gemm = c.dense, c.token * rows
        kv = c.kv * batch * context + c.state * batch
        att = c.attention * attended
        overhead = c.graph
        if eager and c.eager > c.graph:
            busy = (gemm if gemm > w else w) + (grouped if grouped > experts else experts)
            busy += att if att > kv else kv
            late = c.eager - c.graph - busy
            overhead += 0.0 if 0.0 > late else late
        link = c.link_fixed + c.link_token * n
        part = (gemm if gemm > w else w) + (grouped if grouped > experts else experts)
        total += part + (att if att > kv else kv) + overhead + link
    return total


def _experts_measured_pair(
    st: Stepper, kn: _Kernels, batch: float, context: float, chunk: float, chunk_context: float
) -> tuple[float, float]:
    """(`_experts_measured_total` of the batch alone, and with `chunk` prompt tokens beside it)
    in one pass over the stages, each worked out as that function works it out (the KV read and
    the weights are the same in both)."""
    n1, n2 = batch + 0.0, batch + chunk
    share1 = 1.0 - st.keep**n1 if st.keep else 1.0
    share2 = 1.0 - st.keep**n2 if st.keep else 1.0
    eff1 = min(kn.share * kn.moe.at(n1 * kn.routed), 1.0)
    eff2 = min(kn.share * kn.moe.at(n2 * kn.routed), 1.0)
    eager1, eager2 = st.eager_at(n1), st.eager_at(n2)
    held = batch * context
    attended1, attended2 = held + 0.0 * 0.0, held + chunk * chunk_context
    rows1, rows2 = n1 + st.rows, n2 + st.rows
    one = two = 0.0
    for c in st.coefs:
        e1, e2 = c.experts * share1, c.experts * share2
        g1 = g2 = 0.0
        if c.experts:
            e1, g1 = e1 / eff1, c.expert_token * n1 / eff1
            e2, g2 = e2 / eff2, c.expert_token * n2 / eff2
        elif c.expert_token:
            g1 = c.expert_token * (n1 + st.expert_pad * share1)
            g2 = c.expert_token * (n2 + st.expert_pad * share2)
        w, gemm1, gemm2 = c.dense, c.token * rows1, c.token * rows2
        kv = c.kv * batch * context + c.state * batch
        att1, att2 = c.attention * attended1, c.attention * attended2
        ov1 = ov2 = c.graph
        if c.eager > c.graph:
            if eager1:
                busy = (gemm1 if gemm1 > w else w) + (g1 if g1 > e1 else e1)
                busy += att1 if att1 > kv else kv
                late = c.eager - c.graph - busy
                ov1 += 0.0 if 0.0 > late else late
            if eager2:
                busy = (gemm2 if gemm2 > w else w) + (g2 if g2 > e2 else e2)
                busy += att2 if att2 > kv else kv
                late = c.eager - c.graph - busy
                ov2 += 0.0 if 0.0 > late else late
        part = (gemm1 if gemm1 > w else w) + (g1 if g1 > e1 else e1)
        one += part + (att1 if att1 > kv else kv) + ov1 + (c.link_fixed + c.link_token * n1)
        part = (gemm2 if gemm2 > w else w) + (g2 if g2 > e2 else e2)
        two += part + (att2 if att2 > kv else kv) + ov2 + (c.link_fixed + c.link_token * n2)
    return one, two


# The inputs' Stepper, worked out on first use and kept beside them.
stepper: ByIdentity[SpeedInputs, Stepper] = ByIdentity(Stepper.of, 4096)


def _time(parts: tuple[float, float, float, float, float, float, float, float]) -> Time:
    w, e, kv, gemm, grouped, att, ov, link = parts
    return Time(memory=w, compute=gemm, overhead=ov, link=link, kv=kv, attention=att,
                experts=e, expert_compute=grouped)  # fmt: skip


def _host(inp: SpeedInputs, batch: float, context: float, chunk: float = 0.0) -> Time:
    h = inp.host
    if h is None:
        return Time()
    k = inp.constants
    n = batch + chunk
    share = expert_share(inp.experts, inp.experts_active, n)
    bw = h.ram_bandwidth * min(k.weight_efficiency, 1.0)
    if chunk and inp.stages and n >= 32:
        # llama.cpp multiplies a big batch's host-kept weights on the card, copying them up over
        # PCIe for every ubatch (ggml's op offload, from 32 tokens a batch).
        passes = max(math.ceil(n / inp.ubatch), 1) if inp.ubatch else 1
        up = passes * (h.dense_bytes + h.expert_bytes) / inp.pcie_bandwidth
        _, _, rate = _rates(inp)
        return Time(compute=2 * h.params * n / rate if rate else 0.0, link=up)
    memory = (h.dense_bytes + h.expert_bytes * share + h.kv_bytes_per_token * context * batch) / bw
    crossings = h.crossings if inp.stages else 0
    link = crossings * n * inp.hidden_size * inp.activation_bytes / inp.pcie_bandwidth
    return Time(memory=memory, overhead=h.layers * k.layer_s + crossings * k.hop_s, link=link)


@dataclass(frozen=True)
class Cost:
    """Parts that run one after another (stages, hand-offs, the host): their times add, each
    part's own memory and compute overlapping within it, not across parts. Where the engine
    overlaps its CPU work with the GPU's (`overlap`), the step takes the longer of the two."""

    parts: tuple[Time, ...]
    overlap: bool = False

    @property
    def total(self) -> float:
        gpu = sum(p.gpu for p in self.parts)
        cpu = sum(p.scheduling for p in self.parts)
        return max(gpu, cpu) if self.overlap else gpu + cpu

    @property
    def bound(self) -> str:
        s = self.summed
        if self.overlap:
            if s.scheduling < s.gpu:
                # `replace(s, scheduling=0.0).bound`, without replace's walk over the fields.
                return Time(s.memory, s.compute, s.overhead, 0.0, s.link, s.kv, s.attention,
                            s.experts, s.expert_compute).bound  # fmt: skip
            return "compute"
        return s.bound

    @property
    def summed(self) -> Time:
        """`sum(self.parts, Time())`, field by field in the same order (the same figures), with
        no Time made for each part added: a plan asks for thousands."""
        m = c = o = sc = li = kv = a = e = ec = 0.0
        for p in self.parts:
            m += p.memory
            c += p.compute
            o += p.overhead
            sc += p.scheduling
            li += p.link
            kv += p.kv
            a += p.attention
            e += p.experts
            ec += p.expert_compute
        return Time(m, c, o, sc, li, kv, a, e, ec)


def step(
    inp: SpeedInputs, batch: float, context: float | None = None, chunk: float = 0.0,
    chunk_context: float = 0.0,
) -> Cost:  # fmt: skip
    """Seconds one replica takes to run one micro-batch of `batch` decoding sequences and
    `chunk` prompt tokens through every stage, one after another, with what each part cost."""
    st = stepper(inp)
    ctx = inp.context if context is None else context
    parts = [_time(stage_parts(st, c, batch, ctx, chunk, chunk_context)) for c in st.coefs]
    n = batch + chunk
    parts += [
        Time(overhead=st.hop_fixed, link=st.hop_token * n),
        _host(inp, batch, ctx, chunk),
        Time(scheduling=st.step_s + st.sequence_s * batch),
    ]
    return Cost(tuple(parts), overlap=st.overlap)


def step_total(
    inp: SpeedInputs, batch: float, context: float, chunk: float = 0.0, chunk_context: float = 0.0
) -> float:
    """`step(...).total`, without its parts: what a solver asks thousands of times. The sums of
    `stage_parts`, written out once for every stage (tests/plan/test_load.py holds the two
    equal)."""
    st = stepper(inp)
    n = batch + chunk
    gpu = st.hop_fixed + st.hop_token * n
    cpu = st.step_s + st.sequence_s * batch
    if n > 0 and st.curve is not None:
        gpu += _experts_measured_total(st, st.curve, batch, context, chunk, chunk_context)
    elif n <= 0 or not st.shares:
        gpu += sum(_stage_total(st, c, batch, context, chunk, chunk_context) for c in st.coefs)
    else:
        eager = st.eager_at(n)
        share = 1.0 - st.keep**n if st.keep else 1.0
        held = batch * context
        attended = held + chunk * chunk_context
        rows = n + st.rows
        grouped = n + st.expert_pad * share
        for c in st.coefs:
            w, g, e, eg = c.dense, c.token * rows, c.experts * share, c.expert_token * grouped
            kv = c.kv * held + c.state * batch
            att = c.attention * attended
            busy = (w if w > g else g) + (e if e > eg else eg) + (kv if kv > att else att)
            gpu += busy + c.graph + c.link_fixed + c.link_token * n
            if eager and c.eager - c.graph > busy:
                # stage_parts' launches past a graph, where they outlast the GPU's work.
                gpu += c.eager - c.graph - busy
    if inp.host is not None:
        gpu += _host(inp, batch, context, chunk).gpu
    if st.overlap:
        return cpu if cpu > gpu else gpu
    return gpu + cpu


def decode_step(inp: SpeedInputs, batch: float, context: float | None = None) -> Cost:
    """Seconds one replica takes to give each of `batch` sequences one more token, one stage
    after another, with what each part cost."""
    return step(inp, batch, context)


def _pipelined(inp: SpeedInputs, batch: float) -> int:
    """Micro-batches in flight: one a stage where the engine pipelines, else one."""
    pp = stepper(inp).pipelined
    if pp and batch > 1:
        return int(min(pp, batch))
    return 1


def round_total(
    inp: SpeedInputs, batch: float, context: float, chunk: float = 0.0, chunk_context: float = 0.0
) -> float:
    """`round_time(...)[0]`, without the parts."""
    n = _pipelined(inp, batch)
    if n == 1:
        return step_total(inp, batch, context, chunk, chunk_context)
    st = stepper(inp)
    micro, part = batch / n, chunk / n
    one = step_total(inp, micro, context, part, chunk_context)
    slowest = max(_stage_total(st, c, micro, context, part, chunk_context) for c in st.coefs)
    return max(one, n * slowest)


def round_pair(
    inp: SpeedInputs, batch: float, context: float, chunk: float, chunk_context: float
) -> tuple[float, float]:
    """(`round_total` of the batch alone, and with `chunk` prompt tokens beside it), worked out in
    one pass where the step is one micro-batch on the cards alone: the serving model asks for both
    at every step of its fixed point."""
    st = stepper(inp)
    n = batch + chunk
    kn = st.curve
    if (
        kn is not None
        and batch > 0
        and n > 0
        and not st.host
        and (not st.pipelined or batch <= 1 or int(min(st.pipelined, batch)) == 1)
    ):
        # `round_total`'s two `step_total`s, each as it works it out, in one pass.
        one, two = _experts_measured_pair(st, kn, batch, context, chunk, chunk_context)
        cpu = st.step_s + st.sequence_s * batch
        plain = st.hop_fixed + st.hop_token * (batch + 0.0) + one
        full = st.hop_fixed + st.hop_token * n + two
        if st.overlap:
            return (cpu if cpu > plain else plain), (cpu if cpu > full else full)
        return plain + cpu, full + cpu
    if (
        not st.shares
        or st.eager_at(n)
        or batch <= 0
        or inp.host is not None
        or _pipelined(inp, batch) > 1
    ):
        return (
            round_total(inp, batch, context),
            round_total(inp, batch, context, chunk, chunk_context),
        )
    cpu = st.step_s + st.sequence_s * batch
    plain = st.hop_fixed + st.hop_token * batch
    full = st.hop_fixed + st.hop_token * n
    alone = 1.0 - st.keep**batch if st.keep else 1.0
    share = 1.0 - st.keep**n if st.keep else 1.0
    held = batch * context
    attended = held + chunk * chunk_context
    rows_p, rows_f = batch + st.rows, n + st.rows
    grouped_p, grouped_f = batch + st.expert_pad * alone, n + st.expert_pad * share
    for c in st.coefs:
        kv = c.kv * held + c.state * batch
        rest = c.graph + c.link_fixed
        w, g, e, eg = c.dense, c.token * rows_p, c.experts * alone, c.expert_token * grouped_p
        att = c.attention * held
        plain += (w if w > g else g) + (e if e > eg else eg) + (kv if kv > att else att) + rest
        plain += c.link_token * batch
        g, e, eg = c.token * rows_f, c.experts * share, c.expert_token * grouped_f
        att = c.attention * attended
        full += (w if w > g else g) + (e if e > eg else eg) + (kv if kv > att else att) + rest
        full += c.link_token * n
    if st.overlap:
        return (cpu if cpu > plain else plain), (cpu if cpu > full else full)
    return plain + cpu, full + cpu


# (a round's time alone, and with a chunk beside it) for (batch, context, chunk, chunk_context).
PairPrice = Callable[[float, float, float, float], tuple[float, float]]


def _curve_terms(st: Stepper) -> tuple[tuple[float, ...], ...]:
    """Each stage's coefficients in the order the bound curve pricers unpack them."""
    return tuple(
        (c.experts, c.expert_token, c.dense, c.token, c.kv, c.state, c.attention, c.graph,
         c.eager, c.link_fixed, c.link_token)
        for c in st.coefs
    )  # fmt: skip


def _pair_pricer(inp: SpeedInputs) -> PairPrice:
    st = stepper(inp)
    kn = st.curve

    def general(
        batch: float, context: float, chunk: float, chunk_context: float
    ) -> tuple[float, float]:
        return round_pair(inp, batch, context, chunk, chunk_context)

    if st.ubatch_shares and not st.host:
        # `round_pair` prices such a step as two `round_total`s.
        total = _ubatch_total(inp, st)

        def apart(
            batch: float, context: float, chunk: float, chunk_context: float
        ) -> tuple[float, float]:
            return total(batch, context, 0.0, 0.0), total(batch, context, chunk, chunk_context)

        return apart
    if kn is None or st.host:
        return general
    pipelined = st.pipelined
    srows = st.rows
    eager_all, graph_batch = st.eager, st.graph_batch
    hop_fixed, hop_token = st.hop_fixed, st.hop_token
    step_s, sequence_s, overlap = st.step_s, st.sequence_s, st.overlap
    keep, pad = st.keep, st.expert_pad
    moe_at, kshare, routed = kn.moe.at, kn.share, kn.routed
    # Whether a stage's experts are priced by their curve (its efficiency looked up).
    reached = any(c.experts for c in st.coefs)
    stages = _curve_terms(st)

    def measured(
        batch: float, context: float, chunk: float, chunk_context: float
    ) -> tuple[float, float]:
        n = batch + chunk
        if not (batch > 0 and n > 0) or (
            pipelined and batch > 1 and int(min(pipelined, batch)) != 1
        ):
            return round_pair(inp, batch, context, chunk, chunk_context)
        # `_experts_measured_pair`, operation for operation.
        n1, n2 = batch + 0.0, n
        share1 = 1.0 - keep**n1 if keep else 1.0
        share2 = 1.0 - keep**n2 if keep else 1.0
        eff1 = eff2 = 1.0
        if reached:
            eff1 = kshare * moe_at(n1 * routed)
            eff1 = 1.0 if 1.0 < eff1 else eff1
            eff2 = kshare * moe_at(n2 * routed)
            eff2 = 1.0 if 1.0 < eff2 else eff2
        eager1 = eager_all or (graph_batch > 0 and n1 > graph_batch)
        eager2 = eager_all or (graph_batch > 0 and n2 > graph_batch)
        held = batch * context
        attended1, attended2 = held + 0.0 * 0.0, held + chunk * chunk_context
        rows1, rows2 = n1 + srows, n2 + srows
        one = two = 0.0
        for (experts, expert_token, w, token, kvc, state, attention, graph, eager, link_fixed,
             link_token) in stages:  # fmt: skip
            e1, e2 = experts * share1, experts * share2
            g1 = g2 = 0.0
            if experts:
                e1, g1 = e1 / eff1, expert_token * n1 / eff1
                e2, g2 = e2 / eff2, expert_token * n2 / eff2
            elif expert_token:
                g1 = expert_token * (n1 + pad * share1)
                g2 = expert_token * (n2 + pad * share2)
            gemm1, gemm2 = token * rows1, token * rows2
            kv = kvc * batch * context + state * batch
            att1, att2 = attention * attended1, attention * attended2
            m1 = (gemm1 if gemm1 > w else w) + (g1 if g1 > e1 else e1)
            m2 = (gemm2 if gemm2 > w else w) + (g2 if g2 > e2 else e2)
            a1 = att1 if att1 > kv else kv
            a2 = att2 if att2 > kv else kv
            ov1 = ov2 = graph
            if eager > graph:
                if eager1:
                    late = eager - graph - (m1 + a1)
                    ov1 += 0.0 if 0.0 > late else late
                if eager2:
                    late = eager - graph - (m2 + a2)
                    ov2 += 0.0 if 0.0 > late else late
            one += m1 + a1 + ov1 + (link_fixed + link_token * n1)
            two += m2 + a2 + ov2 + (link_fixed + link_token * n2)
        cpu = step_s + sequence_s * batch
        plain = hop_fixed + hop_token * n1 + one
        full = hop_fixed + hop_token * n2 + two
        if overlap:
            return (cpu if cpu > plain else plain), (cpu if cpu > full else full)
        return plain + cpu, full + cpu

    return measured


# `round_pair` bound to `inp`: the same figures to the last bit, with what depends on `inp`
# alone looked up once. A rate's fixed point asks for a pair a dozen times and a plan for
# thousands of rates, and on the path every plan's step takes (the routed experts alone priced
# by their curve, one micro-batch on the cards) the lookups had cost more than the arithmetic:
# there each stage's sums are `_experts_measured_pair`'s, operation for operation, a dense
# model's too (its experts' terms are each 0, and x + 0.0 is x)
# (tests/plan/test_speed_experts_curve.py holds the two equal).
pair_pricer: ByIdentity[SpeedInputs, PairPrice] = ByIdentity(_pair_pricer, 4096)


def _ubatch_total(inp: SpeedInputs, st: Stepper) -> TotalPrice:
    """`round_total` of a step priced by the constants' shares (no kernel curves) in passes of
    the engine's ubatch (llama.cpp's), with no host part: `step_total`'s sum of each stage's
    `_stage_total`, `stage_parts`' arithmetic operation for operation (max(a, b) as the builtin
    picks it: b only where b > a), bound once."""
    ub, keep, srows, pad = st.ubatch, st.keep, st.rows, st.expert_pad
    pipelined, eager_all, graph_batch = st.pipelined, st.eager, st.graph_batch
    hop_fixed, hop_token = st.hop_fixed, st.hop_token
    step_s, sequence_s, overlap = st.step_s, st.sequence_s, st.overlap
    stages = tuple(
        (c.dense, c.experts, c.kv, c.state, c.token, c.expert_token, c.attention, c.graph,
         c.eager, c.link_fixed, c.link_token)
        for c in st.coefs
    )  # fmt: skip

    def total(batch: float, context: float, chunk: float, chunk_context: float) -> float:
        if pipelined and batch > 1 and int(min(pipelined, batch)) != 1:
            return round_total(inp, batch, context, chunk, chunk_context)
        n = batch + chunk
        passes = max(math.ceil(n / ub), 1) if n > ub else 1
        share = 1.0 - keep ** (n / passes) if keep else 1.0
        eager_n = eager_all or (graph_batch > 0 and n > graph_batch)
        attended = batch * context + chunk * chunk_context
        summed = 0.0
        for (dense, experts, kvc, state, token, expert_token, attention, graph, eager,
             link_fixed, link_token) in stages:  # fmt: skip
            weights = passes * dense
            reached = passes * experts * share
            kv = kvc * batch * context + state * batch
            gemm = token * (n + passes * srows) if n > 0 else 0.0
            grouped = 0.0
            if n > 0 and expert_token:
                grouped = expert_token * (n + passes * pad * share)
            att = attention * attended
            overhead = passes * graph
            m = (gemm if gemm > weights else weights) + (grouped if grouped > reached else reached)
            a = att if att > kv else kv
            if eager_n and eager > graph:
                late = passes * (eager - graph) - (m + a)
                overhead += 0.0 if 0.0 > late else late
            summed += m + a + overhead + (link_fixed + link_token * n)
        gpu = hop_fixed + hop_token * n
        cpu = step_s + sequence_s * batch
        gpu += summed
        if overlap:
            return cpu if cpu > gpu else gpu
        return gpu + cpu

    return total


# A round's time for (batch, context, chunk, chunk_context).
TotalPrice = Callable[[float, float, float, float], float]


def _total_pricer(inp: SpeedInputs) -> TotalPrice:
    st = stepper(inp)
    kn = st.curve

    def general(batch: float, context: float, chunk: float, chunk_context: float) -> float:
        return round_total(inp, batch, context, chunk, chunk_context)

    if st.ubatch_shares and not st.host:
        return _ubatch_total(inp, st)
    if kn is None or st.host:
        return general
    pipelined = st.pipelined
    hop_fixed, hop_token = st.hop_fixed, st.hop_token
    step_s, sequence_s, overlap = st.step_s, st.sequence_s, st.overlap
    srows, eager_all, graph_batch = st.rows, st.eager, st.graph_batch
    keep, pad = st.keep, st.expert_pad
    moe_at, kshare, routed = kn.moe.at, kn.share, kn.routed
    reached = any(c.experts for c in st.coefs)
    stages = _curve_terms(st)

    def measured(batch: float, context: float, chunk: float, chunk_context: float) -> float:
        n = batch + chunk
        if n <= 0 or (pipelined and batch > 1 and int(min(pipelined, batch)) != 1):
            return round_total(inp, batch, context, chunk, chunk_context)
        gpu = hop_fixed + hop_token * n
        cpu = step_s + sequence_s * batch
        # `_experts_measured_total`, operation for operation.
        share = 1.0 - keep**n if keep else 1.0
        eff = 1.0
        if reached:
            eff = kshare * moe_at(n * routed)
            eff = 1.0 if 1.0 < eff else eff
        eager_n = eager_all or (graph_batch > 0 and n > graph_batch)
        attended = batch * context + chunk * chunk_context
        tokens = n + srows
        total = 0.0
        for (experts, expert_token, w, token, kvc, state, attention, graph, eager, link_fixed,
             link_token) in stages:  # fmt: skip
            e = experts * share
            g = 0.0
            if experts:
                e, g = e / eff, expert_token * n / eff
            elif expert_token:
                g = expert_token * (n + pad * share)
            gemm = token * tokens
            kv = kvc * batch * context + state * batch
            att = attention * attended
            m = (gemm if gemm > w else w) + (g if g > e else e)
            a = att if att > kv else kv
            overhead = graph
            if eager_n and eager > graph:
                late = eager - graph - (m + a)
                overhead += 0.0 if 0.0 > late else late
            total += m + a + overhead + (link_fixed + link_token * n)
        gpu += total
        if overlap:
            return cpu if cpu > gpu else gpu
        return gpu + cpu

    return measured


# `round_total` bound to `inp`, as `pair_pricer` binds `round_pair`: the same figures to
# the last bit, `_experts_measured_total`'s sums on the path every plan's step takes (a dense
# model's too: its experts' terms are each 0).
total_pricer: ByIdentity[SpeedInputs, TotalPrice] = ByIdentity(_total_pricer, 4096)


def round_time(
    inp: SpeedInputs, batch: float, context: float | None = None, chunk: float = 0.0,
    chunk_context: float = 0.0,
) -> tuple[float, Cost]:  # fmt: skip
    """Seconds until every one of `batch` sequences has one more token (a TPOT), with `chunk`
    prompt tokens carried beside them, and one micro-batch's parts.

    An engine that pipelines keeps up to one micro-batch a stage in flight: while one is in a
    stage the others are in the rest, so a round takes the longer of one micro-batch's way
    through every stage and the slowest stage's time for all of them.
    """
    ctx = inp.context if context is None else context
    n = _pipelined(inp, batch)
    one = step(inp, batch / n, ctx, chunk / n, chunk_context)
    return round_total(inp, batch, ctx, chunk, chunk_context), one


def prefill_time(inp: SpeedInputs, prompt: int | None = None) -> Cost | None:
    """Seconds one prompt takes to prefill alone, by what spent them; None without FLOPs.

    The prompt goes through in steps of `prefill_chunk` tokens, each reading the weights once
    (and, for a MoE, the experts its tokens touch) and paying each layer's fixed cost; its
    FLOPs are 2 a parameter a token plus causal attention's 2 per query element per token².
    Stages run one after another: neither engine overlaps one prompt's chunks across stages
    (llama.cpp's PR #6017 pipeline measured 14,723 tok/s on 8 A100s where overlapped stages
    would give several times more; see docs/accuracy.md).
    """
    _, _, rate = _rates(inp)
    if rate is None or (inp.host is not None and not inp.stages):
        return None  # a CPU-only plan: its prefill needs the CPU's FLOPs, not modelled
    p = max(prompt or inp.prompt_tokens or inp.context, 1)
    chunk = min(p, inp.prefill_chunk or inp.constants.prefill_chunk)
    n = math.ceil(p / chunk)
    # n even chunks; over the prompt a token attends to p / 2 tokens before it on average.
    one = step(inp, 0.0, 0.0, p / n, p / 2)
    parts = tuple(t.scaled(n) for t in one.parts[:-1]) + (Time(),)
    return Cost(parts)


def estimate(inp: SpeedInputs) -> Speed:
    """Decode for one sequence and at `batch`, prefill and TTFT, with their bounds."""
    if inp.tp < 1 or inp.replicas < 1 or inp.nodes < 1 or inp.ranks < 1:
        raise ValueError("tp, replicas, ranks and nodes must be at least 1")
    if not inp.stages and inp.host is None:
        raise ValueError("a speed needs at least one stage or a host part")
    k = inp.constants
    one = decode_step(inp, 1)
    c = max(inp.batch, 1)
    busy = min(inp.replicas, c)
    b = c / busy
    round_s, at = round_time(inp, b)
    pre = prefill_time(inp)
    p = max(inp.prompt_tokens or inp.context, 1)
    chunk = min(p, inp.prefill_chunk or k.prefill_chunk)
    assumptions = (
        f"decode at {inp.context:,} tokens of context a sequence",
        f"{inp.batch} sequence{'s' if inp.batch != 1 else ''} decoding at once over "
        f"{inp.replicas} replica{'s' if inp.replicas != 1 else ''}, no prefill between",
        f"prefill of {p:,} tokens alone, {chunk:,} a step",
        f"flash attention {'on' if inp.flash_attention else 'off'}",
        f"{inp.compute_dtype} tensor rate for prefill",
        *(["a MoE's experts chosen at random: 1 − (1 − k/E)^b of them read a step of b tokens"]
          if inp.experts else []),
    )  # fmt: skip
    # The prefill rate is the prompt over its time to the first token, fixed cost included: the
    # two figures a plan prints then agree, and neither implies more than the card's peak.
    ttft = pre.total + k.ttft_s if pre else None
    return Speed(
        decode_tokens_per_s=1.0 / one.total,
        decode_tokens_per_s_total=busy * b / round_s,
        prefill_tokens_per_s=p / ttft if ttft else None,
        ttft_s=ttft,
        bound=one.bound,
        bound_total=at.bound,
        bound_prefill=pre.bound if pre else None,
        assumptions=assumptions,
    )


# --- The convenience builder the engines call ---------------------------------------------------


def _split(n: int, parts: int) -> list[int]:
    """n layers over `parts` stages by count, the remainder to the first stages."""
    base, extra = divmod(n, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def _state_per_layer(model: Model) -> float:
    """A linear layer's state, one sequence, averaged over the model's layers."""
    linear = [g for g in model.layer_groups if g.kind is AttentionKind.LINEAR]
    total = sum(g.state_bytes * g.layers for g in linear)
    return total / model.layers if model.layers else 0.0


def inputs_for(
    model: Model,
    weights: WeightLayout,
    card: CardSpec,
    *,
    constants: Constants,
    context: int,
    kv_bytes_per_token: float,
    tp: int = 1,
    pp: int = 1,
    replicas: int = 1,
    ranks: int = 1,
    ep: bool = False,
    nodes: int = 1,
    batch: int = 1,
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
    ubatch: int = 0,
    eager: bool = False,
    graph_batch: int = 0,
    overlap: bool = False,
    curves: KernelCurves | None = None,
    curve_dtype: str = "bf16",
    curves_experts_only: bool = False,
) -> SpeedInputs:
    """SpeedInputs for a replica of `tp` × `pp` cards (vLLM, SGLang) or of llama.cpp's layer split
    over `pp` cards (tp 1) with `gpu_layers` of the layers on them (None: all, and the output
    layer) and the routed experts of the first `cpu_moe` layers on the host; `ranks` data-parallel
    attention ranks of `tp` × `pp` cards each share one set of routed experts, sharded over all
    of them (a card holds 1/(tp·ranks) of the experts).

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
    state = _state_per_layer(model)
    # A MoE's routed experts a token multiplies: all its experts' parameters are the total less
    # the active (k of E of them are active), spread over the layers as their bytes are.
    e, k_act = (model.experts or 0), (model.experts_active or 0)
    routed = 0.0
    if model.is_moe and model.active_params and model.params and e > k_act > 0:
        routed = (model.params - model.active_params) * e / (e - k_act) * k_act / e
    all_expert_bytes = sum(weights.expert_bytes) or 1
    # The layers `kv_bytes_per_token` is the cost of: the fullest card's, or the host's alone.
    fullest = max(stage_layers, default=0) or max(first, 1)
    experts_over = tp * max(ranks, 1)
    # Kernels a dense and a MoE layer launch in a graphed decode step (their fixed costs where
    # the constants price a kernel, Constants.kernel_s).
    kern = layer_kernels(model, compute_dtype == "fp8" and card.fp8_flops is not None)

    stages: list[Stage] = []
    at = first
    for i, n in enumerate(stage_layers):
        idx = range(at, at + n)
        at += n
        dense = sum(weights.layer_bytes[j] - weights.expert_bytes[j] for j in idx)
        # Routed experts of the first `cpu_moe` layers stay on the host.
        experts = sum(weights.expert_bytes[j] for j in idx if j >= cpu_moe)
        moe = sum(1 for j in idx if weights.expert_bytes[j] and j >= cpu_moe)
        last = i == len(stage_layers) - 1
        holds_head = last and (gpu_layers is None or gpu_layers > layers)
        stages.append(
            Stage(
                layers=n,
                dense_bytes=(dense + (head if holds_head else 0)) / tp,
                expert_bytes=experts / experts_over,
                kv_bytes_per_token=kv_bytes_per_token * n / fullest,
                params=(per_layer_params * n + (vocab_params if holds_head else 0)) / tp,
                attention_width=width_per_layer * n / tp,
                moe_layers=moe,
                state_bytes=state * n / tp,
                expert_params=routed * experts / all_expert_bytes / tp,
                kernels=(n - moe) * kern.dense + moe * kern.moe,
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
    spans = tp > 1 or len(stages) > 1 or ranks > 1
    return SpeedInputs(
        constants=constants,
        stages=tuple(stages),
        memory_bandwidth=card.memory_bandwidth,
        flops=flops,
        compute_dtype=compute_dtype,
        tp=tp,
        replicas=replicas,
        ranks=max(ranks, 1),
        nodes=nodes,
        # Cards with no link of their own ("none") exchange over PCIe: its latency is charged,
        # as its bandwidth is (below), never none at all.
        link=(card.link_family if card.link_family != "none" else "pcie") if spans else "none",
        link_bandwidth=card.link_bandwidth or card.pcie_bandwidth,
        fabric_bandwidth=fabric_bandwidth,
        pcie_bandwidth=card.pcie_bandwidth,
        host=host,
        experts=(model.experts or 0) if model.is_moe else 0,
        experts_active=(model.experts_active or 0) if model.is_moe else 0,
        hidden_size=model.hidden_size or 0,
        context=context,
        batch=batch,
        prompt_tokens=prompt_tokens,
        flash_attention=flash_attention,
        prefill_chunk=prefill_chunk,
        quantized=quantized,
        ubatch=ubatch,
        eager=eager,
        graph_batch=graph_batch,
        overlap=overlap,
        curves=curves,
        curve_dtype=curve_dtype,
        curves_experts_only=curves_experts_only,
        attention_flops=card.bf16_flops,
        mla=any(g.kind is AttentionKind.MLA for g in model.layer_groups),
    )


def pick(table: dict[str, Constants], family: str) -> Constants:
    """An engine's constants for a card family: the family's own row, else its vendor's
    ("nvidia-hopper" → "nvidia"), else the table's "default"."""
    return table.get(family) or table.get(family.split("-")[0]) or table["default"]
