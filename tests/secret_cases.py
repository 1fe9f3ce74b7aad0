"""The secrets the hostile suites plant, and the real failure log they are planted in (shared by
the secrets, cuts, files and rule-budget tests, so it sits beside conftest.py)."""

from __future__ import annotations

from conftest import FIXTURES

FAILED = FIXTURES / "kv_cache_insufficient" / "v1-0.9.2-tp2-qwen14b-4090-estimated-max-len.log"
ARGS_LINE = 3
FATAL_LINE = 58

# (name, text as a log prints it, the secret part that must not appear, fits in a model name)
SECRETS = [
    ("hf-token", "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", True),
    ("openai", "sk-abcdefghijklmnopqrstuvwxyz0123456789ABCD", "sk-abcdefghijklmnopqrstuvwxyz0123456789ABCD", True),
    (
        "openai-project",
        "sk-proj-Ab3dEf_Gh1jKlMn0pQrStUvWxYz-0123456789abcdefGHIJ",
        "Ab3dEf_Gh1jKlMn0pQrStUvWxYz-0123456789abcdefGHIJ",
        True,
    ),
    ("anthropic", "sk-ant-api03-ZyXwVuTsRqPoNmLkJiHgFeDcBa9876543210", "ZyXwVuTsRqPoNmLkJiHgFeDcBa9876543210", True),
    ("bearer", "Authorization: Bearer Opaque.Tok3n_Value-0123456789xyz", "Opaque.Tok3n_Value-0123456789xyz", False),
    (
        "namespace-api-key",
        "args: Namespace(model='m', api_key='my-vllm-key-12345', port=8000)",
        "my-vllm-key-12345",
        False,
    ),
    ("dict-api-key", "{'api_key': ['listed-key-abcdef-98765'], 'port': 8000}", "listed-key-abcdef-98765", False),
    ("hf-token-arg", "hf_token='plainvalue-not-prefixed-42'", "plainvalue-not-prefixed-42", False),
    ("token-kv", "token=9f8e7d6c5b4a39281706", "9f8e7d6c5b4a39281706", False),
    ("password-kv", "'password': 'hunter2-Correct-Horse'", "hunter2-Correct-Horse", False),
    ("url-password", "https://alice:S3cr3t-P%40ss@example.com/org/model", "S3cr3t-P%40ss", True),
    ("url-password-at", "redis://:p@ss@w0rd@cache.internal:6379", "ss@w0rd", False),
    ("aws-access-key", "AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE", True),
    (
        "aws-secret",
        "aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        False,
    ),
    (
        "aws-secret-env",
        "AWS_SECRET_ACCESS_KEY: wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        False,
    ),
    (
        "private-key",
        "-----BEGIN RSA PRIVATE KEY-----MIIEpAIBAAKCAQEAx3Yz-----END RSA PRIVATE KEY-----",
        "MIIEpAIBAAKCAQEAx3Yz",
        False,
    ),
    ("github", "ghp_abcdefghijklmnopqrstuvwxyz0123456789", "ghp_abcdefghijklmnopqrstuvwxyz0123456789", True),
    (
        "github-pat",
        "github_pat_11ABCDEFG0abcdefghijklmnop_qrstuvwxyz0123456789",
        "11ABCDEFG0abcdefghijklmnop_qrstuvwxyz0123456789",
        True,
    ),
    ("slack", "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", "AbCdEfGhIjKlMnOpQrStUvWx", False),
    (
        "slack-webhook",
        "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
        "XXXXXXXXXXXXXXXXXXXXXXXX",
        False,
    ),
    ("cli-flag", "vllm serve m --api-key token-abc123-opaque", "token-abc123-opaque", False),
    (
        "jwt",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        False,
    ),
    ("google", "AIzaSyA-abcdefghijklmnopqrstuvwxyz012345", "AIzaSyA-abcdefghijklmnopqrstuvwxyz012345", False),
    ("nvidia", "nvapi-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", False),
]

HF = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
# Round two (issue 28): a token glued to a colour code in each form a log carries one, and the
# credential shapes of cloud storage and registries. (name, text as a log prints it, secret)
SECRETS_ROUND_TWO = [
    ("esc-glued", f"\x1b[1m{HF}\x1b[0m", HF),
    ("caret-glued", f"^[[33m{HF}^[[0m", HF),
    ("escless-glued", f"[1;33m{HF}[0m", HF),
    ("escape-inside-name", "to\x1b[0mken=9f8e7d6c5b4a39281706", "9f8e7d6c5b4a39281706"),
    ("prefixed-hf", f"MY_{HF}", HF[3:]),
    (
        "azure-account-key",
        "DefaultEndpointsProtocol=https;AccountName=acct;"
        "AccountKey=Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MA==;EndpointSuffix=core.windows.net",
        "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MA",
    ),
    (
        "azure-sas",
        "https://acct.blob.core.windows.net/w/m.bin?sv=2021-06-08&se=2030-01-01&sp=r&sig=Q2xpZW50U2ln%2BAbC%3D",
        "Q2xpZW50U2ln",
    ),
    ("docker-auth", "{'auths': {'ghcr.io': {'auth': 'dXNlcjpzM2NyM3RQYXNz'}}}", "dXNlcjpzM2NyM3RQYXNz"),
    (
        "url-encoded-token",
        "callback=https%3A%2F%2Fx.example%2Fcb%3Ftoken%3DQmFzZTY0VG9rZW4xMjM%26n%3D1",
        "QmFzZTY0VG9rZW4xMjM",
    ),
    (
        "s3-signed-url",
        "https://b.s3.amazonaws.com/w.bin?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Date=20250101T000000Z"
        "&X-Amz-Signature=5d41402abc4b2a76b9719d911017c592aabbccdd",
        "5d41402abc4b2a76b9719d911017c592aabbccdd",
    ),
    (
        "gcs-signed-url",
        "https://storage.googleapis.com/b/w.bin?X-Goog-Algorithm=GOOG4-RSA-SHA256"
        "&X-Goog-Signature=0a1b2c3d4e5f60718293a4b5c6d7e8f9",
        "0a1b2c3d4e5f60718293a4b5c6d7e8f9",
    ),
]
