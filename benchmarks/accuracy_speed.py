"""How close llmfit's speed model comes to measured speeds, and the fit of its constants.

Without arguments: every row of fixtures/calibration/speed.jsonl (a copy of
../shared/calibration/speed.jsonl), priced with the constants in llmfit/plan/speed.py: measured
against estimated single-sequence decode tokens a second, the rows' other measures (decode deep
in the context, decode at concurrency, prefill, TTFT) in tables of their own, and the median
absolute error per engine on the fitted rows and, apart, on the held-out rows. A row that cannot
be priced says why.

With --fit: re-derive the constants (scipy.optimize.least_squares on log errors, a robust loss,
rows weighted by their `confidence`), print them, and the same tables with them. numpy and scipy
are needed for --fit only; they are not the project's dependencies.

Model facts come from what each row states and from the project's fixture configs
(fixtures/src), else from the published config.json named in MODELS. Weights are summed part by
part: safetensors checkpoints at their stored dtypes, GGUF files by llama.cpp's own choice of a
type for each tensor (`gguf_layout`).

Which rows are fitted: single-sequence decode rows (llama-bench tg, or a serving run at
concurrency 1) without a `fit_caveat`, from builds that match what llmfit plans (see EXCLUDE).
The HOLD-OUT is fixed: every fourth configuration (engine, model, quant, card, count) in file
order, counted per engine family, is kept out of the fit and reported apart.

Run from the repository root: PYTHONPATH=. python benchmarks/accuracy_speed.py [--fit]
"""

from __future__ import annotations

import json
import math
import re
import statistics
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from llmfit.plan import speed
from llmfit.plan.artifact import WeightLayout
from llmfit.plan.cards import BY_KEY, CardSpec, family
from llmfit.plan.engines import llamacpp_speed, serving_speed
from llmfit.plan.model import AttentionKind, LayerGroup, Model, Shape

ROOT = Path(__file__).resolve().parent.parent
ROWS = ROOT / "fixtures" / "calibration" / "speed.jsonl"
SRC = ROOT / "fixtures" / "src"


