"""A fleet file may give a card's own figures (memory bandwidth, tensor rates, its link), where the
fleet knows the card better than llmfit's table does or the table does not know it at all: they
are read, bounded and refused in one sentence each, and they reach the speed model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmfit.errors import FleetFileError
from llmfit.sources.fleet import parse_fleet

NODE = '[[node]]\nname = "ws"\ngpus = 1\n'


def kind(text: str):
    return parse_fleet(text, "f.toml").nodes[0].kinds[0]


def test_figures_for_a_card_the_table_lacks_make_its_spec():
    k = kind(NODE + 'gpu = "x-48g"\nmemory_bandwidth_gbs = 400\nbf16_tflops = 50\nlink = "none"\n')
    spec = k.spec
    assert spec is not None and spec.key == "x-48g"
    # 400 GB/s and 50 TFLOPS, in bytes and FLOPs a second.
    assert (spec.memory_bandwidth, spec.bf16_flops, spec.link) == (400e9, 50e12, "none")


def test_a_known_card_keeps_the_figures_the_fleet_does_not_give():
    k = kind(NODE + 'gpu = "h100-80g"\nmemory_bandwidth_gbs = 6700\n')
    assert k.spec is not None
    # The H100 SXM's 989.5 TFLOPS of bf16 from the table; its 3,350 GB/s replaced by 6,700.
    assert (k.spec.memory_bandwidth, k.spec.bf16_flops) == (6700e9, 989.5e12)
    assert k.spec.source.endswith("(with fleet overrides)")
    assert kind(NODE + 'gpu = "h100-80g"\n').override is None


def test_a_pool_may_give_them_too():
    text = '[[pool]]\ncount = 2\nname = "p"\ngpu = "h100-80g"\ngpus = 8\npcie_gbs = 32\n'
    assert parse_fleet(text, "f.toml").nodes[0].kinds[0].spec.pcie_bandwidth == 32e9


@pytest.mark.parametrize(
    "lines, message",
    [
        (
            'gpu = "h100-80g"\nmemory_bandwidth_gbs = nan\n',
            "f.toml:5: node[0].memory_bandwidth_gbs is nan; it must be a number from 0.001 to "
            "1,000,000.",
        ),
        (
            'gpu = "h100-80g"\nbf16_tflops = "fast"\n',
            "f.toml:5: node[0].bf16_tflops is 'fast'; it must be a number from 0.001 to 1,000,000.",
        ),
        (
            'gpu = "h100-80g"\nfp8_tflops = 0\n',
            "f.toml:5: node[0].fp8_tflops is 0; it must be a number from 0.001 to 1,000,000.",
        ),
        (
            # The least positive float made every time Infinity in the JSON (issue 33).
            'gpu = "h100-80g"\nbf16_tflops = 5e-324\n',
            "f.toml:5: node[0].bf16_tflops is 5e-324; it must be a number from 0.001 to 1,000,000.",
        ),
        (
            'gpu = "h100-80g"\nlink_gbs = 2e6\n',
            "f.toml:5: node[0].link_gbs is 2000000.0; it must be a number from 0.001 to 1,000,000.",
        ),
        (
            'gpu = "h100-80g"\nlink = "nvlnk4"\n',
            "f.toml:5: node[0].link is 'nvlnk4'; allowed: nvlink3, nvlink4, nvlink5, "
            "infinity-fabric, pcie3, pcie4, pcie5, none; did you mean 'nvlink4'?",
        ),
        (
            'gpu = "x-48g"\nbf16_tflops = 50\n',
            "f.toml:5: node[0].bf16_tflops is given for 'x-48g', a card llmfit has no figures "
            "for, so its memory_bandwidth_gbs is needed too: its speed is timed from it.",
        ),
    ],
)
def test_bad_figures_get_one_sentence(lines: str, message: str):
    with pytest.raises(FleetFileError) as e:
        parse_fleet(NODE + lines, "f.toml")
    assert e.value.message == message


def test_figures_without_a_card_say_so():
    with pytest.raises(FleetFileError) as e:
        parse_fleet('[[node]]\nname = "cpu"\nmemory_bandwidth_gbs = 400\n', "f.toml")
    assert e.value.message == (
        "f.toml:3: node[0].memory_bandwidth_gbs is given without a gpu class to say what they are."
    )


def _plan(run, tmp_path: Path, lines: str) -> tuple[dict, list[str]]:
    fleet = tmp_path / "fleet.toml"
    fleet.write_text(NODE + lines)
    code, out, err = run("Qwen/Qwen3-8B", "--fleet", str(fleet), "--concurrency", "1", "--json")
    assert code == 0, err
    doc = json.loads(out)
    return doc["options"][0], doc["notes"]


def test_an_unknown_card_is_timed_once_its_figures_are_given(run, tmp_path: Path):
    bare, notes = _plan(run, tmp_path, 'gpu = "x-48g"\n')
    assert bare["speed"] is None and bare["serving"] is None
    assert notes[0].startswith(
        "x-48g is not a GPU class llmfit knows: it is planned by its memory alone, without speed "
        "figures"
    )
    timed, notes = _plan(run, tmp_path, 'gpu = "x-48g"\nmemory_bandwidth_gbs = 400\n')
    assert timed["speed"] is not None and timed["serving"]["decode_step"]["weights"] > 0
    # The note said "without speed figures": with them given, there is nothing to warn of.
    assert not any("x-48g" in n for n in notes)


def test_the_fleets_bandwidth_is_the_one_weights_stream_at(run, tmp_path: Path):
    table, _ = _plan(run, tmp_path, 'gpu = "h100-80g"\n')
    doubled, _ = _plan(run, tmp_path, 'gpu = "h100-80g"\nmemory_bandwidth_gbs = 6700\n')
    assert table["artifact"] == doubled["artifact"] and table["tp"] == doubled["tp"] == 1
    # One sequence decoding on one card: each step reads the whole weights once, so twice the
    # table's 3,350 GB/s reads them in half the time.
    weights = table["serving"]["decode_step"]["weights"]
    assert doubled["serving"]["decode_step"]["weights"] == pytest.approx(weights / 2, rel=1e-3)


def test_a_named_link_brings_its_own_bandwidth_unless_the_fleet_gives_one():
    # pcie3 on an H100 planned NVLink 4's 450 GB/s (issue 33): PCIe 3 x16 is 16 GB/s one way.
    assert kind(NODE + 'gpu = "h100-80g"\nlink = "pcie3"\n').spec.link_bandwidth == 16e9
    assert kind(NODE + 'gpu = "h100-80g"\nlink = "pcie5"\n').spec.link_bandwidth == 64e9
    assert kind(NODE + 'gpu = "h100-80g"\nlink = "none"\n').spec.link_bandwidth == 0.0
    # Given, the fleet's figure wins; the card's own link named keeps the table's (an H800's
    # NVLink 4 is 200 GB/s, not an H100's 450).
    given = kind(NODE + 'gpu = "h100-80g"\nlink = "pcie3"\nlink_gbs = 20\n')
    assert given.spec.link_bandwidth == 20e9
    assert kind(NODE + 'gpu = "h800-80g"\nlink = "nvlink4"\n').spec.link_bandwidth == 200e9
    assert kind(NODE + 'gpu = "a100-80g"\nlink = "nvlink4"\n').spec.link_bandwidth == 450e9


def test_a_json_null_link_is_refused():
    text = '{"node": [{"name": "ws", "gpu": "h100-80g", "gpus": 1, "link": null}]}'
    with pytest.raises(FleetFileError) as e:
        parse_fleet(text, "f.json")
    assert e.value.message.endswith(
        "link is None; it must be one of nvlink3, nvlink4, nvlink5, infinity-fabric, pcie3, "
        "pcie4, pcie5, none."
    )


def _decode(run, tmp_path: Path, lines: str) -> float:
    fleet = tmp_path / "fleet.toml"
    fleet.write_text('[[node]]\nname = "n"\ngpu = "h100-80g"\ngpus = 4\n' + lines)
    code, out, err = run("check", "--fleet", str(fleet), "--json", "--", "vllm", "serve",
                         "Qwen/Qwen3-8B", "-tp", "4")  # fmt: skip
    assert code == 0, err
    return json.loads(out)["options"][0]["speed"]["decode_tokens_per_s"]


def test_a_named_link_is_timed_as_that_link(run, tmp_path: Path):
    nvlink = _decode(run, tmp_path, "")
    pcie3 = _decode(run, tmp_path, 'link = "pcie3"\n')
    # The name alone plans what its figure given by hand plans.
    assert pcie3 == _decode(run, tmp_path, 'link = "pcie3"\nlink_gbs = 16\n')
    # No link of its own: the cards exchange over PCIe 5 (64 GB/s) and pay its latency, so TP 4
    # is slower than over NVLink, and no slower than over PCIe 3.
    none = _decode(run, tmp_path, 'link = "none"\n')
    assert pcie3 < none < nvlink


@pytest.mark.parametrize(
    "lines, message",
    [
        (
            'gpu = "h100-80g"\nfabric = "ib0"\nfabric_kind = "ib"\n',
            "f.toml:6: node[0].fabric_kind is 'ib'; it must be one of infiniband, roce, ethernet.",
        ),
        (
            'gpu = "h100-80g"\nfabric_kind = "roce"\n',
            "f.toml:5: node[0].fabric_kind is given without a fabric to say what it is.",
        ),
    ],
)
def test_a_fabric_kind_is_one_of_three_and_needs_its_fabric(lines: str, message: str):
    # What a fabric is, said by a key (issue 33): its name's prefix said nothing.
    with pytest.raises(FleetFileError) as e:
        parse_fleet(NODE + lines, "f.toml")
    assert e.value.message == message


def test_a_fabric_kind_is_kept_on_its_nodes():
    text = NODE + 'gpu = "h100-80g"\nfabric = "east"\nfabric_kind = "roce"\n'
    assert parse_fleet(text, "f.toml").nodes[0].fabric_kind == "roce"
