"""Flag values llmfit reads itself: token counts, parameter counts, finite floats.

Each refuses what it cannot read in one sentence that names the flag and the value.
"""

from __future__ import annotations

import math
import re

import click

from llmfit.errors import UsageError
from llmfit.plan.settings import MAX_CONTEXT, WORKLOADS, Workload

# `--context trained`: the model's trained context, also on a desktop (whose default is shorter).
TRAINED = "trained"


def wants_trained(value: str | None) -> bool:
    return value is not None and value.strip().lower() == TRAINED


def context_tokens(value: str | None, flag: str = "--context") -> int | None:
    """A token count: 32768, 32k, 1m (k and m in 1,024s, as contexts are counted).

    No model is trained past a few million tokens; the bound keeps a mistyped exponent (1e300)
    from reaching the planner's arithmetic."""
    if value is None or value.strip().lower() == TRAINED:
        return None
    text = value.strip().lower().replace("_", "").replace(",", "")
    scale = {"k": 1024, "m": 1024 * 1024}.get(text[-1:], 1)
    digits = text[:-1] if scale > 1 else text
    try:
        number = float(digits) * scale
    except ValueError:
        number = math.nan
    # float() reads "inf" and "nan" too, and int() of them raises what no sentence explains.
    if not math.isfinite(number):
        raise UsageError(f"{flag} {value!r} is not a token count (like 32768, 32k or 1m).")
    n = int(number)
    if n <= 0:
        raise UsageError(f"{flag} {value!r} must be positive.")
    if n > MAX_CONTEXT:
        raise UsageError(
            f"{flag} {value!r} is {n:,} tokens, more than the {MAX_CONTEXT:,} llmfit plans for."
        )
    return n


def finite(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """A float flag's value, refusing nan and inf (which click's FloatRange lets through: no
    comparison with nan is true, and inf is within an open upper bound)."""
    if value is not None and not math.isfinite(value):
        raise click.BadParameter(f"{value} is not a finite number.", ctx=ctx, param=param)
    return value


def param_count(value: str | None) -> int | None:
    """A parameter count as a limit: 70b, 8B, 1.5t, 235000000000, read to the digits given, as
    a model's size is named: "70b" is every count that reads as 70 billion (up to 70,999,999,999,
    so Llama-3.1-70B's 70.6 billion is within it), "1.5t" up to 1.5999… trillion."""
    if value is None:
        return None
    text = value.strip().lower().replace("_", "").replace(",", "")
    scale = {"k": 10**3, "m": 10**6, "b": 10**9, "t": 10**12}.get(text[-1:], 1)
    digits = text[:-1] if scale > 1 else text
    # Read as a decimal, so that 2.3b is 2,300,000,000 and not a float's 2,299,999,999.9…; an
    # exponent (1e300) and "inf" or "nan" are not a count anyone types.
    if not re.fullmatch(r"\d{1,15}(?:\.\d{1,12})?|\.\d{1,12}", digits):
        raise UsageError(f"--max-params {value!r} is not a parameter count (like 8b or 70B).")
    whole, _, fraction = digits.partition(".")
    fraction = fraction.rstrip("0")
    n = int(whole or "0") * scale + int(fraction or "0") * scale // 10 ** len(fraction)
    if n <= 0:
        raise UsageError(f"--max-params {value!r} must be positive.")
    # Every count that reads as the value to the digits given: one step of its last digit less one.
    step = max(scale // 10 ** len(fraction), 1)
    return (n // step + 1) * step - 1


def workload_of(
    workload_name: str | None,
    input_len: str | None,
    output_len: str | None,
    concurrency: float | None,
    rate: float | None,
    ttft: float | None,
    tpot: float | None,
    min_speed: float | None,
    requests: int | None = None,
) -> Workload:
    """The workload the flags name: the preset (chat by default) with each flag given in place
    of its field. --concurrency and --rate name the load two ways, --tpot and --min-speed the
    same target: one of each."""
    loads = [f for f, v in (("--concurrency", concurrency), ("--rate", rate),
                            ("--requests", requests)) if v is not None]  # fmt: skip
    if len(loads) > 1:
        raise UsageError(
            f"{' and '.join(loads)} each name the load: give requests in flight (--concurrency), "
            "requests a second (--rate) or requests sent at once (--requests), one of them."
        )
    if tpot is not None and min_speed is not None:
        raise UsageError(
            "--tpot and --min-speed both set the time a token: give one (--tpot 50 is "
            "--min-speed 20)."
        )
    w = WORKLOADS[workload_name or "chat"]
    named = any(v is not None for v in (workload_name, input_len, output_len, concurrency, rate,
                                        requests, ttft, tpot, min_speed))  # fmt: skip
    return Workload(
        name=w.name if input_len is None and output_len is None else "custom",
        input_len=context_tokens(input_len, "--input-len") or w.input_len,
        output_len=context_tokens(output_len, "--output-len") or w.output_len,
        concurrency=concurrency,
        rate=rate,
        requests=requests,
        ttft_s=ttft if ttft is not None else w.ttft_s,
        tpot_s=tpot / 1000 if tpot is not None else (1 / min_speed if min_speed else w.tpot_s),
        named=named,
    )
