"""Key material for one testbed cluster: the service-account signing key and the admin token."""

from __future__ import annotations

import secrets
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa


def write_service_account_keys(folder: Path) -> tuple[Path, Path]:
    """Write an RSA key pair (sa.key, sa.pub) once and return their paths."""
    key_path, pub_path = folder / "sa.key", folder / "sa.pub"
    if key_path.exists() and pub_path.exists():
        return key_path, pub_path
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )
    key_path.chmod(0o600)
    pub_path.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return key_path, pub_path


def write_token_file(folder: Path) -> str:
    """Write the apiserver's static token file with one cluster-admin token; return the token."""
    path = folder / "tokens.csv"
    if path.exists():
        return path.read_text().split(",", 1)[0]
    token = secrets.token_hex(24)
    path.write_text(f'{token},admin,admin,"system:masters"\n')
    path.chmod(0o600)
    return token