# --- Model facts -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Net:
    """A network's shapes, from which parameters are counted part by part."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied: bool
    ff: int = 0  # dense FFN width
    dense_layers: int = -1  # layers with the dense FFN (-1: all when ff, else none)
    experts: int = 0
    active: int = 0
    moe_ff: int = 0
    shared_ff: int = 0
    attn_params: int = 0  # per layer, when not q, k, v, o of the heads (MLA)
    latent: int = 0  # MLA: elements a token a layer in the cache
    sliding: int = 0  # layers with a sliding window (gpt-oss: every other one)
    window: int = 0
    source: str = ""

    def attention(self) -> int:
        if self.attn_params:
            return self.attn_params
        q = self.heads * self.head_dim
        kv = self.kv_heads * self.head_dim
        return self.hidden * (2 * q + 2 * kv)

    def dense(self, i: int) -> int:
        n = self.layers if self.dense_layers < 0 else self.dense_layers
        return 3 * self.hidden * self.ff if self.ff and i < n else 0

    def routed(self, i: int) -> int:
        if not self.experts or i < max(self.dense_layers, 0):
            return 0
        return self.experts * 3 * self.hidden * self.moe_ff

    def shared(self, i: int) -> int:
        if not self.experts or i < max(self.dense_layers, 0):
            return 0
        return 3 * self.hidden * self.shared_ff + self.hidden * self.experts  # and the router

    @property
    def embed(self) -> int:
        return self.vocab * self.hidden

    def params(self) -> tuple[int, int]:
        """(all parameters, the active ones a token multiplies or looks up)."""
        total = active = 0
        for i in range(self.layers):
            base = self.attention() + self.dense(i) + self.shared(i)
            total += base + self.routed(i)
            share = self.active / self.experts if self.experts else 0
            active += base + int(self.routed(i) * share)
        heads = self.embed * (1 if self.tied else 2)
        return total + heads, active + heads

    def model(self, dtype: str = "bfloat16") -> Model:
        total, active = self.params()
        full = self.layers - self.sliding
        groups: list[LayerGroup] = []
        if self.latent:
            groups.append(LayerGroup(AttentionKind.MLA, self.layers, latent_dim=self.latent))
        else:
            groups.append(LayerGroup(AttentionKind.FULL, full, self.kv_heads, self.head_dim))
            if self.sliding:
                groups.append(
                    LayerGroup(
                        AttentionKind.SLIDING,
                        self.sliding,
                        self.kv_heads,
                        self.head_dim,
                        window=self.window,
                    )
                )
        return Model(
            architecture=None,
            model_type=None,
            layers=self.layers,
            attention_heads=self.heads,
            kv_heads=self.kv_heads,
            head_dim=self.latent or self.head_dim,
            layer_groups=tuple(groups),
            hidden_size=self.hidden,
            vocab_size=self.vocab,
            dtype=dtype,
            experts=self.experts or None,
            experts_active=self.active or None,
            params=total,
            active_params=active,
        )


def _cfg(name: str) -> dict:
    return json.loads((SRC / f"{name}.json").read_text())


def _llama_cfg(name: str) -> Net:
    c = _cfg(name)
    return Net(
        layers=c["num_hidden_layers"],
        hidden=c["hidden_size"],
        heads=c["num_attention_heads"],
        kv_heads=c["num_key_value_heads"],
        head_dim=c["hidden_size"] // c["num_attention_heads"],
        vocab=c["vocab_size"],
        tied=bool(c.get("tie_word_embeddings")),
        ff=c["intermediate_size"],
        source=f"fixtures/src/{name}.json",
    )


def _qwen3_moe(name: str) -> Net:
    c = _cfg(name)
    return Net(
        layers=c["num_hidden_layers"],
        hidden=c["hidden_size"],
        heads=c["num_attention_heads"],
        kv_heads=c["num_key_value_heads"],
        head_dim=c["head_dim"],
        vocab=c["vocab_size"],
        tied=bool(c.get("tie_word_embeddings")),
        experts=c["num_experts"],
        active=c["num_experts_per_tok"],
        moe_ff=c["moe_intermediate_size"],
        source=f"fixtures/src/{name}.json",
    )


def _deepseek() -> Net:
    c = _cfg("deepseek-ai--DeepSeek-R1")
    h, n = c["hidden_size"], c["num_attention_heads"]
    qk = c["qk_nope_head_dim"] + c["qk_rope_head_dim"]
    attn = (
        h * c["q_lora_rank"]
        + c["q_lora_rank"] * n * qk
        + h * (c["kv_lora_rank"] + c["qk_rope_head_dim"])
        + c["kv_lora_rank"] * n * (c["qk_nope_head_dim"] + c["v_head_dim"])
        + n * c["v_head_dim"] * h
    )
    return Net(
        layers=c["num_hidden_layers"],  # the MTP layer is not loaded without speculation
        hidden=h,
        heads=n,
        kv_heads=1,
        head_dim=c["kv_lora_rank"] + c["qk_rope_head_dim"],
        vocab=c["vocab_size"],
        tied=False,
        ff=c["intermediate_size"],
        dense_layers=c["first_k_dense_replace"],
        experts=c["n_routed_experts"],
        active=c["num_experts_per_tok"],
        moe_ff=c["moe_intermediate_size"],
        shared_ff=c["moe_intermediate_size"] * c["n_shared_experts"],
        attn_params=attn,
        latent=c["kv_lora_rank"] + c["qk_rope_head_dim"],
        source="fixtures/src/deepseek-ai--DeepSeek-R1.json",
    )


def _gpt_oss() -> Net:
    c = _cfg("openai--gpt-oss-120b")
    h, d = c["hidden_size"], c["head_dim"]
    attn = h * d * (2 * c["num_attention_heads"] + 2 * c["num_key_value_heads"])
    return Net(
        layers=c["num_hidden_layers"],
        hidden=h,
        heads=c["num_attention_heads"],
        kv_heads=c["num_key_value_heads"],
        head_dim=d,
        vocab=c["vocab_size"],
        tied=False,
        experts=c["num_local_experts"],
        active=c["num_experts_per_tok"],
        moe_ff=c["intermediate_size"],
        attn_params=attn,
        sliding=sum(t == "sliding_attention" for t in c["layer_types"]),
        window=c["sliding_window"],
        source="fixtures/src/openai--gpt-oss-120b.json",
    )


def _scout() -> Net:
    c = _cfg("meta-llama--Llama-4-Scout-17B-16E-Instruct")
    t = c.get("text_config", c)
    return Net(
        layers=t["num_hidden_layers"],
        hidden=t["hidden_size"],
        heads=t["num_attention_heads"],
        kv_heads=t["num_key_value_heads"],
        head_dim=t.get("head_dim", t["hidden_size"] // t["num_attention_heads"]),
        vocab=t["vocab_size"],
        tied=False,
        experts=t["num_local_experts"],
        active=t["num_experts_per_tok"],
        moe_ff=t["intermediate_size"],
        shared_ff=t["intermediate_size"],
        source="fixtures/src/meta-llama--Llama-4-Scout-17B-16E-Instruct.json",
    )


# Published configs of models the fixtures do not hold (Hugging Face config.json of the named
# repository): llama-architecture shapes, MHA where kv_heads == heads.
LLAMA1_7B = Net(
    32,
    4096,
    32,
    32,
    128,
    32_000,
    False,
    ff=11_008,
    source="huggyllama/llama-7b (= meta-llama/Llama-2-7b-hf shapes)",
)
LLAMA1_30B = Net(60, 6656, 52, 52, 128, 32_000, False, ff=17_920, source="huggyllama/llama-30b")
LLAMA1_65B = Net(80, 8192, 64, 64, 128, 32_000, False, ff=22_016, source="huggyllama/llama-65b")
LLAMA2_70B = Net(80, 8192, 64, 8, 128, 32_000, False, ff=28_672, source="meta-llama/Llama-2-70b-hf")
TINYLLAMA = Net(
    22,
    2048,
    32,
    4,
    64,
    32_000,
    False,
    ff=5632,
    source="TinyLlama/TinyLlama-1.1B-intermediate-step-480k-1T",
)
LLAMA32_3B = Net(
    28, 3072, 24, 8, 128, 128_256, True, ff=8192, source="meta-llama/Llama-3.2-3B-Instruct"
)
QWEN3_14B = Net(40, 5120, 40, 8, 128, 151_936, False, ff=17_408, source="Qwen/Qwen3-14B")
QWEN3_06B = Net(28, 1024, 16, 8, 128, 151_936, True, ff=3072, source="Qwen/Qwen3-0.6B")  # fmt: skip


def _nets() -> dict[str, Net]:
    return {
        "llama3-8b": _llama_cfg("meta-llama--Llama-3.1-8B-Instruct"),
        "llama3-70b": _llama_cfg("meta-llama--Meta-Llama-3.1-70B"),
        "llama1-7b": LLAMA1_7B,
        "llama1-30b": LLAMA1_30B,
        "llama1-65b": LLAMA1_65B,
        "llama2-70b": LLAMA2_70B,
        "tinyllama": TINYLLAMA,
        "llama3.2-3b": LLAMA32_3B,
        "qwen3-235b": _qwen3_moe("Qwen--Qwen3-235B-A22B"),
        "qwen3-30b-a3b": _qwen3_moe("Qwen--Qwen3-30B-A3B"),
        "qwen3-14b": QWEN3_14B,
        "qwen3-0.6b": QWEN3_06B,
        "deepseek-r1": _deepseek(),
        "gpt-oss-120b": _gpt_oss(),
        "llama4-scout": _scout(),
    }


NETS = _nets()

# --- Bytes, part by part ------------------------------------------------------------------------

# GGML block sizes: (bytes, elements) a block (ggml's type traits).
GGML = {"F16": (2, 1), "F32": (4, 1), "Q4_0": (18, 32), "Q8_0": (34, 32), "Q4_K": (144, 256),
        "Q5_K": (176, 256), "Q6_K": (210, 256)}  # fmt: skip


def _more_bits(i: int, n: int) -> bool:
    """llama.cpp's use_more_bits (src/llama-quant.cpp): the first and last eighth of the layers
    and every third between."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def _ggml(kind: str, elements: int) -> int:
    size, block = GGML[kind]
    return elements * size // block


