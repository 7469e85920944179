"""vLLM releases as data: parsing, and each switch dated by the release whose code first has it.

Each date was found by reading the function named in the switch's `source` in every wheel from
0.11.0 to 0.34.0; the tests pin the release on either side of each change.
"""

from __future__ import annotations

import pytest

from llmfit.plan.engines.vllm_versions import KNOWN, NEWEST, SWITCHES, VllmVersion

V = VllmVersion.parse


def test_parse_accepts_release_numbers_as_people_write_them():
    assert V("0.33") == VllmVersion(33)
    assert V("0.27.1") == VllmVersion(27, 1)
    assert V("v0.11.0") == VllmVersion(11)
    assert V("0.18.1") == VllmVersion(18, 1)
    assert str(V("0.27.1")) == "0.27.1" and str(V("0.33.0")) == "0.33"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("0.35", "is not a version llmfit models: it knows vLLM 0.11 to 0.34."),
        ("0.10.2", "is not a version llmfit models: it knows vLLM 0.11 to 0.34."),
        ("1.0", "is not a release number like 0.33 or 0.27.1; llmfit models vLLM 0.11 to 0.34."),
        ("latest", "is not a release number like 0.33 or 0.27.1"),
    ],
)
def test_an_unknown_or_malformed_version_is_one_sentence_naming_the_range(text: str, says: str):
    with pytest.raises(ValueError) as e:
        V(text)
    assert says in str(e.value)
    assert str(e.value).count(". ") <= 1  # one sentence, with the range in it


def test_the_default_is_the_newest_release_modelled():
    assert NEWEST == V("0.34") == KNOWN[-1] and KNOWN[0] == V("0.11")


def test_every_switch_names_the_file_it_was_read_from():
    for s in SWITCHES:
        assert s.source.startswith("vllm/"), s.name
        assert 11 <= s.since <= 34 and (s.until is None or s.until > s.since), s.name


@pytest.mark.parametrize(
    ("switch", "before", "first"),
    [
        # gpu_worker.py determine_available_memory subtracts cudagraph_memory_estimate_applied,
        # which envs.py VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS defaults to "0" in 0.19.1 and
        # "1" in 0.20.0.
        ("cuda_graphs_in_budget", "0.19", "0.20"),
        # mem_utils.py memory_profiling: weights + peak + non-torch in 0.26.0;
        # total_consumed + transient_peak_headroom in 0.27.0.
        ("non_kv_from_free_memory", "0.26", "0.27"),
        # SlidingWindowSpec: sliding_window - 1 + max_num_batched_tokens in 0.25.0,
        # + max_in_flight_tokens in 0.26.0.
        ("window_in_flight_batches", "0.25", "0.26"),
        # entrypoints/cli/serve.py: api_server_count defaults to the data-parallel size in
        # 0.15.0 (vllm#32525); 0.14.1's --api-server-count defaults to 1 (openai/cli_args.py).
        ("api_server_per_dp_rank", "0.14", "0.15"),
        # arg_utils.py get_batch_defaults: the 160 GiB branch first appears in 0.28.0.
        ("big_card_batch_defaults", "0.27.1", "0.28"),
        # config/model.py is_prefix_caching_supported: hybrids False in 0.25.0, True in 0.26.0.
        ("hybrid_prefix_caching", "0.25", "0.26"),
        # mamba_mixer2.py get_kv_cache_spec sets num_prefill_checkpoint_blocks=1 from 0.32.0.
        ("mamba2_checkpoint_page", "0.31", "0.32"),
        ("gdn_checkpoint_page", "0.32", "0.33"),
        # config/cache.py: enable_extensible_kv_cache, resolved_gpu_memory_utilization and
        # DEFAULT_BLOCK_SIZE = 64 first appear in 0.34.0; v1/worker/gpu/warmup.py
        # run_kv_cache_sizing_warmup and VllmConfig._split_cudagraph_capture_sizes likewise.
        ("extensible_kv_cache", "0.33", "0.34"),
        ("gpu_memory_utilization_1_extensible", "0.33", "0.34"),
        ("block_size_64", "0.33", "0.34"),
        ("sizing_warmup", "0.33", "0.34"),
        ("blackwell_split_capture_sizes", "0.33", "0.34"),
        # config.py NemotronHForCausalLMConfig.DEFAULT_MAMBA_SSM_CACHE_DTYPE = "float32" in 0.20.
        ("nemotron_h_ssm_fp32", "0.19", "0.20"),
        ("kv_tokens_from_concurrency", "0.20", "0.21"),
        ("chunked_local_hybrid_allocator", "0.13", "0.14"),
        ("null_block_reserved", "0.28", "0.29"),
        ("fp8_per_tensor_alias", "0.30", "0.31"),
        ("group_size_max_under_1_5", "0.17", "0.18"),
        ("tower_skipped_text_only", "0.14", "0.15"),
        # lora/layers/fused_moe.py (FusedMoEWithLoRA) first ships in 0.12.0.
        ("lora_moe_experts", "0.11", "0.12"),
        # fused_moe/modular_kernel.py takes its buffers from current_workspace_manager() from
        # 0.13.0 (0.12.0 allocates them a call).
        ("moe_workspace_persistent", "0.12", "0.13"),
        # modular_kernel.py _chunk_info and the env's chunk size are gone in 0.18.0.
        ("moe_workspace_unchunked", "0.17", "0.18"),
    ],
)
def test_each_switch_turns_on_in_the_release_whose_code_first_has_it(
    switch: str, before: str, first: str
):
    assert not V(before).has(switch)
    assert V(first).has(switch) and NEWEST.has(switch)


