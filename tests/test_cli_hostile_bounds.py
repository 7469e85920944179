"""Hangs, exhaustion, crashes and silent wrong answers (issue 24): each input below got a
traceback, a hang, gigabytes of memory or a plan of something that does not exist; each is now one
sentence and a documented exit code, or the right answer."""

from __future__ import annotations

import os
import stat
import threading

import pytest

from tests.conftest import FIXTURES, invoke
from tests.fleet_data import fixture_text


def within(seconds: float, capsys, *args: str) -> tuple[int, str, str]:
    """The CLI in-process, failing the test (not hanging it) if it is not done in time."""
    done: list[tuple[int, str, str]] = []
    worker = threading.Thread(target=lambda: done.append(invoke(capsys, args)), daemon=True)
    worker.start()
    worker.join(seconds)
    assert done, f"llmfit {' '.join(args)} did not finish within {seconds} s"
    return done[0]


# -- files that are too big, endless or no files at all ------------------------------------------


def test_a_2_gb_fleet_file_is_refused_after_its_cap(hub, capsys, tmp_path):
    big = tmp_path / "big.toml"
    with big.open("wb") as f:  # sparse: 2 GB on no disk, read as zeros
        f.truncate(2 << 30)
    code, out, err = within(60, capsys, "Qwen/Qwen3-8B", "--fleet", str(big))
    assert (code, out) == (3, "")
    assert err == (
        f"llmfit: {big} is more than 67,108,864 bytes, the most llmfit reads of a fleet file.\n"
    )


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
@pytest.mark.parametrize(
    "command",
    [("fleet", "import", "nvidia-smi"), ("fleet", "import", "kubectl"), ("fleet",)],
)
def test_a_device_is_refused_unread(hub, capsys, device, command):
    code, out, err = within(60, capsys, *command, device)
    assert (code, out) == (3, "")
    assert err == f"llmfit: {device} is a device, not a file: nothing is read from it.\n"


def test_a_fifo_with_no_writer_is_no_hang(hub, capsys, tmp_path):
    fifo = tmp_path / "fleet.toml"
    os.mkfifo(fifo)
    code, _, err = within(60, capsys, "Qwen/Qwen3-8B", "--fleet", str(fifo))
    assert code == 3
    assert err == f"llmfit: {fifo} describes no nodes: add a [[pool]] or a [[node]].\n"
    code, _, err = within(60, capsys, "fleet", "import", "nvidia-smi", str(fifo))
    assert (code, err) == (3, f"llmfit: {fifo} holds no nvidia-smi CSV rows.\n")


def test_a_pipe_is_still_read_as_a_fleet(hub, capsys, tmp_path):
    # --fleet <(…) and `nvidia-smi … | llmfit fleet import nvidia-smi -` are pipes, not devices.
    read, write = os.pipe()
    os.write(write, b'[[node]]\nname = "n1"\ngpu = "h100-80g"\ngpus = 1\n')
    os.close(write)
    try:
        code, out, _ = within(60, capsys, "fleet", f"/dev/fd/{read}")
    finally:
        os.close(read)
    assert code == 0 and out.startswith(f"fleet: /dev/fd/{read} · 1 node (1 with GPUs, 0 CPU")


# -- numbers ---------------------------------------------------------------------------------------


def test_a_400_digit_memory_and_a_superscript_index_from_nvidia_smi(hub, capsys, tmp_path):
    csv = tmp_path / "g.csv"
    nines = "9" * 400
    csv.write_text(f"index, name, memory.total [MiB]\n0, NVIDIA H100 80GB HBM3, {nines} MiB\n")
    code, out, err = within(60, capsys, "fleet", "import", "nvidia-smi", str(csv))
    assert (code, out) == (3, "")
    assert err.startswith(f"llmfit: {csv}:2: memory '{nines[:100]}")
    assert err.endswith(" MiB' is not a size in MiB (like 81559 MiB).\n")
    # "²".isdigit() is true and int("²") an error: the row's place is its index.
    csv.write_text("index, name, memory.total [MiB]\n², NVIDIA H100 80GB HBM3, 81559 MiB\n")
    code, out, _ = within(60, capsys, "fleet", "import", "nvidia-smi", str(csv))
    assert code == 0 and 'gpu = "h100-80g"\ngpus = 1\n' in out


@pytest.mark.parametrize(
    ("fleet", "why"),
    [
        ("9" * 5000 + "x8xh100", "has more than 1,000,000,000,000 nodes"),
        ("8x" + "9" * 5000 + "xh100", "has more than 1,024 cards a node"),
        ("9" * 5000 + "xh100", "has more than 1,024 cards a node"),
        ("9" * 5000 + "xcpu:8g", "has more than 1,000,000,000,000 nodes"),
    ],
)
def test_an_inline_count_of_5000_digits_is_one_sentence(run, fleet, why):
    code, out, err = run("Qwen/Qwen3-8B", "--fleet", fleet)
    assert (code, out) == (2, "")
    assert err.startswith("llmfit: --fleet '9" if fleet[0] == "9" else "llmfit: --fleet '8x9")
    assert err.endswith("joined with commas.\n")
    assert len(err) <= 1010  # cut in the middle, as every sentence is
    assert why in err or "…" in err


