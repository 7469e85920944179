"""Credentials wherever they stand in a checked command (issue 33): in front of it, after any flag
whose name says so, inside a JSON value or a URL, or equal to the token llmfit knows. Each run
is read back as its consumer reads it (shlex and /bin/sh, a YAML 1.2 reader and Kubernetes'
`$(VAR)` expansion, the JSON), and no credential is anywhere in what was printed."""

from __future__ import annotations

import json
import shlex

import pytest

from llmfit.plan.credentials import secret_name
from llmfit.plan.engines.sglang_command import grammar as sglang_grammar
from llmfit.plan.engines.sglang_grammar import FLAGS as SGLANG_FLAGS
from llmfit.plan.engines.vllm_command import grammar as vllm_grammar
from llmfit.plan.engines.vllm_grammar import FLAGS as VLLM_FLAGS
from tests.launch_check import fake_program, k8s_expand, run_argv, run_line, yaml12

TOKEN = "hf_abcdefghijklmnopqrstu"


def _env_of(container: dict) -> list[dict]:
    return container.get("env", [])


def _containers(docs: list) -> list[dict]:
    out = []
    for d in docs:
        spec = d["spec"]
        if d["kind"] == "Deployment":
            out += spec["template"]["spec"]["containers"]
        elif d["kind"] == "LeaderWorkerSet":
            lwt = spec["leaderWorkerTemplate"]
            out += lwt["leaderTemplate"]["spec"]["containers"]
            out += lwt["workerTemplate"]["spec"]["containers"]
    return out


@pytest.mark.parametrize(
    "fleet, command, names",
    [
        # One node: a Deployment.
        ("1xh100-80g", [f"HF_TOKEN={TOKEN}", "VLLM_API_KEY=sk-envkey1", "vllm", "serve",
                        "Qwen/Qwen3-8B", "--api-key", "sk-123"],
         ["HF_TOKEN", "VLLM_API_KEY", "VLLM_API_KEY_2"]),
        # Two nodes: both templates of a LeaderWorkerSet.
        ("2x2xh100-80g@ib0", [f"HF_TOKEN={TOKEN}", "vllm", "serve", "meta-llama/Meta-Llama-3.1-70B",
                              "-tp", "2", "-pp", "2", "--api-key", "sk-123"],
         ["HF_TOKEN", "VLLM_API_KEY"]),
        ("1xh100-80g", ["LLAMA_API_KEY=sk-llama1", "llama-server", "-hf",
                        "llmfit-fixtures/Tiny-Llama-GGUF:Q8_0"], ["LLAMA_API_KEY"]),
    ],
)  # fmt: skip
def test_a_credential_set_in_front_is_a_reference_in_every_format(run, fleet, command, names):
    secrets = [w.partition("=")[2] for w in command if "=" in w] + ["sk-123"]
    outs = {}
    for fmt in ("shell", "docker", "k8s"):
        code, out, err = run("check", "--fleet", fleet, "--format", fmt, "--", *command)
        assert code == 0, err
        assert not any(s in out + err for s in secrets), fmt
        outs[fmt] = out
    code, out, err = run("check", "--fleet", fleet, "--json", "--", *command)
    assert code == 0, err
    assert not any(s in out + err for s in secrets)
    doc = json.loads(out)
    for c in doc["options"][0]["commands"]:
        # The assignments in front, each the caller's variable of the same name.
        front = [n for n in names if n in c.get("env", {})]
        assert c["env_secrets"] == front
        assert all(c["env"][n] == f"${n}" for n in front)
        assert shlex.split(c["shell"])[: len(front)] == [f"{n}=${n}" for n in front]
    # The echo: `NAME="$NAME"` for each assignment, read back by shlex to the reference.
    echo = outs["shell"].splitlines()[0]
    assert echo.startswith("$ ")
    words = shlex.split(echo[2:])
    front = [w for w in words if "=" in w and w.split("=")[0].isupper()][: len(command)]
    assert all(w == f"{w.split('=')[0]}=${w.split('=')[0]}" for w in front)
    # Docker: every credential passed by name (-e NAME), none with a value.
    for line in outs["docker"].splitlines():
        if line.startswith("docker run"):
            dw = shlex.split(line)
            passed = [dw[i + 1] for i, w in enumerate(dw) if w == "-e"]
            for n in names:
                assert n in passed and not any(p.startswith(n + "=") for p in passed)
    # Kubernetes: each credential once, from a Secret, never a value after it.
    body = outs["k8s"].split("\n---\n", 1)[1]
    for container in _containers(yaml12(body)):
        env = _env_of(container)
        for n in names:
            entries = [e for e in env if e["name"] == n]
            assert len(entries) == 1, (n, entries)
            assert "secretKeyRef" in entries[0]["valueFrom"] and "value" not in entries[0]


