"""vLLM releases as data: every change in how vLLM sizes a card's memory, dated in one table.

Each row of `SWITCHES` is one behaviour change, the first release (0.X) that has it, and the vLLM
file and function it was read from. The dates were found by reading the PyPI wheels of every
release from 0.11.0 to 0.34.0 (`pip download vllm==X --no-deps`) and diffing the functions named.
`vllm_memory.py` asks a `VllmVersion` whether a switch is on and never compares versions itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Switch:
    """One change in how vLLM sizes memory, and the first release that makes it."""

    name: str
    # The minor version of the first 0.X release that behaves this way.
    since: int
    # The vLLM file and function the behaviour is read from.
    source: str
    # What it changes, in words (docs/accuracy.md prints these).
    change: str
    # The first release that no longer does (None: still so in the newest modelled).
    until: int | None = None


SWITCHES: tuple[Switch, ...] = (
    Switch(
        "sampler_not_flashinfer",
        12,
        "vllm/v1/sample/ops/topk_topp_sampler.py TopKTopPSampler.__init__",
        "the sampler warm-up no longer takes FlashInfer's top-k/top-p path by default "
        "(VLLM_USE_FLASHINFER_SAMPLER becomes opt-in); it sorts the logits in PyTorch",
    ),
    Switch(
        "lora_extra_vocab",
        11,
        "vllm/lora/layers/vocal_parallel_embedding.py VocabParallelEmbeddingWithLoRA."
        "create_lora_weights; vllm/lora/layers/logits_processor.py",
        "a LoRA slot's embedding adapter keeps lora_extra_vocab_size (256) more rows and their "
        "embeddings, and the output head's B is padded to a multiple of 256 rows; gone in 0.12",
        until=12,
    ),
    Switch(
        "lora_moe_experts",
        12,
        "vllm/lora/layers/fused_moe.py FusedMoEWithLoRA.create_lora_weights; "
        "vllm/lora/model_manager.py LoRAModelManager._create_lora_modules",
        "with --enable-lora every MoE layer takes adapters too: A and B of gate, up and down for "
        "every local expert and slot (before: the experts took none)",
    ),
    Switch(
        "moe_chunk_16k",
        12,
        "vllm/envs.py VLLM_FUSED_MOE_CHUNK_SIZE; vllm/model_executor/layers/fused_moe/"
        "modular_kernel.py _chunk_info",
        "the fused MoE runs at most 16,384 tokens at a time (was 65,536), so its intermediate "
        "buffers are sized for no more; gone in 0.18",
        until=18,
    ),
    Switch(
        "moe_workspace_persistent",
        13,
        "vllm/v1/worker/workspace.py WorkspaceManager; vllm/model_executor/layers/fused_moe/"
        "modular_kernel.py _allocate_buffers",
        "the fused MoE's intermediate buffers come from a workspace the profile run sizes and "
        "that stays allocated (before: freed after each layer, so only the peak saw them)",
    ),
    Switch(
        "moe_workspace_unchunked",
        18,
        "vllm/model_executor/layers/fused_moe/modular_kernel.py _allocate_buffers",
        "the MoE workspace is sized for every token its experts see at once: under data-parallel "
        "attention with expert parallelism, every rank's batch (all-gather/reduce-scatter)",
    ),
    Switch(
        "moe_flashinfer_block_fp8",
        15,
        "vllm/model_executor/layers/fused_moe/oracle/fp8.py select_fp8_moe_backend; "
        "flashinfer_cutlass_moe.py FlashInferExperts.workspace_shapes",
        "on Hopper a block-FP8 MoE (128 x 128 weight blocks) runs FlashInfer's CUTLASS kernel "
        "(before: Triton or DeepGEMM): vLLM's workspace holds only its output, M x hidden, and "
        "FlashInfer allocates its own scratch on every call, M x top-k rows of the permuted "
        "input, the gated FC1 output and the FP8 copy of the activations, a transient peak",
    ),
    Switch(
        "moe_flashinfer_ep_only",
        17,
        "vllm/model_executor/layers/fused_moe/oracle/fp8.py _get_priority_backends",
        "FlashInfer's CUTLASS kernel leads for block FP8 on Hopper only under expert "
        "parallelism; without it Triton leads",
    ),
    Switch(
        "capture_sizes_step16",
        12,
        "vllm/config/vllm.py VllmConfig._set_cudagraph_sizes",
        "CUDA-graph capture sizes step by 16 past 256 (51 sizes up to 512, not 67)",
    ),
    Switch(
        "gpt_oss_capture_1024",
        12,
        "vllm/model_executor/models/config.py GptOssForCausalLMConfig",
        "gpt-oss captures CUDA graphs up to 1,024 tokens (83 sizes)",
    ),
    Switch(
        "mla_block_16_on_hopper",
        12,
        "vllm/platforms/cuda.py _get_backend_priorities",
        "MLA on Hopper runs FLASH_ATTN_MLA (16-token blocks) before FlashMLA (64)",
    ),
    Switch(
        "nemotron_h_ssm_fp16",
        13,
        "vllm/model_executor/models/config.py NemotronHForCausalLMConfig",
        "Nemotron-H keeps its SSM state in float16 unless the config names a dtype",
    ),
    Switch(
        "chunked_local_hybrid_allocator",
        14,
        "vllm/envs.py VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE (default 1); "
        "vllm/config/vllm.py VllmConfig.__post_init__",
        "Llama 4's chunked-local layers keep a chunk, not the whole context (before: the hybrid "
        "allocator was off for them and every layer held max_model_len)",
    ),
    Switch(
        "tower_skipped_text_only",
        15,
        "vllm/model_executor/models/interfaces.py SupportsMultiModal._mark_tower_model",
        "a vision tower whose modalities are all limited to 0 (--limit-mm-per-prompt) is not "
        "built, so its weights and its encoder cache cost nothing",
    ),
    Switch(
        "mamba_align_mode",
        15,
        "vllm/v1/kv_cache_interface.py MambaSpec.max_memory_usage_bytes",
        "with prefix caching on, a Mamba/GDN layer holds 2 state pages a request (align mode)",
    ),
    Switch(
        "mamba_all_mode",
        15,
        "vllm/model_executor/models/config.py MambaModelConfig.verify_and_update_config; "
        "vllm/platforms/interface.py _align_hybrid_block_size",
        "with prefix caching on, a Mamba model that supports it (Nemotron-H, Jamba, Falcon-H1, "
        "Granite 4.0-H) keeps a state page every block of the context ('all' mode), its block a "
        "multiple of the Mamba chunk size; gone in 0.28, which runs 'align' for every model",
        until=28,
    ),
    Switch(
        "admission_by_groups",
        14,
        "vllm/v1/core/kv_cache_utils.py _max_memory_usage_bytes_from_groups",
        "the start-up check sizes one request by the padded groups (before: the sum over layers); "
        "until 0.19 it counted the first group's blocks only",
    ),
    Switch(
        "admission_sums_groups",
        19,
        "vllm/v1/core/kv_cache_utils.py _max_memory_usage_bytes_from_groups",
        "the start-up check adds every group's blocks (0.14-0.18 took the first group's)",
    ),
    Switch(
        "sampler_triton_top_k_top_p",
        17,
        "vllm/v1/sample/ops/topk_topp_sampler.py apply_top_k_top_p",
        "top-k/top-p runs in a Triton kernel on the fp32 logits instead of sorting them",
    ),
    Switch(
        "group_size_max_under_1_5",
        18,
        "vllm/v1/core/kv_cache_utils.py _get_kv_cache_groups_uniform_page_size",
        "layer groups take the largest type's count when it is under 1.5 x the smallest",
    ),
    Switch(
        "cuda_graphs_in_budget",
        20,
        "vllm/v1/worker/gpu_worker.py Worker.determine_available_memory; vllm/envs.py "
        "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS (default 1)",
        "CUDA-graph memory is estimated by a trial capture and taken from the KV budget before "
        "the cache is sized (before: graphs were captured after it, in the headroom)",
    ),
    Switch(
        "gpu_memory_utilization_0_92",
        20,
        "vllm/config/cache.py CacheConfig.gpu_memory_utilization",
        "--gpu-memory-utilization defaults to 0.92 (was 0.90)",
    ),
    Switch(
        "nemotron_h_ssm_fp32",
        20,
        "vllm/model_executor/models/config.py NemotronHForCausalLMConfig."
        "DEFAULT_MAMBA_SSM_CACHE_DTYPE",
        "Nemotron-H keeps its SSM state in float32 by default",
    ),
    Switch(
        "kv_tokens_from_concurrency",
        21,
        "vllm/v1/core/kv_cache_utils.py (get_kv_cache_capacity)",
        "'GPU KV cache size: N tokens' is max concurrency x max_model_len (before: blocks // "
        "groups x block size)",
    ),
    Switch(
        "async_scheduling",
        14,
        "vllm/config/scheduler.py SchedulerConfig.async_scheduling (default None, was False); "
        "vllm/config/vllm.py VllmConfig.__post_init__",
        "async scheduling is on by default: the scheduler prepares the next step on the CPU while "
        "the GPU runs this one (--no-async-scheduling turns it off); 0.14 turns it off under "
        "pipeline parallelism",
    ),
    Switch(
        "async_scheduling_pp",
        15,
        "vllm/config/vllm.py VllmConfig.__post_init__",
        "async scheduling stays on by default under pipeline parallelism",
    ),
    Switch(
        "api_server_per_dp_rank",
        15,
        "vllm/entrypoints/cli/serve.py ServeSubcommand.cmd (api_server_count; vllm#32525)",
        "vllm serve starts an API server for each data-parallel rank unless --api-server-count "
        "says otherwise (0.14: one, entrypoints/openai/cli_args.py's default)",
    ),
    Switch(
        "hybrid_prefix_caching",
        26,
        "vllm/config/model.py ModelConfig.is_prefix_caching_supported",
        "prefix caching is on by default for hybrid (Mamba/GDN) models, so their state layers "
        "run in align mode",
    ),
    Switch(
        "window_in_flight_batches",
        26,
        "vllm/v1/kv_cache_interface.py SlidingWindowSpec/ChunkedLocalAttentionSpec; "
        "vllm/config/vllm.py VllmConfig.max_concurrent_batches",
        "a sliding (chunked) layer reserves its window plus every batch in flight: 2 with async "
        "scheduling, pp + 1 under Model Runner V2 with pipeline parallelism",
    ),
    Switch(
        "non_kv_from_free_memory",
        27,
        "vllm/utils/mem_utils.py memory_profiling",
        "what is not KV cache is the drop in free memory since the snapshot plus the transient "
        "peak, so buffers allocated before the profile run now count",
    ),
    Switch(
        "big_card_batch_defaults",
        28,
        "vllm/engine/arg_utils.py EngineArgs.get_batch_defaults",
        "cards of 160 GiB or more default to 16,384 batched tokens",
    ),
    Switch(
        "blackwell_capture_1024",
        28,
        "vllm/config/vllm.py VllmConfig._set_cudagraph_sizes",
        "Blackwell (SM100) captures CUDA graphs up to 1,024 tokens",
    ),
    Switch(
        "null_block_reserved",
        29,
        "vllm/v1/core/kv_cache_planning.py get_kv_cache_configs",
        "the admission check and the longest max_model_len leave out the null block",
    ),
    Switch(
        "fp8_per_tensor_alias",
        31,
        "vllm/model_executor/model_loader/weight_utils.py get_quant_config",
        "--quantization fp8 is a deprecated alias of fp8_per_tensor",
    ),
    Switch(
        "mamba2_checkpoint_page",
        32,
        "vllm/model_executor/layers/mamba/mamba_mixer2.py MambaMixer2.get_kv_cache_spec",
        "a Mamba-2 layer in align mode holds a third page a request (its prefill checkpoint)",
    ),
    Switch(
        "tower_first_stage_only",
        33,
        "vllm/model_executor/models/interfaces.py SupportsMultiModal._mark_tower_model",
        "under Model Runner V2 only the first pipeline stage builds a vision tower",
    ),
    Switch(
        "gdn_checkpoint_page",
        33,
        "vllm/model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py get_kv_cache_spec",
        "a GDN layer with FlashInfer's prefill (Hopper) holds a third page a request and its "
        "attention block is a multiple of 64 tokens",
    ),
    Switch(
        "extensible_kv_cache",
        34,
        "vllm/config/cache.py CacheConfig.enable_extensible_kv_cache; vllm/v1/worker/"
        "extensible_kv_cache.py measure_kv_cache_bytes",
        "on CUDA and ROCm the KV cache is sized after warm-up and CUDA-graph capture, from the "
        "memory then free: what is free less a margin of max(1 GiB (3 on ROCm), 0.75 x the "
        "transient peak), less the transient peak, and within the requested share",
    ),
    Switch(
        "gpu_memory_utilization_1_extensible",
        34,
        "vllm/config/cache.py CacheConfig.resolved_gpu_memory_utilization",
        "--gpu-memory-utilization defaults to 1.0 with the extensible KV cache (0.92 without)",
    ),
    Switch(
        "block_size_64",
        34,
        "vllm/config/cache.py CacheConfig.DEFAULT_BLOCK_SIZE",
        "the default block is 64 tokens (was 16), for full, sliding, MLA and hybrid layers",
    ),
    Switch(
        "sizing_warmup",
        34,
        "vllm/v1/worker/gpu/warmup.py run_kv_cache_sizing_warmup",
        "the extensible cache's transient peak is measured on a full batch with prompt logprobs "
        "and, for MLA, a pass that fills the chunked-context workspace (up to 65,536 tokens "
        "up-projected: MLACommonMetadataBuilder.determine_chunked_prefill_workspace_size)",
    ),
    Switch(
        "blackwell_split_capture_sizes",
        34,
        "vllm/config/vllm.py VllmConfig._split_cudagraph_capture_sizes",
        "Blackwell (SM100) captures prefill and decode CUDA graphs on wider grids of their own; "
        "llmfit keeps 0.33's sizes there, so a Blackwell plan's graphs are an estimate",
    ),
)

_BY_NAME = {s.name: s for s in SWITCHES}

# The releases read to date the switches. Any 0.X in this range is modelled; patch releases
# behave as their minor (0.27.1 was read beside 0.27.0: the same in every switch above).
OLDEST_MINOR = 11
NEWEST_MINOR = 34

# Architectures Model Runner V2 ran by default before it ran everything (vllm/config/vllm.py
# DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES of each release).
_MRV2_LISTED: dict[int, frozenset[str]] = {
    22: frozenset({"Qwen3ForCausalLM"}),
    23: frozenset({"LlamaForCausalLM", "MistralForCausalLM", "Qwen3ForCausalLM"}),
    24: frozenset(
        {
            "Qwen3ForCausalLM",
            "DeepseekV2ForCausalLM",
            "Qwen2MoeForCausalLM",
            "GraniteMoeForCausalLM",
            "LlamaForCausalLM",
            "MistralForCausalLM",
        }
    ),
    25: frozenset({"DeepseekV2ForCausalLM", "Qwen2MoeForCausalLM", "GraniteMoeForCausalLM"}),
    26: frozenset(
        {
            "DeepseekV2ForCausalLM",
            "GraniteMoeForCausalLM",
            "InklingForCausalLM",
            "InklingForConditionalGeneration",
            "LongcatFlashNgramForCausalLM",
            "Qwen2MoeForCausalLM",
        }
    ),
}
_MRV2_LISTED[27] = _MRV2_LISTED[26] | {"KimiK3ForConditionalGeneration"}
_MRV2_LISTED[28] = _MRV2_LISTED[27] | {"DeepseekV4ForCausalLM"}


# The highest patch number a release is taken to have: vLLM's patch releases of a version have
# been .1 to .3 (0.6.6.post1, 0.8.5.post1, 0.10.1.1, 0.11.2); a larger one names no image.
MOST_PATCH = 9


@dataclass(frozen=True, order=True)
class VllmVersion:
    """A vLLM release, 0.minor.patch, and what its code does."""

    minor: int
    patch: int = 0

    @classmethod
    def parse(cls, text: str) -> VllmVersion:
        """ "0.33", "0.27.1", "v0.11.0" → the release; anything else raises ValueError."""
        # A few ASCII digits each: int() of "99999999999999999999" is a number, and the image
        # tag v0.33.99999999999999999999 one Docker Hub does not have.
        m = re.fullmatch(r"v?0\.([0-9]{1,3})(?:\.([0-9]{1,3}))?(?:\.post[0-9]{1,3})?", text.strip())
        known = f"0.{OLDEST_MINOR} to 0.{NEWEST_MINOR}"
        if not m:
            raise ValueError(
                f"vLLM version {text!r} is not a release number like 0.33 or 0.27.1; llmfit "
                f"models vLLM {known}."
            )
        minor, patch = int(m.group(1)), int(m.group(2) or 0)
        if not OLDEST_MINOR <= minor <= NEWEST_MINOR:
            raise ValueError(
                f"vLLM {text.strip()} is not a version llmfit models: it knows vLLM {known}."
            )
        if patch > MOST_PATCH:
            raise ValueError(
                f"vLLM {text.strip()} is not a release: vLLM has made at most a few patch "
                f"releases of a version (0.{minor}.0 to 0.{minor}.{MOST_PATCH} at the most)."
            )
        return cls(minor, patch)

    def __str__(self) -> str:
        return f"0.{self.minor}.{self.patch}" if self.patch else f"0.{self.minor}"

    def has(self, switch: str) -> bool:
        """Whether this release behaves as the named switch of `SWITCHES` says."""
        s = _BY_NAME[switch]
        return self.minor >= s.since and (s.until is None or self.minor < s.until)

    def async_scheduling(self, pp: int) -> bool:
        """Whether `vllm serve` schedules the next step while the GPU runs this one by default
        (VllmConfig.__post_init__: on from 0.14 unless pipeline-parallel in 0.14)."""
        return self.has("async_scheduling") and (pp <= 1 or self.has("async_scheduling_pp"))

    def api_servers(self, dp: int) -> int:
        """The API servers `vllm serve --data-parallel-size dp` starts by default, each taking
        its share of the prompts (serve.py ServeSubcommand.cmd: the internal load balancer's
        data_parallel_size from 0.15, one before)."""
        return max(dp, 1) if self.has("api_server_per_dp_rank") else 1

    @property
    def default_gpu_memory_utilization(self) -> float:
        """The default without the extensible KV cache (with it, from 0.34: 1.0)."""
        return 0.92 if self.has("gpu_memory_utilization_0_92") else 0.90

    @property
    def default_block_size(self) -> int:
        """CacheConfig.DEFAULT_BLOCK_SIZE: 64 tokens from 0.34, 16 before."""
        return 64 if self.has("block_size_64") else 16

    @property
    def nemotron_h_ssm_dtype(self) -> str | None:
        """The dtype Nemotron-H keeps its SSM state in with --mamba-ssm-cache-dtype auto (None:
        the model's own)."""
        if self.has("nemotron_h_ssm_fp32"):
            return "float32"
        if self.has("nemotron_h_ssm_fp16"):
            return "float16"
        return None

    @property
    def moe_chunk(self) -> int | None:
        """The most tokens the fused MoE runs at once (VLLM_FUSED_MOE_CHUNK_SIZE's default), or
        None where it runs every token it is given (0.18 on)."""
        if self.has("moe_workspace_unchunked"):
            return None
        return 16_384 if self.has("moe_chunk_16k") else 65_536

    @property
    def sampler(self) -> str:
        """How the V1 model runner's sampler warm-up treats the logits: "flashinfer" (0.11),
        "sort" (PyTorch sort, 0.12-0.16) or "triton" (0.17 on)."""
        if self.has("sampler_triton_top_k_top_p"):
            return "triton"
        if self.has("sampler_not_flashinfer"):
            return "sort"
        return "flashinfer"

    @property
    def quantization_fp8_flag(self) -> str:
        """What `--quantization` to print for online fp8 weights."""
        return "fp8_per_tensor" if self.has("fp8_per_tensor_alias") else "fp8"

    def uses_model_runner_v2(
        self, architecture: str | None, *, moe: bool, hybrid: bool, quantized: bool
    ) -> bool:
        """Whether `vllm serve` runs this model on Model Runner V2 by default
        (vllm/config/vllm.py VllmConfig.use_v2_model_runner and _is_default_v2_model_runner_model
        of each release): never before 0.22; listed dense architectures 0.22-0.23; listed ones
        0.24; every dense non-hybrid model and listed MoEs 0.25-0.28; everything from 0.29."""
        minor = self.minor
        if minor < 22:
            return False
        if minor >= 29:
            return True
        listed = architecture in _MRV2_LISTED[min(minor, 28)]
        if minor <= 23:
            return listed and not moe and not quantized
        if minor == 24:
            return listed
        if hybrid and (minor <= 26 or not listed):
            return False
        return listed or not moe


NEWEST = VllmVersion(NEWEST_MINOR)
KNOWN = tuple(VllmVersion(m) for m in range(OLDEST_MINOR, NEWEST_MINOR + 1))