def test_a_huge_engine_count_is_refused_before_the_plan_computes_with_it(run):
    code, out, err = run(
        "check", "--fleet", "1xh100", "--", "sglang", "serve", "--model-path", "Qwen/Qwen3-8B",
        "--chunked-prefill-size", str(10**40),
    )  # fmt: skip
    assert (code, out) == (2, "")
    assert err == (
        "llmfit: the command to check: --chunked-prefill-size '100000000000000000000000'… is "
        "past 1,125,899,906,842,624, no count an engine takes.\n"
    )


def test_json_nested_1900_deep_in_a_flag_is_one_sentence(run):
    code, out, err = run(
        "Qwen/Qwen3-8B", "--fleet", "1xh100", "--speculative-config", "[" * 1900 + "]" * 1900
    )
    assert (code, out) == (2, "")
    assert err == "llmfit: --speculative-config nests JSON too deep to be a flag's object.\n"


# -- wrong answers that were silent --------------------------------------------------------------


def test_100000_device_tables_pass_no_more_the_card_bound(run, tmp_path):
    fleet = tmp_path / "f.toml"
    tables = '[[node.devices]]\ngpu = "h100-80g"\ngpus = 1\n' * 100_000
    fleet.write_text('[[node]]\nname = "n"\n' + tables)
    code, out, err = run("fleet", str(fleet))
    assert (code, out) == (3, "")
    assert err == (
        f"llmfit: {fleet}:1: node[0].devices has 100,000 [[...devices]] tables; a node holds at "
        "most 1,024 cards.\n"
    )
    fleet.write_text(
        '[[node]]\nname = "n"\n' + '[[node.devices]]\ngpu = "h100-80g"\ngpus = 600\n' * 2
    )
    code, _, err = run("fleet", str(fleet))
    assert code == 3
    assert err == (
        f"llmfit: {fleet}:1: node[0].devices gives the node 1,200 cards in all; a node holds at "
        "most 1,024.\n"
    )


@pytest.mark.parametrize("quantity", ["8Ki", "1e3", "8.0", "٨"])
def test_a_kubectl_card_count_that_is_not_a_number_is_refused_not_a_cpu_node(
    run, tmp_path, quantity
):
    import json

    doc = json.loads((FIXTURES / "fleet" / "kubectl-get-nodes-built.json").read_text())
    doc["items"] = doc["items"][:1]
    doc["items"][0]["status"]["capacity"]["nvidia.com/gpu"] = quantity
    name = doc["items"][0]["metadata"]["name"]
    nodes = tmp_path / "n.json"
    nodes.write_text(json.dumps(doc))
    code, out, err = run("fleet", "import", "kubectl", str(nodes))
    assert (code, out) == (3, "")
    assert err == (
        f"llmfit: {nodes}: node {name!r}: capacity nvidia.com/gpu is {quantity!r}, not a whole "
        "number of devices; make it with kubectl get nodes -o json.\n"
    )


@pytest.mark.parametrize("profile", ["0g.0gb", "3g.0gb", "0g.40gb"])
def test_a_mig_profile_of_nothing_is_refused_not_planned(run, tmp_path, profile):
    slices, gb = profile.removesuffix("gb").split("g.")
    why = (
        f"names the MIG profile {profile}, of {slices} compute slices and {gb} GB, which no card "
        "offers"
    )
    label = f"a100-80g-mig-{profile}"
    code, out, err = run("Qwen/Qwen3-8B", "--fleet", f"1x{label}")
    assert (code, out) == (2, "")
    assert err.startswith(f"llmfit: --fleet '1x{label}': '1x{label}' {why}; write ")
    fleet = tmp_path / "f.toml"
    fleet.write_text(f'[[node]]\nname = "n"\ngpu = "{label}"\ngpus = 1\n')
    code, out, err = run("Qwen/Qwen3-8B", "--fleet", str(fleet))
    assert (code, out) == (3, "")
    assert err == f"llmfit: {fleet}:3: node[0].gpu is '{label}': it {why}.\n"


# -- fleet import -o -----------------------------------------------------------------------------


def test_import_onto_a_link_writes_through_it_and_keeps_the_files_mode(run, tmp_path):
    csv = tmp_path / "gpus.csv"
    csv.write_text(fixture_text("nvidia-smi-csv-l40s-2gpu.txt"))
    real = tmp_path / "real.toml"
    real.write_text("# old\n")
    real.chmod(0o644)
    link = tmp_path / "fleet.toml"
    link.symlink_to(real)
    code, _, err = run("fleet", "import", "nvidia-smi", str(csv), "-o", str(link))
    assert code == 0, err
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_text().startswith("# written by llmfit fleet import nvidia-smi from ")
    assert stat.S_IMODE(real.stat().st_mode) == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fleet.toml", "gpus.csv", "real.toml"]


