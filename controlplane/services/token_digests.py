"""Bearer secrets the control plane issues and keeps only a digest of: node agents' tokens
(services/agent_protocol.py) and users' API tokens (services/api_tokens.py).

A token is 32 random bytes (256 bits, URL-safe base64) behind a prefix that says what it is for
(`qma_` a node agent's, `qmu_` a user's). It is shown once, when issued; the database holds its
SHA-256 only, so whoever reads the database or a backup of it holds no token. A fast hash is
enough here: slow hashing protects guessable passwords, and nobody guesses 256 random bits. The
digest is what a presented token is looked up by (one indexed equality); where a stored digest
is compared with a computed one, it is compared in constant time (`matches`).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

#: The length of a digest as stored (hex SHA-256).
DIGEST_LENGTH = 64


def digest(token: str) -> str:
    """The hex SHA-256 of `token`, as stored in place of the token."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def new_token(prefix: str) -> str:
    """A fresh token: `prefix` and 256 random bits."""
    return prefix + secrets.token_urlsafe(32)


def matches(stored_digest: str, token: str) -> bool:
    """Whether `token` is the one `stored_digest` was made from (constant time; an empty digest
    stands for no token, which nothing matches)."""
    return bool(stored_digest) and hmac.compare_digest(stored_digest, digest(token))
