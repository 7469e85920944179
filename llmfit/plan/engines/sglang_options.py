"""SGLang's knobs, declared once (plan/engines/knobs.py): the flags of `sglang serve` that change
what a card holds or how fast it runs. llmfit's own command line, the reader of a checked SGLang
launch and the printed launch all follow this declaration.

Spellings and ranges are SGLang 0.5.23's (sglang/srt/server_args.py ServerArgs.add_cli_args;
fixtures/engines/sglang-0.5.23-server-args.json is its parser's dump).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from llmfit.plan.engines.knobs import MEMORY, SPEED, knob


def human_readable_int(flag: str, value: str) -> int:
    """A token count as SGLang's human_readable_int reads it (utils/common.py): an integer, or
    one with an SI suffix (1k = 1000, 1M, 25.6k) or an IEC one (1Ki = 1024, 1Mi), case-sensitive."""
    from decimal import Decimal, InvalidOperation  # only where a flag is read: 2 ms to import

    text = value.strip()
    m = re.fullmatch(r"(\d{1,24}(?:\.\d{1,6})?)(Ki|Mi|Gi|Ti|k|M|G|T)", text)
    try:
        if m:
            number, suffix = m.groups()
            if suffix.endswith("i"):
                if "." in number:
                    raise ValueError
                n = int(number) << {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40}[suffix]
            else:
                n = int(Decimal(number) * {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}[suffix])
        elif re.fullmatch(r"[+-]?\d{1,30}", text):
            n = int(text)
        else:
            raise ValueError
    except (ValueError, InvalidOperation):
        raise ValueError(f"{flag} {value!r} is not a token count.") from None
    if n <= 0:
        raise ValueError(f"{flag} {value!r} must be positive.")
    return n


@dataclass(frozen=True)
class SglangOptions:
    """SGLang's own knobs; None is SGLang's default for the card and layout (every value the plan
    relies on is then passed explicitly)."""

    # The share of a card's free memory for weights and the KV pool.
    mem_fraction_static: float | None = knob(
        None, "--mem-fraction-static", kind="float", low=0, high=1, open_low=True,
        open_high=True, changes=(MEMORY,), passed=False,
        help="the share of a card for the weights and the KV pool (default: SGLang's, for the "
        "card and layout).",
        example="0.8",
    )  # fmt: skip
    max_running_requests: int | None = knob(
        None, "--max-running-requests", low=1, high=1 << 20, changes=(MEMORY, SPEED),
        help="requests running at once (passed on).",
        example="64",
    )  # fmt: skip
    chunked_prefill_size: int | None = knob(
        None, "--chunked-prefill-size", low=1, high=1 << 24, changes=(MEMORY, SPEED),
        help="tokens a prefill chunk (passed on).",
        example="4096",
    )  # fmt: skip
    # A cap on the KV pool's tokens.
    max_total_tokens: int | None = knob(
        None, "--max-total-tokens", low=1, high=1 << 40, parser=human_readable_int,
        changes=(MEMORY,), help="a cap on the KV pool's tokens (passed on).",
        example="100000",
    )  # fmt: skip
    # SGLang's overlap scheduler (server_args.py disable_overlap_schedule, off by default): the
    # CPU schedules the next batch while the GPU runs this one.
    disable_overlap_schedule: bool = knob(
        False, "--disable-overlap-schedule", kind="switch", changes=(SPEED,),
        help="no overlap scheduler: the CPU's work a step adds to the GPU's (passed on).",
    )  # fmt: skip
    # --cpu-offload-gb (srt/utils/offloader.py OffloaderV1): GiB of each rank's decoder layers kept
    # in pinned host memory, copied up over PCIe for every forward. Read from a checked command
    # (llmfit's own --cpu-offload-gb is vLLM's knob: one flag, one engine).
    cpu_offload_gb: float | None = knob(
        None, "--cpu-offload-gb", kind="float", low=0, high=1 << 20, cli=None,
        changes=(MEMORY, SPEED),
        help="GiB of each card's layer weights kept in the host's memory, read over PCIe every "
        "step (passed on).",
        example="10",
    )  # fmt: skip
    # --cuda-graph-max-bs-decode (arg_groups/cuda_graph_hook.py): the largest decode batch
    # captured, as given (memory_hook.py handle_gpu_memory_settings caps only its default at
    # --max-running-requests); the graphs' reserve is 2 MiB a size up to it, and a decode step of
    # more sequences runs without a graph.
    cuda_graph_max_bs_decode: int | None = knob(
        None, "--cuda-graph-max-bs-decode", low=1, high=1 << 16, changes=(MEMORY, SPEED),
        help="the largest decode batch captured in a CUDA graph; larger ones launch every kernel "
        "from the host (passed on).",
        example="64",
    )  # fmt: skip
    # --disable-cuda-graph (deprecated in 0.5.23 for --cuda-graph-backend-{decode,prefill}=
    # disabled, still taken: server_args.py): no decode or prefill graphs
    # (arg_groups/cuda_graph_hook.py), so no memory kept back for them (memory_hook.py
    # reserve_for_graph_mb) and every kernel launched from the host.
    disable_cuda_graph: bool = knob(
        False, "--disable-cuda-graph", kind="switch", changes=(MEMORY, SPEED),
        help="no CUDA graphs: nothing kept back for them, every step's kernels launched from "
        "the host (passed on).",
    )  # fmt: skip
    # The output head split over the attention's TP group (each data-parallel-attention group
    # keeps its own share) instead of over the whole --tp-size group.
    enable_dp_lm_head: bool = knob(
        False, "--enable-dp-lm-head", kind="switch", changes=(MEMORY, SPEED),
        help="with data-parallel attention, the output head split within each attention group "
        "(passed on).",
    )  # fmt: skip
