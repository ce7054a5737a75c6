"""The rules around SOPS decryption that need no sops binary: what counts as encrypted, what an
age key looks like, and the refusals that name the object and file without any value."""

from __future__ import annotations

import pytest

from fleet.engine.limits import Limits
from fleet.engine.render.sops import check_age_key, decrypt_objects, is_encrypted
from fleet.errors import RenderError

SOPS_META = {"mac": "ENC[AES256_GCM,data:x,type:str]", "age": [{"recipient": "age1x"}]}


def secret(kind: str = "Secret") -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": kind,
        "metadata": {"name": "db", "namespace": "shop"},
        "stringData": {"password": "ENC[AES256_GCM,data:abc,type:str]"},
        "sops": SOPS_META,
    }


def test_only_objects_with_sops_metadata_and_a_mac_are_encrypted() -> None:
    assert is_encrypted(secret())
    assert not is_encrypted({"kind": "ConfigMap", "sops": "just a key named sops"})
    assert not is_encrypted({"kind": "Secret", "sops": {"age": []}})


def test_objects_without_sops_metadata_pass_untouched_without_a_key() -> None:
    plain = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}]
    assert decrypt_objects(plain, ["app/a.yaml"], "", Limits()) == plain


def test_an_encrypted_secret_without_a_project_key_names_it_and_its_file() -> None:
    with pytest.raises(RenderError, match=r"app/s\.yaml: Secret shop/db .*no age key"):
        decrypt_objects([secret()], ["app/s.yaml"], "", Limits())


def test_only_secrets_may_be_encrypted() -> None:
    with pytest.raises(RenderError, match=r"ConfigMap shop/db is SOPS-encrypted, but only v1"):
        decrypt_objects([secret("ConfigMap")], ["app/s.yaml"], "AGE-SECRET-KEY-1X", Limits())


def test_an_age_key_file_is_read_without_its_comments_and_anything_else_is_refused() -> None:
    key = "AGE-SECRET-KEY-1" + "Q" * 58
    assert check_age_key(f"# created: 2026\n# public key: age1abc\n{key}\n") == key
    for bad in ("", "# only a comment\n", "hunter2", f"{key}\nage1public"):
        with pytest.raises(ValueError, match="not an age private key") as caught:
            check_age_key(bad)
        assert "hunter2" not in str(caught.value)
