"""Credentials in a command a user already has (`llmfit check -- …`): which words are one, and the
variable each is launched from instead of its value.

A word is a credential wherever it stands (issue 33):
- the value of an environment assignment in front of the command whose name says it holds one
  (HF_TOKEN, VLLM_API_KEY, AWS_SECRET_ACCESS_KEY, PGPASSWORD: `secret_name`);
- the value of a flag whose name says so (`--api-key`, `--hf-token`, SGLang's
  `--ssl-keyfile-password`), read from the engines' own flag declarations by the same rule, not
  from a list kept by hand;
- a word that holds one inside it: a JSON value with a key that names a credential
  (`{"token": "…"}`), a URL with userinfo (`http://user:PASS@host`), or the Hugging Face token
  llmfit itself knows (HF_TOKEN, the stored login) anywhere in it.

Each distinct value gets one variable (`Vault`): the name its flag or assignment reads it from
(VLLM_API_KEY, HF_TOKEN), and a second value for the same name the name with `_2`, so that two
keys (`--api-key K1 K2`) stay two. A launch refers to the variable (render: `"$VAR"` in a shell,
`-e VAR` to docker, a Secret's key in Kubernetes) and never holds the value.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

# An environment assignment's value that is a credential: the process gets the variable of the
# same name from the caller's environment (or a Secret), never its value. No real value holds a
# NUL (the kernel's argv and environ cannot), so no value of the user's is ever read as this.
FROM_CALLER = "\x00"

# The parts of a name that say it holds a credential: its last part a key or token (api_key,
# HF_TOKEN, hf-token), or anywhere in it a secret or password (AWS_SECRET_ACCESS_KEY,
# ssl_keyfile_password, PGPASSWORD). `max_num_batched_tokens` and `speculative_token_map` are
# counts and maps, not credentials.
_LAST = frozenset({"key", "token", "apikey", "secret", "password", "passwd", "pwd"})
_ANYWHERE = ("secret", "password", "passwd")
# A shell variable's name, which a shell reads in front of a command as an assignment (a name
# with a character outside ASCII is a command's name, not an assignment).
SHELL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# A URL with userinfo (user@, user:password@): the whole word is a credential's.
_USERINFO = re.compile(r"(?i)[a-z][a-z0-9+.-]*://[^/?#@\s]*@")
# Of a longer word, only this much is read as JSON for keys that name a credential.
_JSON_MOST = 1 << 20


def secret_name(name: str) -> bool:
    """Whether a flag's name (`--api-key`, `ssl_keyfile_password`) or an environment variable's
    (`HF_TOKEN`) says that its value is a credential."""
    lower = name.lower().lstrip("-")
    parts = [p for p in re.split(r"[^a-z0-9]+", lower) if p]
    if not parts:
        return False
    return parts[-1] in _LAST or any(w in lower for w in _ANYWHERE)


def _json_holds(value: Any) -> bool:
    """Whether a JSON document has a key that names a credential with a value (walked without
    recursion)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for k, v in item.items():
                if secret_name(str(k)) and v not in (None, "", False):
                    return True
                stack.append(v)
        elif isinstance(item, list):
            stack.extend(item)
    return False


class Vault:
    """The variables a command's credentials are launched from, one for each distinct value.

    `known` are credentials llmfit knows besides the command's (the Hugging Face token it would
    send): any word that holds one is a credential too."""

    def __init__(self, known: Iterable[str] = ()) -> None:
        # Shorter than 4 characters is no token (and would match inside ordinary words).
        self.known = tuple(k for k in known if len(k) >= 4)
        self._by_value: dict[str, str] = {}
        self._taken: set[str] = set()

    def claim(self, name: str, value: str) -> None:
        """An environment assignment's credential: the process reads it from `name` itself."""
        self._taken.add(name)
        self._by_value.setdefault(value, name)

    def variable(self, value: str, base: str) -> str:
        """The variable that holds `value`: the one it already has, else `base`, else `base_2`, …
        (the first not holding another value)."""
        if value in self._by_value:
            return self._by_value[value]
        var, n = base, 1
        while var in self._taken:
            n += 1
            var = f"{base}_{n}"
        self._taken.add(var)
        self._by_value[value] = var
        return var

    @property
    def values(self) -> tuple[str, ...]:
        """Every credential's value met so far (to be kept out of any message)."""
        return tuple(self._by_value)

    def holds(self, word: str) -> bool:
        """Whether `word` holds a credential inside it: a token llmfit knows, a URL's userinfo, or
        a JSON value under a key that names one."""
        if any(k in word for k in self.known) or any(v in word for v in self._by_value if v):
            return True
        if _USERINFO.search(word):
            return True
        text = word.strip()
        if text[:1] in ("{", "[") and len(text) <= _JSON_MOST:
            try:
                return _json_holds(json.loads(text))
            except (ValueError, RecursionError):
                return False
        return False


def environment(env: dict[str, str], vault: Vault) -> dict[str, str]:
    """The assignments in front of a command with each credential's value replaced by
    FROM_CALLER: those whose name says so, and those whose value holds one."""
    out = dict(env)
    for name, value in env.items():
        if value and (secret_name(name) or vault.holds(value)):
            vault.claim(name, value)
            out[name] = FROM_CALLER
    return out


def base_for(prefix: str, dest: str | None) -> str:
    """The variable a credential of a flag is read from when the engine names none: the engine's
    prefix and the flag's name (SGLANG_SSL_KEYFILE_PASSWORD); of a word no flag takes, the
    engine's prefix alone (VLLM_SECRET)."""
    if dest is None:
        return f"{prefix}_SECRET"
    return f"{prefix}_{re.sub(r'[^A-Za-z0-9]+', '_', dest).strip('_').upper()}"