def test_two_keys_stay_two_and_a_word_like_a_reference_is_left_alone(run, tmp_path):
    # vLLM's --api-key takes several keys: K1 and K2 are two values, so two variables; the served
    # name is the user's literal "$VLLM_API_KEY", which no launch may expand.
    argv = ["vllm", "serve", "Qwen/Qwen3-8B", "--api-key", "key-one-1", "key-two-2",
            "--served-model-name", "$VLLM_API_KEY"]  # fmt: skip
    env = {"VLLM_API_KEY": "key-one-1", "VLLM_API_KEY_2": "key-two-2"}
    want = ["vllm", "serve", "Qwen/Qwen3-8B", "--api-key", "key-one-1", "key-two-2",
            "--served-model-name", "$VLLM_API_KEY"]  # fmt: skip
    bin_dir = tmp_path / "bin"
    fake_program(bin_dir, "vllm")
    code, out, err = run("check", "--fleet", "1xh100-80g", "--", *argv)
    assert code == 0, err
    assert "key-one-1" not in out + err and "key-two-2" not in out + err
    line = out.splitlines()[0][2:]
    assert shlex.split(line)[3:6] == ["--api-key", "$VLLM_API_KEY", "$VLLM_API_KEY_2"]
    # The printed line, run by /bin/sh with the two variables set, starts the command as given.
    assert run_argv(["/bin/sh", "-c", line], bin_dir, env) == want
    # Docker: the container's script, run with the variables docker passes, gives the same words.
    code, out, err = run("check", "--fleet", "1xh100-80g", "--format", "docker", "--", *argv)
    assert code == 0, err
    (docker,) = [x for x in out.splitlines() if x.startswith("docker run")]
    dw = shlex.split(docker)
    assert [dw[i + 1] for i, w in enumerate(dw) if w == "-e"] == [
        "HF_TOKEN", "VLLM_API_KEY", "VLLM_API_KEY_2",
    ]  # fmt: skip
    script_at = dw.index("-c")
    assert run_argv(["/bin/sh", *dw[script_at:]], bin_dir, env) == want
    # Kubernetes: the args, expanded as Kubernetes expands them from the Secret's keys.
    code, out, err = run("check", "--fleet", "1xh100-80g", "--format", "k8s", "--", *argv)
    assert code == 0, err
    (container,) = _containers(yaml12(out.split("\n---\n", 1)[1]))
    assert [k8s_expand(a, env) for a in container["args"]] == want[2:]
    assert "--from-literal=VLLM_API_KEY_2=" in out


def test_sglangs_password_flag_is_a_credential_by_its_declared_name(run):
    code, out, err = run("check", "--fleet", "1xh100-80g", "--format", "k8s", "--", "sglang",
                         "serve", "--model-path", "Qwen/Qwen3-8B", "--ssl-keyfile-password",
                         "pw-secret-1")  # fmt: skip
    assert code == 0, err
    assert "pw-secret-1" not in out + err
    first = out.splitlines()[0]
    assert first == (
        "# $ sglang serve --model-path Qwen/Qwen3-8B --ssl-keyfile-password "
        '"$SGLANG_SSL_KEYFILE_PASSWORD"'
    )
    assert "--ssl-keyfile-password (a credential: $SGLANG_SSL_KEYFILE_PASSWORD)" in out


def test_the_secret_flags_are_those_the_engines_declare_by_name():
    # Every dest of the engines' own parser dumps whose name says it holds a credential (its
    # last part a key or token, or a password or secret anywhere), listed by hand from the dumps
    # (fixtures/engines/*-args.json): counts such as max_num_batched_tokens are not.
    # A flag's value is one where it is read as text (SGLang's bucket_time_to_first_token is a
    # list of floats).
    assert sorted(d for d, *_ in VLLM_FLAGS if vllm_grammar().secret(d)) == ["api_key", "hf_token"]
    assert sorted(d for d, *_ in SGLANG_FLAGS if sglang_grammar().secret(d)) == [
        "admin_api_key", "api_key", "ssl_keyfile_password",
    ]  # fmt: skip
    assert [n for n in ("HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "PGPASSWORD", "LLAMA_API_KEY",
                        "CUDA_VISIBLE_DEVICES", "TOKENIZERS_PARALLELISM") if secret_name(n)] == [
        "HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "PGPASSWORD", "LLAMA_API_KEY",
    ]  # fmt: skip


