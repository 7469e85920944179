"""GGUF headers: bytes by tensor and by layer, quant names, split files, and the Model they state.

Every file is written by gguf's own GGUFWriter (fixtures/gguf_files.py). Bytes are worked by hand
from GGML_QUANT_SIZES: Q4_K is 144 B a block of 256, Q6_K 210 B a 256, Q8_0 34 B a 32, F32 4 B.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fixtures.gguf_files import Q, llama_metadata, llama_tensors, write_gguf, write_split
from llmfit.errors import WeightsError
from llmfit.plan.model import AttentionKind, LayerGroup
from llmfit.sources.gguf import (
    gguf_artifacts,
    group_files,
    kv_layout,
    layout_of,
    model_from_gguf,
    quant_from_filename,
    quant_name,
    read_header,
)
from llmfit.sources.repo import load_repo

Q4KM = {"attn_v.weight": Q.Q6_K, "ffn_down.weight": Q.Q6_K, "output.weight": Q.Q6_K}


def tiny_llama(path: Path, file_type: int = 15, tied: bool = False, **md) -> Path:
    """Two layers, embedding 256, FFN 512, 4 heads, 2 KV heads (K and V 128 wide), vocab 1024."""
    meta = llama_metadata(2, 256, 512, 4, 2, 4096, file_type) | {"llama.vocab_size": 1024} | md
    write_gguf(path, "llama", meta, llama_tensors(2, 256, 512, 1024, 128, Q.Q4_K, tied=tied,
                                                  overrides=Q4KM))  # fmt: skip
    return path


# One layer of tiny_llama, tensor by tensor:
LAYER = (
    256 * 4  # attn_norm, f32
    + 256 * 256 // 256 * 144  # attn_q, Q4_K: 36,864
    + 128 * 256 // 256 * 144  # attn_k, Q4_K: 18,432
    + 128 * 256 // 256 * 210  # attn_v, Q6_K: 26,880
    + 256 * 256 // 256 * 144  # attn_output, Q4_K: 36,864
    + 256 * 4  # ffn_norm
    + 2 * (512 * 256 // 256 * 144)  # ffn_gate and ffn_up, Q4_K: 73,728 each
    + 512 * 256 // 256 * 210  # ffn_down, Q6_K: 107,520
)
EMBED = 1024 * 256 // 256 * 144  # token_embd, Q4_K
OUTPUT = 1024 * 256 // 256 * 210 + 256 * 4  # output (Q6_K) and output_norm (f32)


def test_per_layer_and_total_bytes_from_the_header(tmp_path):
    assert (LAYER, EMBED, OUTPUT) == (376_064, 147_456, 216_064)
    h = read_header(tiny_llama(tmp_path / "tiny-Q4_K_M.gguf"))
    assert h.architecture == "llama"
    attn_v = next(t for t in h.tensors if t.name == "blk.0.attn_v.weight")
    assert (attn_v.shape, attn_v.n_elements, attn_v.nbytes) == ((256, 128), 32_768, 26_880)
    layout = layout_of([h])
    assert layout.layer_bytes == (376_064, 376_064)
    assert layout.expert_bytes == (0, 0)
    assert (layout.embed_bytes, layout.output_bytes) == (147_456, 216_064)
    assert not layout.tied_embeddings
    assert h.data_bytes == 2 * 376_064 + 147_456 + 216_064 == 1_115_648
    assert (layout.vocab, layout.embedding, layout.feed_forward) == (1024, 256, 512)


def test_tied_embeddings_are_marked(tmp_path):
    layout = layout_of([read_header(tiny_llama(tmp_path / "t.gguf", tied=True))])
    assert layout.tied_embeddings
    assert layout.output_bytes == 1024  # output_norm alone


def test_model_from_the_header_alone(tmp_path):
    m = model_from_gguf([read_header(tiny_llama(tmp_path / "t.gguf"))])
    assert (m.architecture, m.layers, m.attention_heads, m.kv_heads, m.head_dim) == (
        "llama", 2, 4, 2, 64,
    )  # fmt: skip
    assert m.layer_groups == (LayerGroup(AttentionKind.FULL, 2, kv_heads=2, head_dim=64),)
    assert (m.max_context, m.vocab_size, m.hidden_size) == (4096, 1024, 256)
    # Elements: per layer 256 + 65,536 + 32,768 × 2 + 65,536 + 256 + 131,072 × 3 = 590,336;
    # token_embd and output 262,144 each; output_norm 256.
    assert m.params == 2 * 590_336 + 2 * 262_144 + 256 == 1_705_216
    assert m.experts is None and m.active_params is None


@pytest.mark.parametrize(
    ("file_type", "name", "expected"),
    [
        (15, "x.gguf", "Q4_K_M"),
        (7, "x.gguf", "Q8_0"),
        (30, "x.gguf", "IQ4_XS"),
        (38, "x.gguf", "MXFP4_MOE"),
        (32, "x.gguf", "BF16"),
        # 1024 = guessed, and ids from forks: the file name says it.
        (1024, "Qwen3-8B-UD-Q5_K_XL.gguf", "Q5_K"),
        (156, "Qwen3-30B-A3B-IQ1_KT.gguf", "IQ1_KT"),
        (999, "model.gguf", None),
    ],
)
def test_quant_name_from_file_type_else_file_name(tmp_path, file_type, name, expected):
    h = read_header(tiny_llama(tmp_path / "t.gguf", file_type=file_type))
    assert quant_name(h, name) == expected


def test_quant_from_file_name():
    assert quant_from_filename("Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf") == "Q4_K_M"
    assert quant_from_filename("gemma-3-27b-it-q4_0.gguf") == "Q4_0"
    assert quant_from_filename("qwen2.5-14b-instruct-q4_k_m-00001-of-00003.gguf") == "Q4_K_M"
    assert quant_from_filename("model-f16.gguf") == "F16"


def test_split_parts_are_grouped_first_part_first():
    groups, warnings = group_files(
        [
            "Q4_K_M/m-Q4_K_M-00002-of-00003.gguf",
            "Q4_K_M/m-Q4_K_M-00001-of-00003.gguf",
            "Q4_K_M/m-Q4_K_M-00003-of-00003.gguf",
            "m-Q8_0.gguf",
            "Q2_K/m-Q2_K-00001-of-00002.gguf",
        ]
    )
    assert groups == [
        [
            "Q4_K_M/m-Q4_K_M-00001-of-00003.gguf",
            "Q4_K_M/m-Q4_K_M-00002-of-00003.gguf",
            "Q4_K_M/m-Q4_K_M-00003-of-00003.gguf",
        ],
        ["m-Q8_0.gguf"],
    ]
    assert warnings == ["Q2_K/m-Q2_K.gguf: part 2 of 2 is not here, so it is not planned."]


def test_a_split_file_is_one_artifact_and_mmproj_is_its_projector(tmp_path):
    meta = llama_metadata(2, 256, 512, 4, 2, 4096, 7) | {"llama.vocab_size": 1024}
    tensors = llama_tensors(2, 256, 512, 1024, 128, Q.Q8_0)
    write_split("Q8_0/tiny-Q8_0-{:05d}-of-{:05d}.gguf", "llama", meta, tensors, 3, tmp_path)
    tiny_llama(tmp_path / "tiny-Q4_K_M.gguf")
    write_gguf(tmp_path / "mmproj-tiny-F16.gguf", "clip", {}, [("v.patch", (64, 64), Q.F16)])
    found = gguf_artifacts(tmp_path)
    q8, q4 = found.artifacts  # in path order
    assert q8.name == "Q8_0/tiny-Q8_0.gguf"
    assert q8.shards == 3
    assert q8.files == tuple(f"Q8_0/tiny-Q8_0-{i:05d}-of-00003.gguf" for i in (1, 2, 3))
    assert q8.path == str(tmp_path / "Q8_0/tiny-Q8_0-00001-of-00003.gguf")
    # Q8_0 per layer: 590,336 elements, of which 512 are f32 norms: 589,824 / 32 × 34 + 512 × 4.
    layer = 589_824 // 32 * 34 + 512 * 4
    assert q8.layout is not None and q8.layout.layer_bytes == (layer, layer) == (628_736, 628_736)
    embed = 262_144 // 32 * 34
    assert q8.bytes == 2 * layer + embed + embed + 1024 == 1_815_552
    assert q8.params == 1_705_216
    assert (q4.name, q4.quant, q4.shards, q4.bytes) == ("tiny-Q4_K_M.gguf", "Q4_K_M", 1, 1_115_648)
    assert q4.projector == str(tmp_path / "mmproj-tiny-F16.gguf")
    assert q4.projector_bytes == (tmp_path / "mmproj-tiny-F16.gguf").stat().st_size


def test_split_parts_whose_headers_disagree_with_their_names_are_not_planned(tmp_path):
    # Two 3-part splits, each with one part whose file does not say what its name says:
    # - Q8_0: parts 2 and 3 swapped by name, so the file named 00002 states split.no 2 (from 0);
    # - Q4_0: its third part is another split's (count 2, its second part): split.no 1 is what
    #   the name 00003 would need to be 2, and it is caught at its split.no first.
    # Summed by name, either would be planned as a model of the right size but the wrong files;
    # llama.cpp refuses both ("invalid split file idx", llama_model_loader).
    meta = llama_metadata(2, 256, 512, 4, 2, 4096, 7) | {"llama.vocab_size": 1024}
    tensors = llama_tensors(2, 256, 512, 1024, 128, Q.Q8_0)
    repo = tmp_path / "repo"
    a, b, c = write_split("Q8_0/t-Q8_0-{:05d}-of-{:05d}.gguf", "llama", meta, tensors, 3, repo)
    b.rename(tmp_path / "swap")
    c.rename(b)
    (tmp_path / "swap").rename(c)
    write_split("Q4_0/t-Q4_0-{:05d}-of-{:05d}.gguf", "llama", meta, tensors, 3, repo)
    other = write_split("o-{:05d}-of-{:05d}.gguf", "llama", meta, tensors, 2, tmp_path)
    other[1].replace(repo / "Q4_0/t-Q4_0-00003-of-00003.gguf")
    found = gguf_artifacts(repo)
    assert found.artifacts == ()
    assert found.warnings == (
        "Q4_0/t-Q4_0.gguf: Q4_0/t-Q4_0-00003-of-00003.gguf states it is split part 1 (from 0), "
        "not 2, so it is not planned.",
        "Q8_0/t-Q8_0.gguf: Q8_0/t-Q8_0-00002-of-00003.gguf states it is split part 2 (from 0), "
        "not 1, so it is not planned.",
    )


def test_a_split_part_that_states_another_count_is_not_planned(tmp_path):
    # A 2-part split whose second file is the second part of a 3-part split: its split.no (1) is
    # right for its place, its split.count (3) is not the 2 its name says.
    meta = llama_metadata(2, 256, 512, 4, 2, 4096, 7) | {"llama.vocab_size": 1024}
    tensors = llama_tensors(2, 256, 512, 1024, 128, Q.Q8_0)
    repo = tmp_path / "repo"
    write_split("t-{:05d}-of-{:05d}.gguf", "llama", meta, tensors, 2, repo)
    three = write_split("t-{:05d}-of-{:05d}.gguf", "llama", meta, tensors, 3, tmp_path)
    three[1].replace(repo / "t-00002-of-00002.gguf")
    assert gguf_artifacts(repo).warnings == (
        "t.gguf: t-00002-of-00002.gguf states the model is split in 3 parts, not the 2 its file "
        "names say, so it is not planned.",
    )


def test_a_gguf_only_repository_reads_its_model_from_the_header(tmp_path):
    tiny_llama(tmp_path / "tiny-Q4_K_M.gguf")
    repo = load_repo(str(tmp_path))
    assert repo.model.architecture == "llama"
    assert [a.quant for a in repo.artifacts] == ["Q4_K_M"]


# The bundled fixture's snapshot: Tiny-Llama-Q8_0 in two parts, then Q4_K_M and Q6_K whole.
TINY_GGUF = (
    Path(__file__).resolve().parents[2]
    / "fixtures/hub/models--llmfit-fixtures--Tiny-Llama-GGUF/snapshots"
    / "e1943208a7d32dcbf32aa4e9b78b9aef69aebd67"
)


def test_a_split_files_model_counts_every_parts_tensors():
    # Tiny-Llama (4 layers, embedding 256, FFN 256, K and V 128 wide, vocab 256), by its real
    # files' shapes: a layer is 256 + 65,536 + 32,768 × 2 + 65,536 + 256 + 65,536 × 3 = 393,728
    # elements; token_embd and output 65,536 each, output_norm 256: 4 × 393,728 + 131,328 =
    # 1,706,240. The Q8_0 file's first part holds token_embd, layers 0 and 1 and layer 2's
    # attn_norm (65,536 + 2 × 393,728 + 256 = 853,248), the second the rest (852,992), and
    # llama.cpp counts both (llama_model_loader adds every split's tensors to n_elements).
    repo = load_repo(str(TINY_GGUF))
    q8, q4, q6 = repo.artifacts
    assert (q8.name, q8.shards) == ("Q8_0/Tiny-Llama-Q8_0.gguf", 2)
    first, second = (read_header(TINY_GGUF / f) for f in q8.files)
    assert sum(t.n_elements for t in first.tensors) == 65_536 + 2 * 393_728 + 256 == 853_248
    assert sum(t.n_elements for t in second.tensors) == 852_992
    assert repo.model.params == 4 * 393_728 + 131_328 == 1_706_240
    # The same model whichever file states it: every quant holds the same tensors.
    assert q8.params == q4.params == q6.params == repo.model.params


def test_gemma3_sliding_window_layers_follow_its_fixed_period(tmp_path):
    p = tmp_path / "g.gguf"
    meta = {
        "gemma3.block_count": 8,
        "gemma3.embedding_length": 256,
        "gemma3.attention.head_count": 4,
        "gemma3.attention.head_count_kv": 2,
        "gemma3.attention.key_length": 128,
        "gemma3.attention.value_length": 128,
        "gemma3.attention.sliding_window": 1024,
        "gemma3.context_length": 131072,
    }
    write_gguf(p, "gemma3", meta, [("token_embd.weight", (16, 256), Q.F16)])
    sw = LayerGroup(AttentionKind.SLIDING, 5, kv_heads=2, head_dim=128, window=1024)
    # llama.cpp set_swa_pattern(6): layers 0-4 windowed, 5 full, 6-7 windowed.
    assert kv_layout(read_header(p)) == (
        sw,
        LayerGroup(AttentionKind.FULL, 1, kv_heads=2, head_dim=128),
        LayerGroup(AttentionKind.SLIDING, 2, kv_heads=2, head_dim=128, window=1024),
    )


def test_sliding_window_pattern_key_and_per_layer_kv_heads(tmp_path):
    p = tmp_path / "x.gguf"
    meta = {
        "x.block_count": 4,
        "x.embedding_length": 512,
        "x.attention.head_count": 8,
        "x.attention.head_count_kv": [2, 2, 4, 4],
        "x.attention.sliding_window": 512,
        "x.attention.sliding_window_pattern": [True, False, True, False],
    }
    write_gguf(p, "x", meta, [])
    k = AttentionKind
    assert kv_layout(read_header(p)) == (
        LayerGroup(k.SLIDING, 1, kv_heads=2, head_dim=64, window=512),
        LayerGroup(k.FULL, 1, kv_heads=2, head_dim=64),
        LayerGroup(k.SLIDING, 1, kv_heads=4, head_dim=64, window=512),
        LayerGroup(k.FULL, 1, kv_heads=4, head_dim=64),
    )


def test_deepseek_mla_keeps_one_latent_per_token(tmp_path):
    p = tmp_path / "ds.gguf"
    meta = {
        "deepseek2.block_count": 3,
        "deepseek2.embedding_length": 7168,
        "deepseek2.attention.head_count": 128,
        "deepseek2.attention.head_count_kv": 1,
        "deepseek2.attention.key_length": 576,
        "deepseek2.attention.value_length": 512,
        "deepseek2.attention.key_length_mla": 192,
        "deepseek2.attention.value_length_mla": 128,
        "deepseek2.attention.kv_lora_rank": 512,
        "deepseek2.expert_count": 256,
        "deepseek2.expert_used_count": 8,
    }
    experts = [(f"blk.{i}.ffn_up_exps.weight", (256, 64, 64), Q.F16) for i in range(3)]
    write_gguf(p, "deepseek2", meta, [("token_embd.weight", (32, 64), Q.F16), *experts])
    m = model_from_gguf([read_header(p)])
    assert m.layer_groups == (
        LayerGroup(AttentionKind.MLA, 3, kv_heads=1, head_dim=576, latent_dim=576),
    )
    assert (m.experts, m.experts_active) == (256, 8)
    # Experts 3 × 256 × 64 × 64 elements, 8 of 256 active; token_embd 2,048.
    assert m.params == 3 * 1_048_576 + 2048
    assert m.active_params == 2048 + 3 * 1_048_576 * 8 // 256 == 100_352
    assert not m.notes


def test_a_pre_mla_deepseek_file_is_noted(tmp_path):
    p = tmp_path / "old.gguf"
    meta = {
        "deepseek2.block_count": 1,
        "deepseek2.embedding_length": 7168,
        "deepseek2.attention.head_count": 128,
        "deepseek2.attention.head_count_kv": 128,
        "deepseek2.attention.key_length": 192,
        "deepseek2.attention.value_length": 128,
        "deepseek2.attention.kv_lora_rank": 512,
    }
    write_gguf(p, "deepseek2", meta, [])
    m = model_from_gguf([read_header(p)])
    assert m.layer_groups == (
        LayerGroup(AttentionKind.FULL, 1, kv_heads=128, head_dim=192, head_dim_v=128),
    )
    assert "predates llama.cpp's MLA cache" in m.notes[0]


def test_hybrid_recurrent_layers_keep_an_f32_state(tmp_path):
    p = tmp_path / "h.gguf"
    meta = {
        "qwen3next.block_count": 4,
        "qwen3next.embedding_length": 2048,
        "qwen3next.attention.head_count": 16,
        "qwen3next.attention.head_count_kv": 2,
        "qwen3next.attention.key_length": 256,
        "qwen3next.attention.value_length": 256,
        "qwen3next.full_attention_interval": 4,
        "qwen3next.ssm.conv_kernel": 4,
        "qwen3next.ssm.inner_size": 4096,
        "qwen3next.ssm.state_size": 128,
        "qwen3next.ssm.group_count": 16,
    }
    write_gguf(p, "qwen3next", meta, [])
    # R = (4 − 1) × (4096 + 2 × 16 × 128) = 24,576; S = 128 × 4096 = 524,288; f32.
    state = 4 * (24_576 + 524_288)
    assert kv_layout(read_header(p)) == (
        LayerGroup(AttentionKind.LINEAR, 3, state_bytes=state),
        LayerGroup(AttentionKind.FULL, 1, kv_heads=2, head_dim=256),
    )
    assert state == 2_195_456


def test_a_truncated_file_is_one_sentence_naming_it(tmp_path):
    p = tiny_llama(tmp_path / "t.gguf")
    size = p.stat().st_size
    with open(p, "r+b") as f:
        f.truncate(size - 100)
    with pytest.raises(WeightsError) as e:
        read_header(p)
    # output.weight is the last tensor, and its 215,040 bytes end on the file's last byte.
    assert e.value.message == (
        f"{p} is truncated: its header places tensor data up to byte {size:,}, "
        f"but the file ends at byte {size - 100:,}."
    )


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"", "it is empty"),
        (
            b"PK\x03\x04 this is a zip file, not a model",
            "it does not begin with the GGUF magic bytes",
        ),
    ],
)
def test_a_corrupt_file_is_one_sentence_naming_it(tmp_path, content, why):
    p = tmp_path / "bad.gguf"
    p.write_bytes(content)
    with pytest.raises(WeightsError) as e:
        read_header(p)
    assert e.value.message == f"{p} is not a readable GGUF file ({why})."


def test_a_file_cut_inside_its_header_is_truncated(tmp_path):
    p = tmp_path / "bad.gguf"
    p.write_bytes(tiny_llama(tmp_path / "good.gguf").read_bytes()[:200])
    with pytest.raises(WeightsError) as e:
        read_header(p)
    # Its 21 tensor infos alone need more than the 184 bytes after the counts.
    assert e.value.message == (
        f"{p} is truncated or corrupt: at byte 8 it claims 21 tensors, at least 672 bytes, "
        "but the file ends 184 bytes later."
    )


def test_a_repository_with_config_and_gguf_offers_both(tmp_path):
    import shutil

    from tests.conftest import FIXTURES

    shutil.copyfile(
        FIXTURES / "src" / "meta-llama--Llama-3.1-8B-Instruct.json", tmp_path / "config.json"
    )
    tiny_llama(tmp_path / "tiny-Q4_K_M.gguf")
    (tmp_path / "model.safetensors.index.json").write_text(
        '{"metadata": {"total_size": 16060522496}, "weight_map": {}}'
    )
    repo = load_repo(str(tmp_path))
    assert repo.model.model_type == "llama"  # from config.json
    assert [(a.format, a.quant) for a in repo.artifacts] == [
        ("safetensors", "bf16"),
        ("gguf", "Q4_K_M"),
    ]