def gguf_layout(net: Net, quant: str) -> WeightLayout:
    """A llama-architecture GGUF file's bytes, tensor by tensor, as llama.cpp's quantizer types
    them (llama_tensor_get_type): F16 keeps every matrix in f16; Q4_0 and the k-quants give the
    output matrix Q6_K; Q4_K_M gives attn_v and ffn_down Q6_K in the use_more_bits layers (and
    attn_v Q5_K elsewhere when 4 or more query heads share a KV head, as in the 70B models),
    Q4_K to the rest. Norms are f32. Checked against the sizes llama-bench printed in the rows
    that state one: codellama-7b F16 12.55 GiB (12.552 here), TinyLlama Q4_K_M 636.18 MiB
    (636.93), Llama-3.2-3B Q4_K_M 1.87 GiB (1.874)."""
    q, kv = net.heads * net.head_dim, net.kv_heads * net.head_dim
    h, n = net.hidden, net.layers
    base = {"F16": "F16", "Q4_0": "Q4_0", "Q4_K_M": "Q4_K", "Q8_0": "Q8_0"}[quant]
    layers = []
    for i in range(n):
        v = base
        down = base
        if quant == "Q4_K_M":
            if _more_bits(i, n):
                v = down = "Q6_K"
            elif net.heads // net.kv_heads >= 4:
                v = "Q5_K"
            down = "Q6_K" if _more_bits(i, n) else base
        b = (
            _ggml(base, h * q) * 2  # attn_q, attn_output
            + _ggml(base, h * kv)  # attn_k
            + _ggml(v, h * kv)  # attn_v
            + _ggml(base, h * net.ff) * 2  # ffn_gate, ffn_up
            + _ggml(down, h * net.ff)  # ffn_down
            + _ggml("F32", 2 * h)  # the two norms
        )
        layers.append(b)
    out_type = "F16" if quant == "F16" else ("Q8_0" if quant == "Q8_0" else "Q6_K")
    # With tied embeddings there is no output matrix: token_embd is typed as the output would be.
    embed = _ggml(out_type if net.tied else base, net.embed)
    output = _ggml("F32", h) + (0 if net.tied else _ggml(out_type, net.embed))
    return WeightLayout(tuple(layers), (0,) * n, embed, output, net.tied)


def st_layout(net: Net, body: float, experts: float, embed: float = 2.0) -> WeightLayout:
    """A safetensors checkpoint's bytes: `body` bytes a parameter for attention, dense FFNs and
    shared experts, `experts` for routed experts, `embed` for the embedding and output head
    (fp8 block scales and MXFP4/NVFP4 group scales are in the widths: 4.25 and 4.5 bits)."""
    layers, routed = [], []
    for i in range(net.layers):
        r = net.routed(i) * experts
        layers.append(int((net.attention() + net.dense(i) + net.shared(i)) * body + r))
        routed.append(int(r))
    out = int(net.embed * embed) if not net.tied else 0
    return WeightLayout(tuple(layers), tuple(routed), int(net.embed * embed), out, net.tied)


# --- The rows ----------------------------------------------------------------------------------

GPU = {
    "RTX 3080 10GB": "rtx3080-10g", "RTX 3080 Ti 12GB": "rtx3080ti-12g",
    "RTX 4080 16GB": "rtx4080-16g", "RTX 3090 24GB": "rtx3090-24g", "RTX 3090": "rtx3090-24g",
    "RTX 4090 24GB": "rtx4090-24g", "RTX 4090": "rtx4090-24g",
    "Apple M3 Max (40-core GPU) 64GB": "m3-max-64g",
    "Apple M3 Max (40-core GPU) 48GB": "m3-max-48g",
    "RTX A6000 48GB": "rtxa6000-48g", "RTX 6000 Ada 48GB": "rtx6000ada-48g",
    # RunPod's A100 80GB rows do not say SXM or PCIe; the SXM is taken (5 % more bandwidth).
    "A100 80GB (RunPod; form factor not stated)": "a100-80g",
    "Apple M3 (10-core GPU) 16GB": "m3-16g", "Tesla P40 24GB": "p40-24g",
    "A100 80GB PCIe": "a100-pcie-80g", "Radeon RX 7900 XTX": "rx7900xtx-24g",
    "Apple M1 Ultra (64-core GPU) 128GB": "m1-ultra-128g", "RTX 2080 Ti": "rtx2080ti-11g",
    # The 10 GB card, the common one (the 12 GB one reads 20 % faster).
    "RTX 3080 (10GB/12GB variant not stated)": "rtx3080-10g",
    # Serving rows' A100s: 8-GPU boxes and a 30B bf16 model on one card are the 80 GB SXM.
    "A100 (memory size not stated)": "a100-80g", "A100 80GB": "a100-80g",
    "B200": "b200-180g", "H200": "h200-141g", "H200 (form factor not stated)": "h200-141g",
    "RTX 3060 12GB": "rtx3060-12g",
}  # fmt: skip

