"""Labels and sentences: an option said the way someone would say it out loud."""

from __future__ import annotations

from llmfit.plan.engines import engine
from llmfit.plan.options import Option, Rejection
from llmfit.plan.planner import Unplaced

GIB = 1 << 30


def gib(n: int) -> str:
    """Bytes in GiB (2^30 bytes, the unit vLLM prints and nvidia-smi's MiB count in), one
    decimal: every figure llmfit labels GiB is one."""
    return f"{n / GIB:.1f}"


def quant(o: Option) -> str:
    return o.artifact.quant or "?"


def label(o: Option) -> str:
    """Where it runs, in a few words: "8 × h200-141g", "2 nodes × 8 h100-80g on ib0", "CPU"."""
    if o.cpu:
        return "CPU"
    return engine(o.engine).where(o)


def precision(o: Option) -> str:
    """What it runs at: "bf16", or for a what-if the flags that make it so."""
    if o.what_if and o.engine_flags:
        return f"{quant(o)} (what-if: {' '.join(o.engine_flags)})"
    if o.what_if:
        return f"{quant(o)} (as shipped, at {o.context:,} tokens: the {o.what_if} it holds)"
    return quant(o)


def describe(o: Option) -> str:
    """The option as someone would say it: "8 × h200-141g, bf16, 61.2 GiB a card (65.7 free)"."""
    need = o.per_card.need
    if o.cpu:
        return f"CPU, {precision(o)}, {gib(need)} GiB of RAM ({gib(o.room)} free)"
    return f"{label(o)}, {precision(o)}, {gib(need)} GiB a card ({gib(o.room)} free)"


def unplaced_reason(u: Unplaced) -> str:
    """Why an artifact has no option: the nearest miss, in the numbers that decide it."""
    if u.need:
        ram = (
            f"; {u.wants_ram} would keep the rest in the node's RAM, but the fleet gives it none "
            "(ram_gb in a fleet file; inline, +RAM as in 1xh100-80g+512g)"
            if u.wants_ram
            else ""
        )
        return (
            f"nothing fits; closest is {u.where}, needing {gib(u.need)} GiB of {gib(u.have)} "
            f"a card{ram}"
        )
    return u.reason


def rejection_reason(r: Rejection) -> str:
    if r.need:
        also = f"; it would hold {r.max_context:,} tokens" if r.max_context else ""
        return f"needs {gib(r.need)} GiB of {gib(r.have)} a card{also}"
    return r.reason


def fits_instead(u: Unplaced) -> str | None:
    """ "at 35,536 tokens, 1 × rtx3090-24g would hold it" when only the context is too long;
    where pins left nothing, the nearest layout that fits without them and the pins that give
    it."""
    if u.fits_at:
        return f"at {u.fits_at:,} tokens, {u.fits_where} would hold it (--context {u.fits_at})"
    if u.nearest is not None:
        give = f" ({u.nearest_pins})" if u.nearest_pins else ""
        return f"nearest that fits: {describe(u.nearest)}{give}"
    return None


def sequences(o: Option) -> str:
    """ "4.55 sequences of 40,960 tokens at once", singular where it is one; with the ranks or
    servers that share them where there are several."""
    n = o.held
    text = f"{n:g} sequence{'' if n == 1 else 's'} of {o.context:,} tokens at once"
    if o.layout.dp > 1:
        text += f" over {o.layout.dp} {'servers' if o.layout.replicas > 1 else 'ranks'}"
    return text


def tokens_per_s(o: Option) -> str:
    """Single-sequence decode, as the table shows it: "48.1", "1,234"; "?" when not known."""
    if o.speed is None:
        return "?"
    v = o.speed.decode_tokens_per_s
    return f"{v:,.0f}" if v >= 100 else f"{v:.1f}"


def speed_line(o: Option) -> str | None:
    """ "decode 48.1 tok/s for one sequence (memory-bound), 1,220 for 26 at once; prefill …"."""
    s = o.speed
    if s is None:
        return None
    at_once = max(1, int(o.held))
    line = (
        f"decode {tokens_per_s(o)} tok/s for one sequence ({s.bound}-bound), "
        f"{s.decode_tokens_per_s_total:,.0f} for {at_once} at once"
    )
    if s.prefill_tokens_per_s and s.ttft_s is not None:
        line += (
            f"; prefill {s.prefill_tokens_per_s:,.0f} tok/s, first token in {s.ttft_s:.2f} s "
            f"for {o.context:,} tokens"
        )
    return line
