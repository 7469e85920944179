"""Why and why not: one option's card part by part with its formula's inputs; what was refused."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from llmfit.advise import Advice
from llmfit.plan.engines import llamacpp
from llmfit.plan.model import AttentionKind
from llmfit.plan.options import Option
from llmfit.render.sentences import describe, gb, rejection_reason, sequences

BAR = 30


def _bar(part: int, whole: int) -> str:
    n = round(BAR * part / whole) if whole > 0 else 0
    return "█" * min(n, BAR) + "·" * max(BAR - n, 0)


def explain_lines(advice: Advice, o: Option, number: int) -> list[str]:
    m = advice.repo.model
    c = o.per_card
    unit = "of RAM" if o.cpu else "a card"
    lines = [f"Option {number}: {describe(o)}"]
    total = round(o.have / o.gpu_memory_utilization) if o.gpu_memory_utilization else o.have
    if not o.cpu:
        lines.append(
            f"  a card: {o.gpu_class}, {gb(total)} GB as CUDA reports it, of which "
            f"{o.gpu_memory_utilization:.2f} = {gb(o.have)} GB is counted on"
        )
    parts = _vllm_parts(advice, o) if o.engine == "vllm" else _llamacpp_parts(advice, o)
    parts.append(("free", max(o.room, 0), "left of what is counted on"))
    for name, size, why in parts:
        lines.append(f"    {name:<9}{gb(size):>7} GB  {_bar(size, o.have)}  {why}")
    lines.append(f"    {'need':<9}{gb(c.need):>7} GB of {gb(o.have)} {unit}")
    if any(g.kind is AttentionKind.MLA for g in m.layer_groups):
        heads = f"an MLA latent of {m.head_dim} a layer, whole on every card"
    else:
        per = max(1, m.kv_heads // o.tp)
        plural = "s" if m.kv_heads > 1 else ""
        heads = f"{m.kv_heads} KV head{plural} × {m.head_dim}" + (
            f", {per} a card" if o.tp > 1 else ""
        )
    lines.append(
        f"  inputs: {m.layers} layers · {m.attention_heads} attention heads · {heads} · "
        f"KV {advice.plan.kv_bytes_per_token:,} B a token for the whole model"
    )
    lines.append(f"  holds: {o.max_context:,} tokens at most · {sequences(o)}")
    if o.engine == "vllm":
        lines.append(
            "  assumes: vLLM keeps KV in blocks of 16 tokens; profiles "
            f"{o.batched_tokens:,} batched tokens (its serve default on this card); CUDA graphs "
            "on; --gpu-memory-utilization is a share of the card's total, so other processes' "
            "memory must fit in the rest"
        )
    if o.engine == "llama.cpp":
        lines.append(
            f"  assumes: llama-server with {llamacpp.N_SEQ} slots sharing one pool of "
            f"--ctx-size cells, f16 KV cache, flash attention on, a {llamacpp.N_UBATCH}-token "
            "ubatch; every value is passed explicitly so llama.cpp's --fit changes nothing"
        )
    if o.what_if:
        lines.append(
            f"  what-if: the checkpoint is served with {' '.join(o.engine_flags)}, which changes "
            f"it ({o.what_if}); it is not the model as its authors shipped it"
        )
    return lines


Part = tuple[str, int, str]


def _vllm_parts(advice: Advice, o: Option) -> list[Part]:
    m, c = advice.repo.model, o.per_card
    cards = max(o.tp * o.pp, 1)
    width = f"tensor parallel {o.tp} × pipeline {o.pp}"
    if o.batched_tokens and m.vocab_size and m.hidden_size:
        overhead = (
            f"activation of {o.batched_tokens:,} batched tokens (vocabulary {m.vocab_size:,}, "
            f"hidden {m.hidden_size:,}), non-torch memory, CUDA graphs"
        )
    else:
        overhead = "2 GiB + a tenth of the card's weights"
    return [
        (
            "weights",
            c.weights,
            f"{gb(o.artifact.bytes)} GB of {o.artifact.quant or '?'} / {cards} ({width})",
        ),
        ("KV cache", c.kv_cache, f"{o.context:,} tokens × {o.kv_per_token:,} B a token a card"),
        ("overhead", c.overhead, overhead),
    ]


def _llamacpp_parts(advice: Advice, o: Option) -> list[Part]:
    c = o.per_card
    layout = o.artifact.layout
    n = layout.layers if layout else advice.repo.model.layers
    if o.cpu:
        where = "every layer in RAM"
    else:
        cards = len(o.tensor_split) or 1
        offloaded = (
            "every layer and the output layer"
            if o.gpu_layers is not None and o.gpu_layers > n
            else f"the last {o.gpu_layers} of {n} layers"
        )
        where = f"{offloaded}, split by count over {cards} card{'s' if cards > 1 else ''}"
        if o.cpu_moe_layers:
            where += f", the experts of the first {o.cpu_moe_layers} layers in RAM"
        where += "; token_embd stays in RAM"
    parts: list[Part] = [
        ("weights", c.weights, f"{gb(o.artifact.bytes)} GB of {o.artifact.quant or '?'}: {where}"),
        ("KV cache", c.kv_cache, f"{o.context:,} cells (padded to 256) of the layers it holds"),
        ("overhead", c.overhead, "compute buffer for one ubatch, and the runtime"),
    ]
    if o.host_bytes and not o.cpu:
        parts.append(("in RAM", o.host_bytes, "the host's part: its layers, their KV and compute"))
    return parts


def why_not_lines(advice: Advice) -> list[str]:
    rejected = advice.plan.rejected
    if not rejected:
        return ["No way was refused."]
    lines = ["Ways refused:"]
    seen: set[str] = set()
    for r in rejected:
        tag = f" [{r.what_if}]" if r.what_if else ""
        line = f"  {r.artifact}{tag} · {r.engine} · {r.where}: {rejection_reason(r)}"
        if line not in seen:
            seen.add(line)
            lines.append(line)
    return lines


def render_explain(advice: Advice, console: Console, number: int) -> None:
    o = advice.plan.options[number - 1]
    for line in explain_lines(advice, o, number):
        console.print(Text(line), soft_wrap=True)


def render_why_not(advice: Advice, console: Console) -> None:
    for line in why_not_lines(advice):
        console.print(Text(line), soft_wrap=True)
