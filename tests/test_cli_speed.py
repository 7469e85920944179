"""How fast (issue 15), as the CLI shows it: every option's speed in JSON, a tok/s column, and
--rank speed. The arithmetic itself is pinned in tests/plan/test_speed.py."""

from __future__ import annotations

import json

from tests.conftest import EXAMPLE_FLEET

FLEET = str(EXAMPLE_FLEET)


def test_rank_speed_puts_the_fastest_cards_first(run):
    code, out, err = run(
        "meta-llama/Llama-3.1-8B-Instruct", "--fleet", FLEET, "--rank", "speed", "--json"
    )
    assert code == 0, err
    opts = json.loads(out)["options"]
    # Every option carries its speed, and the list is fastest first.
    assert all(o["speed"] is not None for o in opts)
    rates = [o["speed"]["decode_tokens_per_s"] for o in opts]
    assert rates == sorted(rates, reverse=True)
    classes = [o["gpu_class"] for o in opts]
    # An H200 or H100 option ranks above every A100 and L40S one.
    first_fast = min(i for i, c in enumerate(classes) if c in ("h200-141g", "h100-80g"))
    assert first_fast < classes.index("a100-80g") and first_fast < classes.index("l40s-48g")
    assert set(opts[0]["speed"]) == {
        "decode_tokens_per_s", "decode_tokens_per_s_total", "prefill_tokens_per_s", "ttft_s",
        "bound", "bound_total", "bound_prefill", "assumptions",
    }  # fmt: skip
    assert opts[0]["speed"]["bound"] in ("memory", "compute", "link")


def test_one_card_decodes_slower_than_eight_of_the_same_class(run):
    code, out, _ = run(
        "meta-llama/Llama-3.1-8B-Instruct", "--fleet", "8xh100-80g", "--precision", "stored",
        "--context", "8192", "--json",
    )  # fmt: skip
    assert code == 0
    by_tp = {o["tp"]: o["speed"]["decode_tokens_per_s"] for o in json.loads(out)["options"]
             if o["dp"] == 1}  # fmt: skip
    assert by_tp[1] < by_tp[2] < by_tp[4] < by_tp[8]


def test_the_table_has_a_tok_s_column_and_the_best_a_speed_line(run):
    code, out, _ = run("meta-llama/Llama-3.1-8B-Instruct", "--fleet", "1xh100-80g",
                       "--precision", "stored", "--context", "8192")  # fmt: skip
    assert code == 0
    header = next(line for line in out.splitlines() if line.lstrip().startswith("# "))
    assert "tok/s" in header and "tok/s/GPU" in header and "meets" in header
    assert "  decode " in out and " tok/s for one sequence (memory-bound)" in out


def test_a_card_of_unknown_speed_has_none(run, tmp_path):
    fleet = tmp_path / "fleet.toml"
    fleet.write_text('[[node]]\nname = "x"\ngpu = "mystery-96g"\ngpus = 1\n')
    code, out, _ = run("Qwen/Qwen3-8B", "--fleet", str(fleet), "--precision", "stored", "--json")
    assert code == 0
    assert [o["speed"] for o in json.loads(out)["options"]] == [None]
