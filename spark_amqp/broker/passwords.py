"""Salted password hashes in RabbitMQ's format (``rabbit_password``).

A hash is ``base64(salt + H(salt + password))`` with a random 4-byte salt and ``H`` the
algorithm named by ``hashing_algorithm`` (RabbitMQ's module name, as in a ``definitions.json``
export): ``rabbit_password_hashing_sha256`` (RabbitMQ's default since 3.6),
``rabbit_password_hashing_sha512`` or ``rabbit_password_hashing_md5`` (pre-3.6 hashes). The
password is UTF-8. Hashes exported by RabbitMQ (``rabbitmqctl export_definitions``, the
management UI's "Export definitions") verify here unchanged, and hashes made here can be
imported into RabbitMQ (``rabbitmqctl import_definitions``).

Source: RabbitMQ 3.10.8 ``rabbit_password:hash/2`` and ``salted_hash/3`` (salt =
``rand:uniform(16#FFFFFFFF)`` as 32 bits big-endian), ``rabbit_password_hashing_sha256``;
https://www.rabbitmq.com/docs/passwords#computing-password-hash.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets

__all__ = ["HASHING_ALGORITHMS", "DEFAULT_HASHING_ALGORITHM", "hash_password", "verify_password",
           "check_hash"]

DEFAULT_HASHING_ALGORITHM = "rabbit_password_hashing_sha256"
#: RabbitMQ hashing module name → hashlib name
HASHING_ALGORITHMS = {
    "rabbit_password_hashing_sha256": "sha256",
    "rabbit_password_hashing_sha512": "sha512",
    "rabbit_password_hashing_md5": "md5",
}
_SALT_BYTES = 4


def _digest(algorithm: str, data: bytes) -> bytes:
    try:
        name = HASHING_ALGORITHMS[algorithm]
    except KeyError:
        raise ValueError(f"unknown hashing_algorithm {algorithm!r}; use one of "
                         f"{', '.join(HASHING_ALGORITHMS)}") from None
    return hashlib.new(name, data).digest()


def hash_password(password: str, algorithm: str = DEFAULT_HASHING_ALGORITHM,
                  salt: bytes | None = None) -> str:
    """A new salted hash of ``password`` (str, UTF-8 encoded), base64 text.

    Args:
        password: the clear-text password.
        algorithm: a key of :data:`HASHING_ALGORITHMS` (default SHA-256, as RabbitMQ).
        salt: 4 bytes (tests only); ``None`` draws a random salt (:mod:`secrets`).

    Raises :class:`ValueError` for an unknown algorithm or a salt that is not 4 bytes.
    """
    if salt is None:
        salt = secrets.token_bytes(_SALT_BYTES)
    if len(salt) != _SALT_BYTES:
        raise ValueError(f"salt must be {_SALT_BYTES} bytes, got {len(salt)}")
    return base64.b64encode(salt + _digest(algorithm, salt + password.encode("utf-8"))).decode("ascii")


def check_hash(password_hash: str, algorithm: str = DEFAULT_HASHING_ALGORITHM) -> None:
    """Raise :class:`ValueError` (saying what is wrong) unless ``algorithm`` is known and
    ``password_hash`` is base64 of 4 salt bytes followed by one digest of ``algorithm``."""
    size = len(_digest(algorithm, b""))
    try:
        raw = base64.b64decode(password_hash, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("password_hash is not base64 (make one with `spark-amqp broker "
                         "hash-password`)") from None
    if len(raw) != _SALT_BYTES + size:
        raise ValueError(f"password_hash decodes to {len(raw)} bytes; a {algorithm} hash is "
                         f"{_SALT_BYTES + size} (4-byte salt + {size}-byte digest)")


def verify_password(password: str, password_hash: str,
                    algorithm: str = DEFAULT_HASHING_ALGORITHM) -> bool:
    """True when ``password`` matches ``password_hash`` (base64 text as made by
    :func:`hash_password` or RabbitMQ). Constant-time comparison of the digests; a hash that
    is not valid base64 or too short never matches."""
    try:
        raw = base64.b64decode(password_hash, validate=True)
    except (binascii.Error, ValueError):
        return False
    if len(raw) <= _SALT_BYTES:
        return False
    salt, digest = raw[:_SALT_BYTES], raw[_SALT_BYTES:]
    return hmac.compare_digest(digest, _digest(algorithm, salt + password.encode("utf-8")))
