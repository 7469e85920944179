"""Fixture repositories for the loopback Hub: real configs, and weight shards with real headers.

A shard's header lists the tensors a checkpoint of that architecture holds (names, dtypes, shapes
and byte offsets as the checkpoint lays them out), and the shard declares its full size, gigabytes;
only the header is real bytes. A planner that reads more than the headers shows up in the bytes
the server counts.
"""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path

from tests.hubserver import FileSpec, FixtureRepo

SRC = Path(__file__).resolve().parent.parent / "fixtures" / "src"
WIDTH = {"BF16": 2, "F16": 2, "F32": 4, "F8_E4M3": 1}


def commit_of(text: str) -> str:
    return hashlib.sha1(("hub:" + text).encode()).hexdigest()


def safetensors_header(tensors: list[tuple[str, str, tuple[int, ...]]]) -> tuple[bytes, int]:
    """The first bytes of a safetensors file holding these tensors, and its data's length.

    As the format writes it: an 8-byte little-endian length, then the JSON header padded with
    spaces to a multiple of 8.
    """
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, dtype, shape in tensors:
        n = WIDTH[dtype]
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", len(raw)) + raw, offset


def dense_tensors(cfg: dict) -> list[list[tuple[str, str, tuple[int, ...]]]]:
    """A Llama/Qwen3 dense decoder's tensors, grouped: embeddings, each layer, then the head."""
    h, inter, vocab = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    heads, kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim") or h // heads
    qk_norm = cfg["model_type"] == "qwen3"
    groups: list[list[tuple[str, str, tuple[int, ...]]]] = [
        [("model.embed_tokens.weight", "BF16", (vocab, h))]
    ]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        layer = [
            (p + "input_layernorm.weight", "BF16", (h,)),
            (p + "self_attn.q_proj.weight", "BF16", (heads * hd, h)),
            (p + "self_attn.k_proj.weight", "BF16", (kv * hd, h)),
            (p + "self_attn.v_proj.weight", "BF16", (kv * hd, h)),
            (p + "self_attn.o_proj.weight", "BF16", (h, heads * hd)),
            (p + "post_attention_layernorm.weight", "BF16", (h,)),
            (p + "mlp.gate_proj.weight", "BF16", (inter, h)),
            (p + "mlp.up_proj.weight", "BF16", (inter, h)),
            (p + "mlp.down_proj.weight", "BF16", (h, inter)),
        ]
        if qk_norm:
            layer += [
                (p + "self_attn.q_norm.weight", "BF16", (hd,)),
                (p + "self_attn.k_norm.weight", "BF16", (hd,)),
            ]
        groups.append(layer)
    head = [("model.norm.weight", "BF16", (h,))]
    if not cfg.get("tie_word_embeddings"):
        head.append(("lm_head.weight", "BF16", (vocab, h)))
    groups.append(head)
    return groups


def sharded_repo(repo_id: str, config_file: str, shards: int, extra_files: int = 0) -> FixtureRepo:
    """A repository as the Hub holds a sharded safetensors checkpoint (weights declared, not held).

    `extra_files` adds that many small files beside the weights (as repositories with many files
    have), to show that listing them costs nothing but their names.
    """
    config = (SRC / config_file).read_bytes()
    cfg = json.loads(config)
    groups = dense_tensors(cfg)
    per = -(-len(groups) // shards)
    files: dict[str, FileSpec] = {"config.json": FileSpec(config)}
    weight_map: dict[str, str] = {}
    total = 0
    for s in range(shards):
        tensors = [t for g in groups[s * per : (s + 1) * per] for t in g]
        name = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        head, data = safetensors_header(tensors)
        files[name] = FileSpec(head, size=len(head) + data, lfs=True)
        weight_map.update({t[0]: name for t in tensors})
        total += data
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    files["model.safetensors.index.json"] = FileSpec(json.dumps(index, indent=2).encode())
    files["generation_config.json"] = FileSpec(b'{"do_sample": true}\n')
    for i in range(extra_files):
        files[f"extra/notes-{i:04d}.md"] = FileSpec(f"note {i}\n".encode())
    return FixtureRepo(repo_id, commit_of(repo_id), files)


def header_bytes(repo: FixtureRepo) -> int:
    """What reading every safetensors header of a repository costs: 8 bytes and the JSON each."""
    total = 0
    for name, spec in repo.files.items():
        if name.endswith(".safetensors"):
            (n,) = struct.unpack("<Q", spec.content[:8])
            total += 8 + n
    return total


def gguf_file(
    directory: Path, name: str, file_type: int, qtype, *, tokens: int, parts: int = 1
) -> dict[str, FileSpec]:
    """A Llama GGUF as the Hub holds one (split into `parts` as gguf-split does): each file's
    header is real, written by gguf's writer with a `tokens`-long vocabulary, and the file
    declares the length its tensor infos call for (gigabytes), of which only the header is held."""
    from fixtures.gguf_files import llama_metadata, llama_tensors, write_gguf, write_split
    from llmfit.sources.gguf import parse_gguf

    meta = llama_metadata(4, 4096, 14336, 32, 8, 8192, file_type) | {
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.tokens": [f"tok{i}" for i in range(tokens)],
    }
    tensors = llama_tensors(4, 4096, 14336, tokens, 1024, qtype)
    if parts == 1:
        paths = [directory / name]
        write_gguf(paths[0], "llama", meta, tensors, with_data=False)
    else:
        stem = name.removesuffix(".gguf")
        paths = write_split(
            stem + "-{:05d}-of-{:05d}.gguf", "llama", meta, tensors, parts, directory
        )
    out = {}
    for p in paths:
        head = p.read_bytes()[: p.stat().st_size]
        h = parse_gguf(head, p.name)
        end = h.data_offset + sum(-(-t.nbytes // 32) * 32 for t in h.tensors)
        out[p.name] = FileSpec(head[: h.header_bytes], size=end, lfs=True)
    return out


def gguf_repo(repo_id: str, directory: Path, tokens: int = 30_000) -> FixtureRepo:
    """A GGUF-only repository (no config.json), as unsloth's and bartowski's are: three quants,
    the largest split in two parts."""
    import gguf

    Q = gguf.GGMLQuantizationType
    files: dict[str, FileSpec] = {"README.md": FileSpec(b"# Tiny Llama GGUF\n")}
    files |= gguf_file(directory, "Tiny-Llama-Q4_K_M.gguf", 15, Q.Q4_K, tokens=tokens)
    files |= gguf_file(directory, "Tiny-Llama-Q6_K.gguf", 18, Q.Q6_K, tokens=tokens)
    files |= gguf_file(directory, "Tiny-Llama-Q8_0.gguf", 7, Q.Q8_0, tokens=tokens, parts=2)
    return FixtureRepo(repo_id, commit_of(repo_id), files)


def gguf_header_bytes(repo: FixtureRepo) -> int:
    """The sum of the GGUF headers' lengths (to the end of the tensor infos)."""
    return sum(len(s.content) for n, s in repo.files.items() if n.endswith(".gguf"))