def test_a_new_file_gets_the_umasks_mode_not_0600(run, tmp_path):
    csv = tmp_path / "gpus.csv"
    csv.write_text(fixture_text("nvidia-smi-csv-l40s-2gpu.txt"))
    old = os.umask(0o022)
    try:
        code, _, _ = run("fleet", "import", "nvidia-smi", str(csv), "-o", str(tmp_path / "f.toml"))
    finally:
        os.umask(old)
    assert code == 0
    assert stat.S_IMODE((tmp_path / "f.toml").stat().st_mode) == 0o644


@pytest.mark.parametrize(
    ("heads", "kv", "sentence"),
    [
        (None, None, None),  # the header as made: planned
        (0, None, "llama.attention.head_count is 0 for layer 0, so it has no attention heads "
         "and llama.cpp cannot run it."),
        (4, 8, "layer 0 has 8 KV heads for 4 attention heads; the KV heads must divide the "
         "attention heads, or llama.cpp cannot share them."),
        (4, 3, "layer 0 has 3 KV heads for 4 attention heads; the KV heads must divide the "
         "attention heads, or llama.cpp cannot share them."),
        (4, 0, "llama.attention.head_count_kv is 0 for layer 0, which has no recurrent state: "
         "an attention layer with no KV heads, which llama.cpp cannot run."),
    ],
)  # fmt: skip
def test_a_gguf_of_impossible_heads_is_refused_not_planned(
    hub, capsys, tmp_path, heads, kv, sentence
):
    from tests.sources import gguf_bytes as g

    kvs = [
        g.kv_str("general.architecture", "llama"),
        g.kv_u32("llama.block_count", 1),
        g.kv_u32("llama.embedding_length", 32),
        g.kv_u32("llama.attention.head_count", 4 if heads is None else heads),
        g.kv_strings("tokenizer.ggml.tokens", [f"t{i}" for i in range(8)]),
        g.kv_u32("llama.context_length", 2048),
    ]
    if kv is not None:
        kvs.append(g.kv_u32("llama.attention.head_count_kv", kv))
    d = tmp_path / "m"
    d.mkdir()
    (d / "m.gguf").write_bytes(g.whole_file(g.header(kvs, g.tiny_infos())))
    code, out, err = within(60, capsys, str(d), "--fleet", "1xrtx4090-24g")
    if sentence is None:
        assert code == 0, err
        assert "llama-server -m" in out
        return
    assert (code, out) == (3, "")
    assert err == f"llmfit: m.gguf: {sentence}\n"


@pytest.mark.parametrize(
    ("version", "sentence"),
    [
        ("0.33.99999999999999999999", "vLLM version '0.33.99999999999999999999' is not a release "
         "number like 0.33 or 0.27.1; llmfit models vLLM 0.11 to 0.34."),
        ("0.33.10", "vLLM 0.33.10 is not a release: vLLM has made at most a few patch releases "
         "of a version (0.33.0 to 0.33.9 at the most)."),
    ],
)  # fmt: skip
def test_a_vllm_version_that_names_no_image_is_refused(run, version, sentence):
    code, out, err = run("Qwen/Qwen3-8B", "--fleet", "1xh100", "--vllm-version", version)
    assert (code, out) == (2, "")
    assert err.splitlines()[-1].endswith(sentence)


def test_the_planners_cost_does_not_grow_with_the_context(run, monkeypatch, tmp_path):
    # 1,000 nodes on one fabric, and a context that fits nowhere: every node count of every
    # width was sized in turn (40 to 160 s); the fewest nodes are now found by galloping and
    # halving, so the sizings are a few a width whatever the context.
    from llmfit.plan import layouts

    sized: list[int] = []
    real = layouts.Tried

    def counted(*args, **kw):
        sized.append(1)
        return real(*args, **kw)

    monkeypatch.setattr(layouts, "Tried", counted)
    fleet = tmp_path / "f.toml"
    fleet.write_text(
        "".join(
            f'[[node]]\nname = "n{i}"\ngpu = "h100-80g"\ngpus = 8\nfabric = "ib0"\n'
            f"free_gpus = {i % 9}\nram_gb = 1024\n"
            for i in range(1000)
        )
    )
    counts = {}
    for context in ("8k", "1e9"):
        sized.clear()
        code, _, _ = run(
            "meta-llama/Meta-Llama-3.1-405B", "--fleet", str(fleet), "--context", context
        )
        counts[context] = len(sized)
    assert code == 1  # a billion tokens fit nowhere
    assert counts["1e9"] <= counts["8k"] + 16, counts
    assert counts["1e9"] < 150, counts