# (net, weights) by the row's model and quant words.
GGUF_MODEL = {
    "Meta Llama 3 8B": "llama3-8b", "Meta Llama 3 70B": "llama3-70b",
    "Llama-2-7b": "llama1-7b", "Llama-2-70b": "llama2-70b", "LLaMA (v1) 30B": "llama1-30b",
    "LLaMA (v1) 65B": "llama1-65b", "LLaMA 7B": "llama1-7b", "codellama-7b": "llama1-7b",
    "Llama 3 8B class": "llama3-8b", "meta-llama/Llama-3.2-3B": "llama3.2-3b",
    "TinyLlama 1.1B": "tinyllama", "Llama 3.1 8B": "llama3-8b",
}  # fmt: skip
SERVING_MODEL = {
    "meta-llama/Llama-3.1-70B": ("llama3-70b", (2, 2)),
    "openai/gpt-oss-120b": ("gpt-oss-120b", (2, 4.25 / 8)),
    "Qwen/Qwen3-235B-A22B": ("qwen3-235b", (2, 2)),
    "deepseek-ai/DeepSeek-R1-0528": ("deepseek-r1", (1, 1)),
    "Llama 4 Scout": ("llama4-scout", (4.5 / 8, 4.5 / 8)),
    "Qwen/Qwen3-30B-A3B": ("qwen3-30b-a3b", (2, 2)),
    "Qwen/Qwen3-14B-AWQ": ("qwen3-14b", (4.25 / 8, 4.25 / 8)),  # int4, groups of 128
    "Qwen/Qwen3-14B": ("qwen3-14b", (2, 2)),
    "Qwen/Qwen3-0.6B": ("qwen3-0.6b", (2, 2)),
}

# Rows whose build is not the one llmfit plans for, whatever their confidence.
# Builds before llama.cpp PR #4766 (January 2024) split each matrix across several cards by rows,
# not by layers as llmfit plans it: a different engine for these rows.
EXCLUDE_MULTI_GPU_ROW_SPLIT = "Dec 2023 build on several cards: row split, before PR #4766"
# llmfit plans llama-server's CUDA, ROCm and Metal builds (the images it names are CUDA's and the
# CPU's); a Vulkan build's kernels and fixed costs are another engine's.
VULKAN = "a Vulkan build: llmfit plans the CUDA, ROCm and Metal builds"


@dataclass
class Priced:
    row: dict
    net: str
    card: str
    count: int
    inputs: speed.SpeedInputs
    # What is compared: (measure, measured value, function of Speed giving the estimate).
    decode: float | None  # measured single-sequence decode tok/s
    decode_deep: tuple[int, float] | None  # (context, tok/s) deep into llama-bench's tg
    total: tuple[int, float, float] | None  # (concurrency, output tok/s, TPOT ms)
    prefill: tuple[int, float] | None  # (prompt tokens, tok/s)
    ttft: tuple[int, float] | None  # (prompt tokens, ms)
    role: str  # "fit", "holdout" or "reported"
    why: str  # for "reported": why it is not in the medians
    group: str
    no_prefill: bool = False  # the row's own caveat says its prefill is not to be used
    out_len: float = 0.0  # serving: mean output tokens a request


def _first(d: dict, keys: tuple[str, ...]) -> tuple[str, float] | None:
    for k in keys:
        if d.get(k) is not None:
            return k, d[k]
    return None


def _gguf_net(model: str) -> str | None:
    return next((v for k, v in GGUF_MODEL.items() if model.startswith(k)), None)


def _serving_net(model: str) -> tuple[str, tuple[float, float]] | None:
    return next((v for k, v in SERVING_MODEL.items() if model.startswith(k)), None)


