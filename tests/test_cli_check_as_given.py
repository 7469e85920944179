"""`llmfit check` reads a command as its engine does, launches what it checked, and shows no
credential (issue 24), and says what the command itself says (issue 27, item 4)."""

from __future__ import annotations

import json
import shlex

from tests.launch_check import fake_program, k8s_expand, run_argv, yaml12


def test_a_vllm_context_is_the_one_the_command_caps_at(run):
    # vLLM's human_readable_int reads 32k as 32,000; the server holds no longer sequence, whatever
    # the card could hold (40,960, the trained context).
    code, out, err = run("check", "--fleet", "1xh100-80g", "--", "vllm", "serve", "Qwen/Qwen3-8B",
                         "--max-model-len", "32k")  # fmt: skip
    assert code == 0, err
    assert "longest sequence 32,000 · " in out


def test_llama_server_slots_share_the_context(run):
    # -np 4 at -c 4096: llama.cpp gives each of 4 slots 1,024 tokens.
    code, out, err = run("check", "--fleet", "1xrtx4090-24g", "--", "llama-server", "-hf",
                         "llmfit-fixtures/Tiny-Llama-GGUF:Q8_0", "-c", "4096",
                         "-np", "4")  # fmt: skip
    assert code == 0, err
    assert "  KV pool: 4,096 tokens · longest sequence 1,024 · 4 sequences of 1,024 at once" in out


def test_a_misspelt_flag_is_refused_as_vllm_refuses_it(run):
    code, out, err = run("check", "--fleet", "8xh100-80g", "--", "vllm", "serve", "Qwen/Qwen3-8B",
                         "--tensor-paralel-size", "8")  # fmt: skip
    assert (code, out) == (2, "")
    assert err == (
        "llmfit: the command to check: vLLM 0.34 refuses it: --tensor-paralel-size 8: not one of "
        "its flags; did you mean --tensor-parallel-size?\n"
    )


def test_the_launch_is_the_command_checked_word_for_word(run):
    argv = ["vllm", "serve", "Qwen/Qwen3-8B", "--served-model-name", "chat", "--port", "9000",
            "--kv-cache-dtype", "fp8_e5m2", "--seed", "7", "-tp", "2"]  # fmt: skip
    code, out, err = run("check", "--fleet", "2xh100-80g", "--json", "--", *argv)
    assert code == 0, err
    (o,) = json.loads(out)["options"]
    (c,) = o["commands"]
    assert c["argv"] == argv
    assert shlex.split(c["shell"]) == argv


def test_a_credential_is_never_shown_and_the_launch_reads_it_from_the_environment(run):
    code, out, err = run("check", "--fleet", "1xh100-80g", "--", "vllm", "serve", "Qwen/Qwen3-8B",
                         "--api-key", "sk-sekrit", "--hf-token", "hf_abcdefghijklmnop")  # fmt: skip
    assert code == 0, err
    assert "sekrit" not in out + err and "hf_abcdefghijklmnop" not in out + err
    assert out.splitlines()[0] == (
        '$ vllm serve Qwen/Qwen3-8B --api-key "$VLLM_API_KEY" --hf-token "$HF_TOKEN"'
    )
    code, out, err = run("check", "--fleet", "1xh100-80g", "--json", "--", "vllm", "serve",
                         "Qwen/Qwen3-8B", "--api-key=sk-sekrit")  # fmt: skip
    assert code == 0, err
    assert "sekrit" not in out
    (c,) = json.loads(out)["options"][0]["commands"]
    assert c["secrets"] == [{"index": 4, "env": "VLLM_API_KEY"}]
    # A shell expands the reference: the server gets the key from the variable.
    assert c["shell"] == 'vllm serve Qwen/Qwen3-8B --api-key "$VLLM_API_KEY"'


def test_a_docker_launch_takes_the_credential_from_the_callers_environment(run, tmp_path):
    code, out, err = run("check", "--fleet", "1xh100-80g", "--format", "docker", "--", "vllm",
                         "serve", "Qwen/Qwen3-8B", "--api-key", "sk-sekrit")  # fmt: skip
    assert code == 0, err
    assert "sekrit" not in out + err
    (line,) = [x for x in out.splitlines() if x.startswith("docker run")]
    words = shlex.split(line)
    # The variable is passed by name; a shell of llmfit's own text puts its value in its word's
    # place inside the container, the command's words being the shell's arguments.
    assert words[words.index("VLLM_API_KEY") - 1] == "-e"
    at = words.index("vllm/vllm-openai:v0.34.0")
    assert words[at - 2 : at] == ["--entrypoint", "/bin/sh"]
    script_args = words[at + 1 :]
    assert script_args[0] == "-c" and script_args[2] == "sh"
    fake_program(tmp_path, "vllm")
    ran = run_argv(["/bin/sh", *script_args], tmp_path, {"VLLM_API_KEY": "sk-from-env"})
    assert ran == ["vllm", "serve", "Qwen/Qwen3-8B", "--api-key", "sk-from-env"]


def test_a_kubernetes_launch_takes_the_credential_from_a_secret(run):
    code, out, err = run("check", "--fleet", "1xh100-80g", "--format", "k8s", "--", "vllm",
                         "serve", "Qwen/Qwen3-8B", "--api-key", "sk-sekrit")  # fmt: skip
    assert code == 0, err
    assert "sekrit" not in out + err
    deployment, _ = yaml12(out)
    (c,) = deployment["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e for e in c["env"]}
    assert env["VLLM_API_KEY"]["valueFrom"] == {
        "secretKeyRef": {"name": "llmfit-credentials", "key": "VLLM_API_KEY"}
    }
    # Kubernetes expands $(VLLM_API_KEY) from the container's environment: the Secret's value.
    args = [k8s_expand(a, {"VLLM_API_KEY": "sk-from-secret"}) for a in c["args"]]
    assert args == ["Qwen/Qwen3-8B", "--api-key", "sk-from-secret"]


def test_what_the_command_lacks_is_said_not_added(run):
    code, out, err = run("check", "--fleet", "8xh200-141g", "--json", "--", "vllm", "serve",
                         "deepseek-ai/DeepSeek-V3", "-tp", "8",
                         "--max-model-len", "200000")  # fmt: skip
    assert code == 0, err
    notes = json.loads(out)["notes"]
    assert (
        "vLLM refuses a context of 200,000, past the 163,840 the model was trained for, "
        "unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 is set, which this command does not set" in notes
    )
    assert (
        "vLLM loads this model's own code only with --trust-remote-code, which this command "
        "does not give" in notes
    )


def test_more_sequences_a_step_than_the_cards_default_batch_is_refused_as_vllm_does(run):
    # An H100's default batch is 8,192 tokens (vllm/engine/arg_utils.py get_batch_defaults):
    # vLLM refuses 16,384 sequences a step with it, and the plan says so instead of printing it.
    code, out, err = run("Qwen/Qwen3-8B", "--fleet", "1xh100-80g", "--max-num-seqs", "16384",
                         "--precision", "stored")  # fmt: skip
    assert code == 1
    assert (
        "safetensors: vLLM refuses it: max_num_batched_tokens (8192) must be greater than or "
        "equal to max_num_seqs (16384); give --max-num-batched-tokens 16384 or more"
        in " ".join(out.split())
    )
