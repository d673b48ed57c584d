"""What a secret file is, and finding every one of them (and their other names) in a workspace."""

from __future__ import annotations

import os

import pytest

from bot.core.secrets import files as secret_files
from bot.core.secrets.files import DEFAULT, SecretFiles, inventory, is_secret_inode


@pytest.mark.parametrize("path", [".env", ".env.production", ".envrc", "app/.ENV", "server.pem",
                                  "tls/site.KEY", "id_rsa", "id_ed25519.pub", ".netrc",
                                  ".git-credentials", "credentials", "credentials.json",
                                  "secrets.yaml", "secrets.d/anything.txt", "a\\b\\.env"])
def test_the_default_globs_make_these_secret_files(path):
    assert DEFAULT.is_secret_path(path)


@pytest.mark.parametrize("path", ["notes/a.md", "my.env", "environment.txt", "keys.md",
                                  "public.pem.txt", "ids.txt", "secret.txt", "my_credentials"])
def test_ordinary_names_are_not_secret_files(path):
    assert not DEFAULT.is_secret_path(path)


@pytest.mark.parametrize("word", ["HEAD:.env", "--file=.env", "-f.env", "open('.env')",
                                  "keys/site.pem", "x,.netrc"])
def test_a_secret_named_inside_a_word_is_found(word):
    assert DEFAULT.named_in([word]) == [word]


def test_configured_globs_replace_the_defaults():
    files = SecretFiles(("*.vault",))
    assert files.is_secret_path("a/prod.vault") and not files.is_secret_path(".env")


def test_the_inventory_finds_secret_files_their_hard_links_and_symlink_targets(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / ".env").write_text("K=v\n")
    os.link(tmp_path / "a" / ".env", tmp_path / "copy.txt")
    (tmp_path / "plain.txt").write_text("x\n")
    (tmp_path / "id_rsa").symlink_to("plain.txt")   # a secret name pointing at a file
    (tmp_path / "secrets.d").mkdir()
    (tmp_path / "secrets.d" / "db.txt").write_text("pw\n")
    found = inventory(tmp_path)
    real = os.path.realpath(tmp_path)
    assert set(found.files) == {f"{real}/a/.env", f"{real}/plain.txt", f"{real}/secrets.d/db.txt"}
    assert found.aliases == (f"{real}/copy.txt",)
    assert found.complete and found.any
    assert is_secret_inode(tmp_path, os.stat(tmp_path / "copy.txt"))
    assert not is_secret_inode(tmp_path, os.stat(tmp_path / "secrets.d"))


def test_an_unchanged_folder_is_not_listed_again_and_a_changed_one_is(tmp_path, monkeypatch):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.txt").write_text("x")
    assert not inventory(tmp_path).any
    listed: list[str] = []
    real_scandir = os.scandir

    def counting(path):
        listed.append(os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(secret_files.os, "scandir", counting)
    assert not inventory(tmp_path).any
    assert listed == []
    (tmp_path / "sub" / ".env").write_text("K=v")
    assert inventory(tmp_path).files == (os.path.realpath(tmp_path / "sub" / ".env"),)
    assert listed == [os.path.realpath(tmp_path / "sub")]


def test_a_tree_larger_than_the_limit_is_not_complete_and_counts_as_holding_secrets(
        tmp_path, monkeypatch):
    monkeypatch.setattr(secret_files, "SCAN_LIMIT", 2)
    for index in range(4):
        (tmp_path / f"{index}.txt").write_text("x")
    found = inventory(tmp_path)
    assert not found.complete and found.any