def _ctx_inputs(
    net: Net, weights: WeightLayout, card: CardSpec, engine: str, *, count: int, tp: int,
    context: int, concurrency: int = 1, backend: str | None = None, prompt: int = 0,
    flash: bool = True, chunk: int = 0, dtype: str = "bf16", kv_elem: str = "bfloat16",
    quantized: bool = False,
) -> speed.SpeedInputs:  # fmt: skip
    pp = max(count // tp, 1)
    m = net.model()
    kv = Shape.of(m, kv_elem).kv_bytes_per_token(tp, pp)
    fam = "apple" if backend == "metal" else family(card.key)
    k = (llamacpp_speed.constants(fam) if engine == "llama.cpp"
         else serving_speed.constants(engine, card.key))  # fmt: skip
    inp = speed.inputs_for(
        m, weights, card, constants=k, context=context, kv_bytes_per_token=kv, tp=tp, pp=pp,
        batch=concurrency, prompt_tokens=prompt, flash_attention=flash,
        prefill_chunk=chunk, compute_dtype=dtype, quantized=quantized,
    )  # fmt: skip
    return inp


def price(r: dict) -> Priced | str:
    """A row as SpeedInputs and what it measured, or why it cannot be priced."""
    count = r["gpu_count"]
    if not count:
        return "the row states no card count or layout (a cluster-wide figure)"
    gpu = GPU.get(r["gpu"])
    if gpu is None:
        return f"card {r['gpu']!r} is not in the card table"
    card = BY_KEY[gpu]
    m, t = r["metrics"], r["test"]
    if r["engine"] == "llama.cpp":
        key = _gguf_net(r["model"])
        if key is None:
            return "model not in MODELS"
        net = NETS[key]
        quant = r["quant"]
        weights = gguf_layout(net, quant)
        backend = (r.get("backend") or "").split()[0].split(",")[0].lower()
        backend = {"cuda": "cuda", "rocm/hip": "rocm", "metal": "metal", "vulkan": "vulkan"}.get(
            backend, card.backend
        )
        # llama-bench tgN: N tokens from an empty cache, so N/2 on average; ./main -n 1024 after
        # a few-hundred-token prompt: about 800.
        tg = _first(m, ("tg64_tok_s", "tg128_tok_s", "tg512_tok_s", "tg_tok_s", "tg_tok_s_mean3"))
        n = {"tg64_tok_s": 64, "tg128_tok_s": 128, "tg512_tok_s": 512, "tg_tok_s": 128}
        ctx = n[tg[0]] // 2 if tg and tg[0] in n else 800
        flash = False  # every llama.cpp row predates flash attention or does not turn it on
        ub = int(t.get("ubatch") or 512) if str(t.get("ubatch", "")).isdigit() else 512
        inp = _ctx_inputs(net, weights, card, "llama.cpp", count=count, tp=1, context=ctx,
                          backend=backend, flash=flash, chunk=ub, kv_elem="float16",
                          quantized=quant not in ("F16", "BF16", "F32"))  # fmt: skip
        deep = _first(m, ("tg8192_tok_s", "tg4096_tok_s", "tg64_at_depth4096_tok_s"))
        deep_ctx = {"tg8192_tok_s": 4096, "tg4096_tok_s": 2048, "tg64_at_depth4096_tok_s": 4128}
        pre = _first(m, ("pp512_tok_s", "pp2048_tok_s"))
        pre_n = {"pp512_tok_s": 512, "pp2048_tok_s": 2048}
        if r["id"].startswith("lcpp-pr6017"):
            pre = ("pp2048_tok_s", m["pp2048_tok_s"])
        why = ""
        caveat = r.get("fit_caveat") or ""
        tg_only = "use tg only" in caveat  # its decode stands; its prefill does not
        if caveat and not tg_only:
            why = f"fit_caveat: {caveat}"
        elif backend == "vulkan":
            why = VULKAN
        elif count > 1 and "Dec 2023" in r["engine_version"]:
            why = EXCLUDE_MULTI_GPU_ROW_SPLIT
        elif tg is None:
            why = "no decode measure (prefill only)"
        return Priced(
            r, key, gpu, count, inp,
            decode=tg[1] if tg else None,
            decode_deep=(deep_ctx[deep[0]], deep[1]) if deep else None,
            total=None,
            prefill=(pre_n[pre[0]], pre[1]) if pre else None,
            ttft=None, role="", why=why,
            group=f"llama.cpp|{key}|{quant}|{gpu}|{count}", no_prefill=tg_only,
        )  # fmt: skip
    hit = _serving_net(r["model"])
    if hit is None:
        return "model not in MODELS"
    key, (body, experts) = hit
    net = NETS[key]
    weights = st_layout(net, body, experts)
    tp = r.get("tp") or 1
    conc = t.get("max_concurrency") or t.get("batch_size")
    said = re.search(r"--max-concurrency (\d+)", t.get("tool", ""))
    conc = conc or (int(said.group(1)) if said else None)
    if conc is None:
        return "the row states no concurrency (all requests in flight at once)"
    if "isl128_osl128" in m:  # tt-inference-server's sweep: its shortest run
        inp_len, out_len = 128, 128
        tpot = m["isl128_osl128"]["tpot_ms"]
        ttft = (1024, m["isl1024_osl128"]["ttft_ms"]) if "isl1024_osl128" in m else None
    else:
        n = t.get("num_prompts") or 1
        inp_len = (m.get("total_input_tokens") or (t.get("input_len") or 0) * n) / n
        out_len = (m.get("total_generated_tokens") or (t.get("output_len") or 0) * n) / n
        tpot = _first(m, ("median_tpot_ms", "mean_tpot_ms"))
        tpot = tpot[1] if tpot else None
        ttft_ms = _first(m, ("median_ttft_ms", "mean_ttft_ms"))
        ttft = (int(inp_len), ttft_ms[1]) if ttft_ms and conc == 1 else None
    ctx = int(inp_len + out_len / 2)
    dtype = "fp8" if body == 1 and card.fp8_flops else "bf16"
    inp = _ctx_inputs(net, weights, card, r["engine"], count=count, tp=tp, context=ctx,
                      concurrency=conc, prompt=int(inp_len), dtype=dtype)  # fmt: skip
    output = m.get("output_tok_s") or (
        m["output_tok_s_per_gpu"] * count if "output_tok_s_per_gpu" in m else None
    )
    why = ""
    if r.get("fit_caveat"):
        why = f"fit_caveat: {r['fit_caveat']}"
    elif conc != 1:
        why = f"concurrency {conc}: not single-sequence decode"
    elif tpot is None:
        why = "no TPOT"
    return Priced(
        r, key, gpu, count, inp,
        decode=1000 / tpot if conc == 1 and tpot else None,
        decode_deep=None,
        total=(conc, output, tpot) if conc != 1 and output else None,
        prefill=None, ttft=ttft, role="", why=why,
        group=f"{r['engine']}|{key}|{r['quant']}|{gpu}|{count}", out_len=out_len,
    )  # fmt: skip


def _with_prefills(p: Priced) -> float:
    """Output tok/s of a serving run at its concurrency, decode steps and arriving prompts'
    prefills taking turns: every step, concurrency ÷ output length requests arrive and are
    prefilled alone."""
    conc = p.inputs.batch
    row_out = p.out_len or 1
    step = speed.decode_step(p.inputs, conc).total
    pre = speed.prefill_time(p.inputs, p.inputs.prompt_tokens)
    extra = conc / row_out * (pre.total if pre else 0.0)
    return conc / (step + extra)


def family_of(engine: str) -> str:
    return "llama.cpp" if engine == "llama.cpp" else "vLLM/SGLang"


def load() -> tuple[list[Priced], list[tuple[dict, str]]]:
    rows = [json.loads(line) for line in ROWS.read_text().splitlines() if line.strip()]
    priced: list[Priced] = []
    unpriced: list[tuple[dict, str]] = []
    for r in rows:
        p = price(r)
        if isinstance(p, str):
            unpriced.append((r, p))
        else:
            priced.append(p)
    # The hold-out: every fourth configuration in file order, per engine family, among the rows
    # that could be fitted.
    groups: dict[str, list[str]] = {}
    for p in priced:
        if p.why and not (p.total and p.why.startswith("concurrency")):
            p.role = "reported"
            continue
        fam = groups.setdefault(family_of(p.row["engine"]), [])
        if p.group not in fam:
            fam.append(p.group)
        p.role = "holdout" if fam.index(p.group) % 4 == 3 else "fit"
    return priced, unpriced


WEIGHT = {"high": 1.0, "medium": 0.7, "low": 0.4}
# Single-sequence decode is what the table shows and --rank speed sorts by: prefill, TTFT and
# decode at concurrency count half as much in the fit.
SECONDARY = 0.5


def err(est: float, meas: float) -> float:
    return est / meas - 1


def medians(priced: list[Priced]) -> dict[tuple[str, str], tuple[float, int]]:
    """Median absolute error of single-sequence decode by engine (and by family: llama.cpp,
    vLLM/SGLang) and role ("fit", "holdout")."""
    out: dict[tuple[str, str], list[float]] = {}
    for p in priced:
        if p.role in ("fit", "holdout") and p.decode:
            e = abs(err(speed.estimate(p.inputs).decode_tokens_per_s, p.decode))
            for who in {p.row["engine"], family_of(p.row["engine"])}:
                out.setdefault((who, p.role), []).append(e)
    return {k: (statistics.median(v), len(v)) for k, v in out.items()}


# --- The fit ----------------------------------------------------------------------------------

# What --fit varies for llama.cpp: (Constants field, start, low, high); the "apple_*" entries are
# the Apple family's row as factors of the default one's. vLLM's and SGLang's constants are
# fitted to the serving runs (benchmarks/accuracy_load.py): their rows here are held out whole.
# The start of each is its prior too (what a GEMV kernel of a batch of one reaches: 85 % of the
# bandwidth, some tens of µs a layer; Apple's GPUs as the others until rows say otherwise): a
# fit to a few rows (one source left out of a handful) then stays near what kernels do.
FREE: tuple[tuple[str, float, float, float], ...] = (
    ("weight_efficiency", 0.85, 0.3, 1.0),
    ("quant_weight_efficiency", 0.85, 0.3, 1.0),
    ("kv_efficiency", 0.4, 0.05, 1.0),
    ("layer_s", 60e-6, 1e-6, 1e-3),
    ("hop_s", 30e-6, 1e-6, 2e-3),
    ("prefill_efficiency", 0.7, 0.05, 1.5),
    ("quant_prefill_efficiency", 0.6, 0.05, 1.5),
    ("expert_efficiency", 1.0, 0.3, 1.5),
    ("apple_bandwidth", 1.0, 0.3, 1.5),
    ("apple_compute", 1.0, 0.3, 3.0),
)
# A constant away from its prior by a factor e costs as much as 1/PRIOR rows off by e.
PRIOR = 1.0


def _set(x: list[float]) -> None:
    """Put an x of the fit into llama.cpp's table (plan/engines/llamacpp_speed.py FITTED)."""
    values = dict(zip([f[0] for f in FREE], x, strict=True))
    bw, comp = values.pop("apple_bandwidth"), values.pop("apple_compute")
    base = replace(llamacpp_speed.DEFAULT, **values)
    llamacpp_speed.FITTED["default"] = base
    llamacpp_speed.FITTED["apple"] = replace(
        base,
        weight_efficiency=base.weight_efficiency * bw,
        quant_weight_efficiency=base.quant_weight_efficiency * bw,
        kv_efficiency=base.kv_efficiency * bw,
        prefill_efficiency=base.prefill_efficiency * comp,
        quant_prefill_efficiency=base.quant_prefill_efficiency * comp,
    )


def _reprice(priced: list[Priced]) -> None:
    """Each llama.cpp row's inputs with the table's constants now (the fit changes them)."""
    for p in priced:
        if p.row["engine"] == "llama.cpp":
            back = (p.row.get("backend") or "").lower()
            fam = "apple" if "metal" in back else family(p.card)
            p.inputs = replace(p.inputs, constants=llamacpp_speed.constants(fam))


def _residuals(priced: list[Priced], roles: tuple[str, ...] = ("fit",)) -> list[float]:
    """Log errors of every measure a llama.cpp row has: decode, decode deep in the context
    (what fits the KV read), prefill tok/s."""
    res = []
    for p in priced:
        if p.role not in roles or p.row["engine"] != "llama.cpp":
            continue
        w = math.sqrt(WEIGHT.get(p.row.get("confidence"), 0.5))
        if p.decode:
            res.append(w * math.log(speed.estimate(p.inputs).decode_tokens_per_s / p.decode))
        if p.decode_deep:
            ctx, meas = p.decode_deep
            est = 1 / speed.decode_step(p.inputs, 1, ctx).total
            res.append(w * math.log(est / meas))
        got = _prefill(p)
        if got:
            res.append(SECONDARY * w * math.log(got[0] / got[1]))
    return res


def fit(priced: list[Priced], roles: tuple[str, ...] = ("fit",), quiet: bool = False) -> None:
    """Fit llama.cpp's constants to the rows of `roles` and put them in its table."""
    from scipy.optimize import least_squares  # the fit only: not a project dependency

    x0 = [v[1] for v in FREE]

    def f(x: list[float]) -> list[float]:
        _set(list(x))
        _reprice(priced)
        prior = [PRIOR * math.log(a / b) for a, b in zip(x, x0, strict=True)]
        return _residuals(priced, roles) + prior

    bounds = ([v[2] for v in FREE], [v[3] for v in FREE])
    sol = least_squares(f, x0, bounds=bounds, loss="soft_l1", f_scale=0.1, x_scale="jac")
    _set(list(sol.x))
    _reprice(priced)
    if not quiet:
        print(
            "llama.cpp: " + ", ".join(f"{v[0]} = {x:.4g}" for v, x in zip(FREE, sol.x, strict=True))
        )
        print()


def _prefill(p: Priced) -> tuple[float, float] | None:
    """(estimated, measured) prefill tok/s of a row whose prefill can be compared."""
    if not p.prefill or p.no_prefill:
        return None
    n, meas = p.prefill
    t = speed.prefill_time(p.inputs, n)
    return (n / t.total, meas) if t else None


def _ttft(p: Priced) -> tuple[float, float] | None:
    """(estimated, measured) TTFT in ms."""
    if not p.ttft:
        return None
    n, meas = p.ttft
    t = speed.prefill_time(p.inputs, n)
    return ((t.total + p.inputs.constants.ttft_s) * 1000, meas) if t else None


def quant_family(p: Priced) -> str:
    """K-quants, legacy quants, F16/BF16, FP8, MXFP4 or other 4-bit (NVFP4, AWQ int4)."""
    q = (p.row.get("quant") or "").upper()
    if re.match(r"Q\d_K", q):
        return "K-quants"
    if re.match(r"Q\d_\d", q):
        return "legacy quants"
    if "MXFP4" in q:
        return "MXFP4"
    if "FP8" in q:
        return "FP8"
    if "NVFP4" in q or "AWQ" in q or "INT4" in q:
        return "other 4-bit"
    return "F16/BF16"


def source_of(p: Priced) -> str:
    url = p.row["source"]
    parts = url.split("/")
    return "/".join(parts[3:5]) if "github.com" in url else parts[2]


def leave_one_source_out(priced: list[Priced]) -> dict[str, float]:
    """Each llama.cpp source's single-sequence decode rows priced by a fit to the other
    sources' rows (fit and hold-out alike: by source, not by configuration), as est/meas − 1 by
    row id; vLLM's and SGLang's rows priced with the serving constants (fitted to load.jsonl,
    never to these rows)."""
    out: dict[str, float] = {}
    saved = dict(llamacpp_speed.FITTED)
    usable = [p for p in priced if p.role in ("fit", "holdout") and p.decode]
    for src in sorted({source_of(p) for p in usable if p.row["engine"] == "llama.cpp"}):
        roles = {id(p): p.role for p in priced}
        for p in priced:
            if p.role in ("fit", "holdout") and p.row["engine"] == "llama.cpp":
                p.role = "loso-train" if source_of(p) != src else "loso-test"
        fit(priced, ("loso-train",), quiet=True)
        for p in priced:
            if p.role == "loso-test" and p.decode:
                out[p.row["id"]] = err(speed.estimate(p.inputs).decode_tokens_per_s, p.decode)
        for p in priced:
            p.role = roles[id(p)]
        llamacpp_speed.FITTED.update(saved)
        _reprice(priced)
    for p in usable:
        if p.row["engine"] != "llama.cpp":
            out[p.row["id"]] = err(speed.estimate(p.inputs).decode_tokens_per_s, p.decode)
    return out


def loso_table(priced: list[Priced], held: dict[str, float]) -> list[str]:
    rows = [p for p in priced if p.row["id"] in held]
    out = [
        "| engine | quantisation | rows | leave-one-source-out median abs error |",
        "|---|---|---|---|",
    ]
    for fam in ("llama.cpp", "vLLM/SGLang"):
        mine = [p for p in rows if family_of(p.row["engine"]) == fam]
        for q in ("K-quants", "legacy quants", "F16/BF16", "FP8", "MXFP4", "other 4-bit",
                  "all"):  # fmt: skip
            sel = [p for p in mine if q == "all" or quant_family(p) == q]
            if sel:
                errs = [abs(held[p.row["id"]]) for p in sel]
                out.append(f"| {fam} | {q} | {len(sel)} | {_median_line(errs)} |")
    return out


# --- The tables --------------------------------------------------------------------------------


def _pct(e: float) -> str:
    return f"{e * 100:+.0f} %"


def _quant(q: str) -> str:
    return "bf16?" if q.startswith("not stated") else q.split(" ")[0]


def _median_line(errors: list[float]) -> str:
    return f"{statistics.median(errors) * 100:.1f} % ({len(errors)})" if errors else "—"


def _decode_table(priced: list[Priced]) -> list[str]:
    out = [
        "### Single-sequence decode, tokens a second",
        "",
        "| row | engine | model | card × n | measured | llmfit | error | bound | set |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for p in priced:
        if p.decode is None:
            continue
        s = speed.estimate(p.inputs)
        role = p.role if p.role != "reported" else f"not fitted: {p.why}"
        out.append(
            f"| {p.row['id']} | {p.row['engine']} | {p.net} {_quant(p.row['quant'])} | "
            f"{p.card} × {p.count} | {p.decode:.1f} | {s.decode_tokens_per_s:.1f} | "
            f"{_pct(err(s.decode_tokens_per_s, p.decode))} | {s.bound} | {role} |"
        )
    med = medians(priced)
    out += [
        "",
        "| engine | fitted rows: median abs error (n) | hold-out rows (n) |",
        "|---|---|---|",
    ]
    for who in ("llama.cpp", "vLLM/SGLang", "vllm", "sglang"):
        f, h = med.get((who, "fit")), med.get((who, "holdout"))
        cells = [f"{x[0] * 100:.1f} % ({x[1]})" if x else "—" for x in (f, h)]
        out.append(f"| {who} | {cells[0]} | {cells[1]} |")
    return out


def _deep_table(priced: list[Priced]) -> list[str]:
    out = [
        "### Decode deep in the context (llama-bench's longest tg, from an empty cache)",
        "",
        "| row | context (mean) | measured | llmfit | error |",
        "|---|---|---|---|---|",
    ]
    errors = []
    for p in priced:
        if p.decode_deep and p.role != "reported":
            ctx, meas = p.decode_deep
            est = 1 / speed.decode_step(p.inputs, 1, ctx).total
            errors.append(abs(err(est, meas)))
            out.append(
                f"| {p.row['id']} | {ctx:,} | {meas:.1f} | {est:.1f} | {_pct(err(est, meas))} |"
            )
    out += ["", f"Median absolute error {_median_line(errors)}."]
    return out


def _total_table(priced: list[Priced]) -> list[str]:
    out = [
        "### Decode at concurrency (serving runs)",
        "",
        "Output tokens a second over the run. `decode only` is `decode_tokens_per_s_total`; "
        "`with prefills` also spends, each step, the prefill of the requests that arrive "
        "(concurrency ÷ output length of them a step, each prompt prefilled alone): what the fit "
        "compares.",
        "",
        "| row | concurrency | measured | decode only | error | with prefills | error | set |",
        "|---|---|---|---|---|---|---|---|",
    ]
    errors: dict[str, list[float]] = {}
    for p in priced:
        if p.total:
            conc, meas, _ = p.total
            est = speed.estimate(p.inputs).decode_tokens_per_s_total
            mixed = _with_prefills(p)
            role = p.role if p.role != "reported" else "not fitted"
            errors.setdefault(role, []).append(abs(err(mixed, meas)))
            out.append(
                f"| {p.row['id']} | {conc} | {meas:,.0f} | {est:,.0f} | {_pct(err(est, meas))} | "
                f"{mixed:,.0f} | {_pct(err(mixed, meas))} | {role} |"
            )
    out.append("")
    out += [f"- {role} rows (with prefills): median absolute error {_median_line(v)}"
            for role, v in sorted(errors.items())]  # fmt: skip
    return out


def _prefill_table(priced: list[Priced]) -> list[str]:
    out = [
        "### Prefill (llama-bench pp) and time to first token (serving, concurrency 1)",
        "",
        "| row | prompt | measured | llmfit | error | bound | set |",
        "|---|---|---|---|---|---|---|",
    ]
    errors: dict[tuple[str, str], list[float]] = {}
    for p in priced:
        for what, got, unit in (("prefill", _prefill(p), "tok/s"), ("TTFT", _ttft(p), "ms")):
            if not got:
                continue
            est, meas = got
            n = (p.prefill if what == "prefill" else p.ttft)[0]
            role = p.role if p.role != "reported" else "not fitted"
            errors.setdefault((f"{family_of(p.row['engine'])} {what}", role), []).append(
                abs(err(est, meas))
            )
            bound = speed.prefill_time(p.inputs, n).bound
            out.append(
                f"| {p.row['id']} | {n:,} | {meas:,.0f} {unit} | {est:,.0f} {unit} | "
                f"{_pct(err(est, meas))} | {bound} | {role} |"
            )
    out.append("")
    out += [f"- {what}, {role} rows: median absolute error {_median_line(v)}"
            for (what, role), v in sorted(errors.items())]  # fmt: skip
    return out


def tables(priced: list[Priced], unpriced: list[tuple[dict, str]]) -> str:
    out = _decode_table(priced)
    for part in (_deep_table, _total_table, _prefill_table):
        out += [""] + part(priced)
    out += ["", "### Rows that cannot be priced", "", "| row | why |", "|---|---|"]
    out += [f"| {r['id']} | {why} |" for r, why in unpriced]
    return "\n".join(out)


def main(argv: list[str]) -> int:
    priced, unpriced = load()
    if "--fit" in argv:
        fit(priced)
    print(tables(priced, unpriced))
    if "--loso" in argv:
        print()
        print("### Single-sequence decode, leave-one-source-out")
        print()
        print("\n".join(loso_table(priced, leave_one_source_out(priced))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