def test_mamba_all_mode_lives_from_0_15_to_0_27():
    # model_executor/models/config.py MambaModelConfig: "all" if supports_mamba_prefix_caching
    # in 0.15.1-0.27.1; 0.28.0 sets "align" only.
    assert not V("0.14").has("mamba_all_mode")
    assert V("0.15").has("mamba_all_mode") and V("0.27.1").has("mamba_all_mode")
    assert not V("0.28").has("mamba_all_mode")


def test_the_moe_chunk_and_the_loras_extra_vocabulary_by_release():
    # envs.py VLLM_FUSED_MOE_CHUNK_SIZE: 64 × 1024 in 0.11.0, 16 × 1024 in 0.12.0-0.17.0, gone
    # (with modular_kernel.py _chunk_info) in 0.18.0.
    assert [V(x).moe_chunk for x in ("0.11", "0.12", "0.17", "0.18", "0.33")] == [
        65_536, 16_384, 16_384, None, None,
    ]  # fmt: skip
    # 0.11's embedding adapter keeps lora_extra_vocab_size rows more; 0.12 drops them.
    assert V("0.11").has("lora_extra_vocab") and not V("0.12").has("lora_extra_vocab")


def test_valued_switches():
    # One API server for --data-parallel-size 4 in 0.14, one a rank from 0.15.
    assert [V(x).api_servers(4) for x in ("0.14", "0.15", "0.34")] == [1, 4, 4]
    assert V("0.34").api_servers(1) == 1
    assert V("0.19").default_gpu_memory_utilization == 0.90
    assert V("0.20").default_gpu_memory_utilization == 0.92
    assert [V(x).nemotron_h_ssm_dtype for x in ("0.12", "0.13", "0.19", "0.20")] == [
        None,
        "float16",
        "float16",
        "float32",
    ]
    assert [V(x).sampler for x in ("0.11", "0.12", "0.16", "0.17")] == [
        "flashinfer",
        "sort",
        "sort",
        "triton",
    ]
    assert V("0.30").quantization_fp8_flag == "fp8"
    assert V("0.31").quantization_fp8_flag == "fp8_per_tensor"


@pytest.mark.parametrize(
    ("arch", "moe", "hybrid", "quantized", "on_from"),
    [
        # VllmConfig._is_default_v2_model_runner_model with each release's
        # DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES: Qwen3 dense listed in 0.22, Llama in 0.23,
        # every dense model from 0.25, hybrids and unlisted MoEs from 0.29 (use_v2_model_runner
        # no longer asks).
        ("Qwen3ForCausalLM", False, False, False, 22),
        ("LlamaForCausalLM", False, False, False, 23),
        ("Gemma3ForConditionalGeneration", False, False, False, 25),
        ("LlamaForCausalLM", False, False, True, 24),  # a quantised Llama waits for the list rule
        ("DeepseekV3ForCausalLM", True, False, False, 29),
        ("Qwen3MoeForCausalLM", True, False, False, 29),
        ("NemotronHForCausalLM", False, True, False, 29),
        ("GptOssForCausalLM", True, False, True, 29),
    ],
)
def test_model_runner_v2_by_default(arch: str, moe: bool, hybrid: bool, quantized: bool, on_from):
    for minor in range(11, 34):
        runs = VllmVersion(minor).uses_model_runner_v2(
            arch, moe=moe, hybrid=hybrid, quantized=quantized
        )
        assert runs == (minor >= on_from), (arch, minor)
