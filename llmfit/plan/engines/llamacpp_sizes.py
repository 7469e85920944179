"""llama.cpp: what each device holds when llama-server places a GGUF file's layers.

Per device: weights by layer placement + KV of the layers it holds + compute buffer + runtime
overhead. Each rule reproduces llama.cpp as ../shared/ENGINES.md (sections f and g) reads it:

- Layers (`llama_model::load_tensors`, src/llama-model.cpp): with `-ngl N`, the last N of the
  n_layer repeating layers go to the cards, and the output layer (index n_layer) too only when
  N ≥ n_layer + 1. Across cards they split by COUNT: layer il (counted from the first offloaded,
  over act = min(N, n_layer + 1) units) goes to the first card whose cumulative split fraction
  exceeds il / act; with equal `--tensor-split 1,1,…` that is card ⌊il·k / act⌋. `token_embd`
  always stays on the host; with tied embeddings the output layer's device gets a copy of it.
- `--n-cpu-moe K` keeps `blk.{0..K-1}.ffn_{up,down,gate}_exps` on the host whatever the layer's
  device (LLM_FFN_EXPS_REGEX overrides).
- KV (`llama_kv_cache`, `llama_kv_cache_iswa`, `llama_memory_recurrent`): each layer's cache is on
  that layer's device. n_ctx is padded to 256. Full layers: n_head_kv × (n_embd_k + n_embd_v) ×
  cells × 2 B (f16, the default cache type). Sliding-window layers: cells =
  pad256(min(n_ctx, n_swa × n_seq + n_ubatch)). MLA: K only, (kv_lora_rank + rope) × 2 B.
  Recurrent layers: a fixed f32 state per sequence slot. That is the unified cache of
  llama-server's auto slots (tools/server/server.cpp: n_parallel auto → 4 slots, kv_unified
  true). With `--parallel N` given, the cache is not unified: llama_context gives each of the N
  streams n_ctx_seq = pad256(n_ctx / N) cells (src/llama-context.cpp), and a sliding-window
  layer keeps pad256(min(n_ctx_seq, n_swa + n_ubatch)) in each (src/llama-kv-cache-iswa.cpp:
  `n_swa*(unified ? n_seq_max : 1) + n_ubatch`; llama_kv_cache's tensors are kv_size × n_stream),
  so N slots hold N windows of their own. Both as llama-cpp-python 0.3.36 vendors llama.cpp.
- Compute buffer (graph reserve for one ubatch, with flash attention, which the command turns
  on). On a card (`compute_bytes`): 4 B × n_ubatch × (n_embd + n_ff) on every card that holds a
  layer, plus 4 B × n_ubatch × n_vocab of logits on the card holding the output layer. Checked
  against the CUDA records (../shared/calibration/engine-logs.jsonl; docs/accuracy.md has the
  table): GLM-Z1-32B IQ4_XS at ub 512 (vocab 151,552, n_embd 6,144, n_ff 23,040) gives 4 × 512 ×
  180,736 = 353.00 MiB, and the log says "CUDA0 compute buffer size = 353.00 MiB"; Qwen3-30B-A3B
  (vocab 151,936, n_embd 2,048, feed_forward_length 6,144) gives 312.75 MiB against the logged
  304.75 (ik_llama.cpp; +8 MiB, on the safe side). No card was at hand to measure more.
- The host's compute buffer where the host runs layers (`cpu_compute_bytes`: a CPU-only plan, or
  the host's part of a partial offload) is llama.cpp's CPU backend's, FITTED to what llama.cpp
  (llama-cpp-python 0.3.36's vendored build, 2026) printed for the engine suite's 40 runs
  (tests/engine: llama, qwen3, qwen3moe, gemma3 and deepseek2 at n_embd 256 to 4,096, -c 512 to
  32,768, -ub 256 and 512, 4 slots, flash attention on). The graph allocator reuses memory, so the
  buffer is its largest phase: the logits, 4 B × n_ubatch × (n_vocab + 2 × n_embd), or a layer's,
  4 B × n_ubatch × (3 × n_ff + 4 × n_embd) plus the f16 KQ mask, 2 B × n_ubatch × n_ctx. Error:
  within the 0.01 MiB printed for every llama-layout run (llama, and each small model's logits
  phase); within 2.3 % for gemma3, 3.1 % for small deepseek2, −7.1 to +5.8 % for deepseek2 at
  n_embd 4,096 and +6.4 % for qwen3moe at 32k. It under-counts Qwen3's dense layer (q/k norms
  over heads of 128) where a layer, not the logits, is the peak: llama.cpp's allocator packs it
  less tightly than the llama layout the fit follows: the fit is 19-25 % under llama.cpp at n_embd
  2,048 with 32 heads (the suite marks that case as a known miss), 7-17 % under in exploratory runs
  at n_embd 4,096, and not monotonically in n_ctx (one such shape needed less at -c 8192 than at
  512), so no simple term fits it. Real models' large vocabularies usually make the logits the
  peak (Qwen3-4B: 306.75 MiB of logits against 81 MiB for a layer and its mask at -c 4096), where
  the fit is exact. The formula it replaces (the card's, with no mask) was 1.6 % over on the small
  models but 15 % under at n_embd 4,096 and, having no n_ctx term, 60 % under at -c 131072
  (98.5 MiB against 244.01).
- Where the cards run every layer, the host still holds the graph's inputs (`host_inputs_bytes`,
  the `CUDA_Host compute buffer`): an f32 KQ mask of n_ctx × n_ubatch and the ubatch's input
  embeddings, 4 B × n_ubatch × (n_ctx + n_embd). All four CUDA records agree to 0.01 MiB (GLM-Z1
  76.01, Qwen3-30B-A3B 68.01, DeepSeek-R1-Distill-Llama-8B 24.01, Phi-3-mini 7.00 MiB).
- What the engine suite found besides: weights (`model buffer size`, mmap'd) are the header's
  tensor bytes exactly, and KV is this module's formula exactly, for every architecture it loads
  (full attention, sliding windows of period 6, MLA's K-only cache) at every size it ran; nothing
  in those two needed changing. llama.cpp also keeps a host `output buffer` of n_vocab × 4 B a
  slot (0.49 MiB for the suite's 32,000 tokens and 4 slots), which is not charged.
- Runtime overhead: the CUDA context, cuBLAS workspace and the pool allocator's slack, which
  llama.cpp does not log: ENGINES.md g puts it at 0.3–0.5 GiB a card; we charge the top, 512 MiB,
  on every card, because every card pays its own.

Not modelled, for want of measurements: pipeline parallelism's extra compute copies (n_copies =
4 with every layer on several cards; ENGINES.md g gives no sizes, and since PR #16748, Oct 2025,
llama.cpp retries without pipeline parallelism when they do not fit), and the larger compute
buffer partial offload can need when it copies host weights up to the card for big batches.
"""