@pytest.mark.parametrize(
    "command, sentence",
    [
        (["vllm", "serve", "Qwen/Qwen3-8B", "--api-kye", "sk-typo-123"],
         "llmfit: the command to check: vLLM 0.34 refuses it: --api-kye: not one of its flags; "
         "did you mean --api-key?\n"),
        (["vllm", "serve", "Qwen/Qwen3-8B", "--api-kye=sk-typo-123"],
         "llmfit: the command to check: vLLM 0.34 refuses it: --api-kye: not one of its flags; "
         "did you mean --api-key?\n"),
        (["llama-server", "-hf", "llmfit-fixtures/Tiny-Llama-GGUF:Q8_0", "--api-kye",
          "sk-typo-123"],
         "llmfit: the command to check: llama-server refuses it: --api-kye: not one of its flags; "
         "did you mean --api-key?\n"),
    ],
)  # fmt: skip
def test_a_misspelt_credential_flag_is_refused_without_its_value(run, command, sentence):
    code, out, err = run("check", "--fleet", "1xh100-80g", "--", *command)
    assert (code, out, err) == (2, "", sentence)


def test_a_credential_inside_json_or_a_url_or_equal_to_the_token_is_a_reference(
    run, monkeypatch, tmp_path
):
    # llmfit knows the token (HF_TOKEN in its environment): wherever it stands in the command, the
    # word that holds it is launched from a variable; so is a URL's userinfo.
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    spec = json.dumps({"method": "ngram", "num_speculative_tokens": 2, "token": TOKEN})
    argv = ["vllm", "serve", "Qwen/Qwen3-8B", "--speculative-config", spec,
            "--otlp-traces-endpoint", "http://otel:PASSW0RD@collector:4317"]  # fmt: skip
    for fmt in ("shell", "docker", "k8s"):
        code, out, err = run("check", "--fleet", "1xh100-80g", "--format", fmt, "--", *argv)
        assert code == 0, err
        assert TOKEN not in out + err and "PASSW0RD" not in out + err, fmt
    code, out, err = run("check", "--fleet", "1xh100-80g", "--", *argv)
    assert shlex.split(out.splitlines()[0][2:])[3:] == [
        "--speculative-config", "$VLLM_SPECULATIVE_CONFIG",
        "--otlp-traces-endpoint", "$VLLM_OTLP_TRACES_ENDPOINT",
    ]  # fmt: skip
    bin_dir = tmp_path / "bin"
    fake_program(bin_dir, "vllm")
    env = {"VLLM_SPECULATIVE_CONFIG": spec,
           "VLLM_OTLP_TRACES_ENDPOINT": "http://otel:PASSW0RD@collector:4317"}  # fmt: skip
    assert run_argv(["/bin/sh", "-c", out.splitlines()[0][2:]], bin_dir, env) == argv
    code, out, err = run("check", "--fleet", "1xh100-80g", "--json", "--", *argv)
    assert TOKEN not in out and "PASSW0RD" not in out
    # A word equal to the token, where no flag says it is one, is read from HF_TOKEN.
    code, out, err = run("check", "--fleet", "1xh100-80g", "--", "vllm", "serve",
                         "Qwen/Qwen3-8B", "--served-model-name", TOKEN)  # fmt: skip
    assert code == 0, err
    assert TOKEN not in out + err
    assert shlex.split(out.splitlines()[0][2:])[3:] == ["--served-model-name", "$HF_TOKEN"]


def test_a_plain_printed_line_still_runs_as_given(run, tmp_path):
    # No credential: nothing is rewritten (the served name's "$" included).
    bin_dir = tmp_path / "bin"
    fake_program(bin_dir, "vllm")
    code, out, err = run("check", "--fleet", "1xh100-80g", "--", "vllm", "serve", "Qwen/Qwen3-8B",
                         "--served-model-name", "a$b")  # fmt: skip
    assert code == 0, err
    assert run_line(out.splitlines()[0][2:], bin_dir) == [
        "vllm", "serve", "Qwen/Qwen3-8B", "--served-model-name", "a$b",
    ]  # fmt: skip