from __future__ import annotations

from dataclasses import dataclass

from llmfit.plan.artifact import GgufLayout
from llmfit.plan.fleet import MIB
from llmfit.plan.model import AttentionKind, LayerGroup

# llama-server's defaults that the plan relies on and the command does not change.
KV_ELEMENT_BYTES = 2  # --cache-type-k/-v f16
N_UBATCH = 512  # --ubatch-size
# --parallel auto = 4 slots sharing one unified pool of --ctx-size cells (PR #16736): the pool is
# the same size as one slot's would be, but SWA windows and recurrent states are kept per slot.
N_SEQ = 4
CTX_PAD = 256  # llama_context: n_ctx = GGML_PAD(n_ctx, 256)
RUNTIME_OVERHEAD = 512 * MIB


def pad(n: int, to: int = CTX_PAD) -> int:
    return -(-n // to) * to


@dataclass(frozen=True)
class Placement:
    """Where llama.cpp is told to put things: `-ngl`, the cards sharing them, `--n-cpu-moe`."""

    gpu_layers: int
    cards: int
    cpu_moe: int = 0
    # --cache-type-k/-v: "f16" (the default) or "q8_0".
    kv_type: str = "f16"


@dataclass(frozen=True)
class DeviceUsage:
    """One device's share: the layers it holds (n_layer = the output layer) and their bytes."""

    layers: tuple[int, ...]
    weights: int
    kv_cache: int
    compute: int
    overhead: int

    @property
    def total(self) -> int:
        return self.weights + self.kv_cache + self.compute + self.overhead


@dataclass(frozen=True)
class Estimate:
    """What llama.cpp puts on each card and on the host for one split of the layers."""

    cards: tuple[DeviceUsage, ...]
    host: DeviceUsage

    def worst_card(self) -> DeviceUsage | None:
        return max(self.cards, key=lambda d: d.total, default=None)


def layer_device(il: int, n_layer: int, gpu_layers: int, cards: int) -> int | None:
    """The card (0-based) layer il goes to, or None for the host; il = n_layer is the output."""
    start = max(n_layer - gpu_layers, 0)
    act = min(gpu_layers, n_layer + 1)
    if cards <= 0 or il < start or il - start >= act:
        return None
    return (il - start) * cards // act


def expand(kv_layout: tuple[LayerGroup, ...]) -> list[LayerGroup]:
    """One LayerGroup per layer, in order."""
    return [g for g in kv_layout for _ in range(g.layers)]


def row_bytes(elements: int, kv_type: str = "f16") -> int:
    """One cell's row of K (or V) in the cache type: f16 2 B an element; q8_0 blocks of 32
    elements in 34 B (ggml_row_size; ENGINES.md g)."""
    if kv_type == "q8_0":
        return -(-elements // 32) * 34
    return elements * KV_ELEMENT_BYTES


def layer_kv_bytes(
    g: LayerGroup,
    context: int,
    kv_type: str = "f16",
    *,
    n_seq: int = N_SEQ,
    n_ubatch: int = N_UBATCH,
    unified: bool = True,
) -> int:
    """One layer's cache at a --ctx-size of `context` tokens, `n_seq` slots in one unified pool
    (or, not `unified`, `n_seq` streams of their own: see the module's docstring)."""
    streams = 1 if unified else n_seq
    per_stream = pad(context) if unified else pad(pad(context) // n_seq)
    cells = per_stream * streams
    if g.kind in (AttentionKind.FULL, AttentionKind.SLIDING):
        if g.kind is AttentionKind.SLIDING:
            window = g.window * (n_seq if unified else 1) + n_ubatch
            cells = pad(min(per_stream, window)) * streams
        k = row_bytes(g.kv_heads * g.head_dim, kv_type)
        v = row_bytes(g.kv_heads * g.value_dim, kv_type)
        return (k + v) * cells
    if g.kind is AttentionKind.MLA:
        return row_bytes(g.latent_dim, kv_type) * cells
    # Recurrent state is kept in f32 whatever the cache type.
    return g.state_bytes * n_seq


def compute_bytes(layout: GgufLayout, holds_output: bool, *, n_ubatch: int = N_UBATCH) -> int:
    """A card's compute buffer (calibrated on the CUDA records; see the module's docstring)."""
    per_layer = 4 * n_ubatch * (layout.embedding + layout.feed_forward)
    return per_layer + (4 * n_ubatch * layout.vocab if holds_output else 0)


def cpu_compute_bytes(
    layout: GgufLayout, holds_output: bool, context: int, *, n_ubatch: int = N_UBATCH
) -> int:
    """The host's compute buffer when the host runs layers (fitted to llama.cpp's CPU backend;
    see the module's docstring): the larger of the logits phase and a layer's phase, which
    also holds the f16 KQ mask of n_ctx x n_ubatch."""
    logits = 4 * n_ubatch * (layout.vocab + 2 * layout.embedding) if holds_output else 0
    layer = 4 * n_ubatch * (3 * layout.feed_forward + 4 * layout.embedding)
    return max(logits, layer + 2 * n_ubatch * pad(context))


def host_inputs_bytes(layout: GgufLayout, context: int, *, n_ubatch: int = N_UBATCH) -> int:
    """The host's compute buffer when the cards run every layer: the graph's inputs, an f32 KQ
    mask of n_ctx x n_ubatch and the ubatch's input embeddings (`CUDA_Host compute buffer`)."""
    return 4 * n_ubatch * (pad(context) + layout.embedding)


def estimate(
    layout: GgufLayout,
    placement: Placement,
    context: int,
    projector: int = 0,
    *,
    n_seq: int = N_SEQ,
    n_ubatch: int = N_UBATCH,
    unified: bool = True,
) -> Estimate:
    """Each card's and the host's share. A multimodal projector (mmproj) is loaded whole on the
    first card (mtmd's clip context uses the main GPU), or in RAM when there is no card."""
    n = layout.layers
    kinds = expand(layout.kv_layout)
    k = placement.cards
    layers: list[list[int]] = [[] for _ in range(k)]
    weights = [0] * k
    kv = [0] * k
    host_layers: list[int] = []
    host_weights = layout.embed_bytes
    host_kv = 0
    for il in range(n + 1):
        d = layer_device(il, n, placement.gpu_layers, k)
        if il == n:
            w, cache = layout.output_bytes, 0
            if d is not None and layout.tied_embeddings:
                w += layout.embed_bytes
        else:
            w = layout.layer_bytes[il]
            cache = (
                layer_kv_bytes(
                    kinds[il],
                    context,
                    placement.kv_type,
                    n_seq=n_seq,
                    n_ubatch=n_ubatch,
                    unified=unified,
                )
                if il < len(kinds)
                else 0
            )
            if d is not None and il < placement.cpu_moe:
                w -= layout.expert_bytes[il]
                host_weights += layout.expert_bytes[il]
        if d is None:
            host_layers.append(il)
            host_weights += w
            host_kv += cache
        else:
            layers[d].append(il)
            weights[d] += w
            kv[d] += cache
    if projector:
        if k:
            weights[0] += projector
        else:
            host_weights += projector
    cards = tuple(
        DeviceUsage(
            layers=tuple(layers[d]),
            weights=weights[d],
            kv_cache=kv[d],
            compute=compute_bytes(layout, n in layers[d], n_ubatch=n_ubatch) if layers[d] else 0,
            overhead=RUNTIME_OVERHEAD,
        )
        for d in range(k)
    )
    host = DeviceUsage(
        layers=tuple(host_layers),
        weights=host_weights,
        kv_cache=host_kv,
        compute=(
            cpu_compute_bytes(layout, n in host_layers, context, n_ubatch=n_ubatch)
            if host_layers
            else host_inputs_bytes(layout, context, n_ubatch=n_ubatch)
        ),
        overhead=0,
    )
    return Estimate(cards, host)


def fits(e: Estimate, card_have: int, host_have: int | None) -> bool:
    """Every card within its share, and the host's part within its share of RAM (None: the
    host's part is only token_embd, which is not checked)."""
    if any(d.total > card_have for d in e.cards):
        return False
    return host_have is None or e.host.total <= host_have


def max_context(
    layout: GgufLayout,
    placement: Placement,
    card_have: int,
    host_have: int | None,
    trained: int | None,
    cpu: bool = False,
    extra: int = 0,
    *,
    n_seq: int = N_SEQ,
    n_ubatch: int = N_UBATCH,
    unified: bool = True,
) -> int:
    """The largest --ctx-size (a multiple of 256, at most the trained context) that still fits."""
    limit = trained or 1 << 20

    def ok(ctx: int) -> bool:
        e = estimate(layout, placement, ctx, extra, n_seq=n_seq, n_ubatch=n_ubatch, unified=unified)
        return e.host.total <= card_have if cpu else fits(e, card_have, host_have)

    lo, hi = 0, limit // CTX_PAD
    if ok(limit):
        return limit
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ok(mid * CTX_PAD):
            lo = mid
        else:
            hi = mid - 1
    return lo * CTX_PAD
