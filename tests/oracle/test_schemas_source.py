"""The schema lookup on its own: a made-up manifest, folders in tmp, and a local mirror instead of GitHub.

Nothing here reads the real schemas or the network: each test builds the environment a
resolution sees (HOME, the env folders, ``../shared`` beside a fake repository root) so
the order, the verification and the all-or-nothing download can each be watched.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mirror import Mirror, url_path
from schemas_source import ENV_DIRS, MANIFEST_PATH, Lookup, Manifest, Resolver, SchemasUnavailable

BASE = "https://pinned.invalid/"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
CONTENT = {
    ("schemas", "a2a.json"): b'{"definitions": {}}\n',
    ("schemas", "openwop/thing.schema.json"): b'{"$id": "https://openwop.dev/spec/v1/thing.schema.json"}\n',
    ("fixtures", "conformance-x.json"): b'{"id": "conformance-x"}\n',
}
DIRS = {"schemas": "schemas", "fixtures": "fixtures/openwop-conformance"}


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _manifest_doc(content: dict[tuple[str, str], bytes] = CONTENT, dirs: dict[str, str] = DIRS) -> dict[str, Any]:
    groups: dict[str, Any] = {name: {"dir": folder, "files": []} for name, folder in dirs.items()}
    for (name, path), data in content.items():
        url = f"{BASE}owner/repo/{COMMIT}/upstream/{path}"
        groups[name]["files"].append({"path": path, "url": url, "sha256": _sha(data)})
    return {"base_url": BASE, "groups": groups}


MANIFEST = Manifest.parse(_manifest_doc())


def _served() -> dict[str, bytes]:
    by_path = {(name, pinned.path): pinned for name, group in MANIFEST.groups.items() for pinned in group.files}
    return {url_path(MANIFEST, by_path[key]): data for key, data in CONTENT.items()}


def _write_group(folder: Path, name: str) -> Path:
    """A correct copy of one group, as ../shared or an env folder would hold it."""
    for (group, path), data in CONTENT.items():
        if group == name:
            (folder / path).parent.mkdir(parents=True, exist_ok=True)
            (folder / path).write_bytes(data)
    return folder


@pytest.fixture
def mirror() -> Iterator[Mirror]:
    with Mirror(_served()) as running:
        yield running


@pytest.fixture(autouse=True)
def _no_proxy_for_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    """A proxy from the developer's environment must not swallow requests to the local mirror."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


def _lookup(tmp_path: Path, mirror_url: str, **environ: str) -> Lookup:
    """What a session in a repository at ``tmp_path/repo`` would see, with HOME in tmp and the mirror as base."""
    env = {"HOME": str(tmp_path / "home"), "TETHER_SCHEMAS_BASE_URL": mirror_url, **environ}
    return Lookup.from_environ(env, repo_root=tmp_path / "repo", manifest=MANIFEST)


# --- download and cache ------------------------------------------------------------------------


def test_downloads_every_file_verified_into_the_cache_then_reuses_it(tmp_path: Path, mirror: Mirror) -> None:
    lookup = _lookup(tmp_path, mirror.base_url)
    schemas = Resolver(lookup).resolve("schemas")

    assert schemas == tmp_path / "home" / ".cache" / "tether" / "schemas" / MANIFEST.digest / "schemas"
    assert (schemas / "openwop" / "thing.schema.json").read_bytes() == CONTENT[("schemas", "openwop/thing.schema.json")]
    # one download fetches every group, each file once
    assert sorted(mirror.served()) == sorted(_served())
    fixtures = Resolver(lookup).resolve("fixtures")
    assert (fixtures / "conformance-x.json").read_bytes() == CONTENT[("fixtures", "conformance-x.json")]
    assert fixtures == lookup.cache_dir / "fixtures" / "openwop-conformance"

    # a later session finds the cache and asks the mirror nothing
    before = len(mirror.served())
    again = Resolver(lookup)
    assert again.resolve("schemas") == schemas and again.resolve("fixtures") == fixtures
    assert len(mirror.served()) == before
    # nothing but the finished cache folder is left beside it
    assert [path.name for path in lookup.cache_root.iterdir()] == [MANIFEST.digest]


def test_corrupted_download_is_refused_with_both_hashes_and_caches_nothing(tmp_path: Path, mirror: Mirror) -> None:
    pinned = MANIFEST.groups["fixtures"].files[0]
    corrupted = mirror.corrupt(url_path(MANIFEST, pinned))
    lookup = _lookup(tmp_path, mirror.base_url)
    resolver = Resolver(lookup)

    with pytest.raises(SchemasUnavailable) as failure:
        resolver.resolve("schemas")
    message = str(failure.value)
    assert f"sha256 mismatch for fixtures/openwop-conformance/{pinned.path}" in message
    assert f"expected {pinned.sha256}, got {_sha(corrupted)}" in message
    assert f"{mirror.base_url}owner/repo/{COMMIT}/upstream/{pinned.path}" in message
    assert "set TETHER_SCHEMAS_DIR and TETHER_FIXTURES_DIR to folders" in message
    assert f"make the mirror at {mirror.base_url} (TETHER_SCHEMAS_BASE_URL) serve the pinned files" in message
    # no partial cache: not the digest folder, not the staging folder
    assert not lookup.cache_root.exists() or list(lookup.cache_root.iterdir()) == []

    # the failure is remembered: the other group does not download again in this session
    served = len(mirror.served())
    with pytest.raises(SchemasUnavailable, match="sha256 mismatch"):
        resolver.resolve("fixtures")
    assert len(mirror.served()) == served


def test_a_missing_upstream_file_names_the_url(tmp_path: Path, mirror: Mirror) -> None:
    pinned = MANIFEST.groups["schemas"].files[1]
    del mirror.files[url_path(MANIFEST, pinned)]
    lookup = _lookup(tmp_path, mirror.base_url)

    with pytest.raises(SchemasUnavailable) as failure:
        Resolver(lookup).resolve("schemas")
    message = str(failure.value)
    assert f"downloading {lookup.url_of(pinned)} failed" in message and "404" in message
    assert f"the cache ({lookup.cache_dir}: absent)" in message
    assert not lookup.cache_root.exists() or list(lookup.cache_root.iterdir()) == []


def test_a_tampered_cache_fails_and_says_to_delete_it(tmp_path: Path, mirror: Mirror) -> None:
    lookup = _lookup(tmp_path, mirror.base_url)
    cached = Resolver(lookup).resolve("schemas") / "a2a.json"
    cached.write_bytes(b"{}")

    with pytest.raises(SchemasUnavailable) as failure:
        Resolver(lookup).resolve("schemas")
    message = str(failure.value)
    assert f"expected {_sha(CONTENT[('schemas', 'a2a.json')])}, got {_sha(b'{}')}" in message
    assert f"delete {lookup.cache_dir}" in message


def test_xdg_cache_home_is_used_when_absolute(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path / "home")}
    absolute = Lookup.from_environ(
        {**env, "XDG_CACHE_HOME": str(tmp_path / "xdg")}, repo_root=tmp_path, manifest=MANIFEST
    )
    relative = Lookup.from_environ({**env, "XDG_CACHE_HOME": "xdg"}, repo_root=tmp_path, manifest=MANIFEST)

    assert absolute.cache_dir == tmp_path / "xdg" / "tether" / "schemas" / MANIFEST.digest
    # the XDG spec says a relative value is to be ignored
    assert relative.cache_dir == tmp_path / "home" / ".cache" / "tether" / "schemas" / MANIFEST.digest


# --- folders found before the cache ------------------------------------------------------------


def test_shared_beside_the_repository_is_used_without_downloading(tmp_path: Path, mirror: Mirror) -> None:
    shared = _write_group(tmp_path / "shared" / "schemas", "schemas")

    assert Resolver(_lookup(tmp_path, mirror.base_url)).resolve("schemas") == shared
    assert mirror.served() == []


def test_a_mismatching_shared_copy_fails_instead_of_downloading(tmp_path: Path, mirror: Mirror) -> None:
    shared = _write_group(tmp_path / "shared" / "schemas", "schemas")
    (shared / "openwop" / "thing.schema.json").write_bytes(b"{}")

    with pytest.raises(SchemasUnavailable) as failure:
        Resolver(_lookup(tmp_path, mirror.base_url)).resolve("schemas")
    message = str(failure.value)
    assert "sha256 mismatch for openwop/thing.schema.json in ../shared/schemas" in message
    assert f"got {_sha(b'{}')}" in message
    assert mirror.served() == []


def test_a_file_missing_from_shared_fails(tmp_path: Path, mirror: Mirror) -> None:
    shared = _write_group(tmp_path / "shared" / "schemas", "schemas")
    (shared / "a2a.json").unlink()

    with pytest.raises(SchemasUnavailable, match=r"a2a\.json is missing from \.\./shared/schemas"):
        Resolver(_lookup(tmp_path, mirror.base_url)).resolve("schemas")
    assert mirror.served() == []


def test_the_env_folder_comes_first_and_must_exist(tmp_path: Path, mirror: Mirror) -> None:
    _write_group(tmp_path / "shared" / "schemas", "schemas")
    chosen = _write_group(tmp_path / "elsewhere", "schemas")

    assert Resolver(_lookup(tmp_path, mirror.base_url, TETHER_SCHEMAS_DIR=str(chosen))).resolve("schemas") == chosen
    # an explicit folder that is not there is an error, not a reason to use ../shared or download
    missing = tmp_path / "typo"
    environ = {"HOME": str(tmp_path / "home"), "TETHER_SCHEMAS_DIR": str(missing)}
    with pytest.raises(SchemasUnavailable) as failure:
        Resolver(Lookup.from_environ(environ, repo_root=tmp_path / "repo", manifest=MANIFEST)).resolve("schemas")
    message = str(failure.value)
    assert f"TETHER_SCHEMAS_DIR is {missing}, which is not a folder" in message
    assert f"allow network access to {BASE} (or set TETHER_SCHEMAS_BASE_URL to a mirror of it)" in message
    assert mirror.served() == [] and not (tmp_path / "home").exists()


def test_fixtures_are_found_beside_an_explicit_schemas_folder(tmp_path: Path, mirror: Mirror) -> None:
    """The layout ../shared has (schemas/ beside fixtures/), wherever TETHER_SCHEMAS_DIR puts it."""
    root = tmp_path / "copy"
    _write_group(root / "schemas", "schemas")
    fixtures = _write_group(root / "fixtures" / "openwop-conformance", "fixtures")
    lookup = _lookup(tmp_path, mirror.base_url, TETHER_SCHEMAS_DIR=str(root / "schemas"))

    assert Resolver(lookup).resolve("fixtures") == fixtures
    explicit = _write_group(tmp_path / "mine", "fixtures")
    lookup = _lookup(
        tmp_path, mirror.base_url, TETHER_SCHEMAS_DIR=str(root / "schemas"), TETHER_FIXTURES_DIR=str(explicit)
    )
    assert Resolver(lookup).resolve("fixtures") == explicit
    assert mirror.served() == []


def test_a_group_shared_lacks_comes_from_one_download_of_everything(tmp_path: Path) -> None:
    """The v2 groups: ../shared holds the v1 ones only, and a folder missing a group's files is an error, not a miss.

    So a group of its own, in a folder ../shared does not have, falls through to the cache. The download
    that fills the cache takes every group (the cache is whole or absent), yet the groups ../shared holds
    are still read from there.
    """
    v2_file = ("schemas-v2", "openwop/v2/thing.schema.json")
    content = {**CONTENT, v2_file: b'{"$id": "https://openwop.dev/spec/v2/thing.schema.json"}\n'}
    manifest = Manifest.parse(_manifest_doc(content, {**DIRS, "schemas-v2": "schemas-v2"}))
    by_path = {(name, pinned.path): pinned for name, group in manifest.groups.items() for pinned in group.files}
    shared = _write_group(tmp_path / "shared" / "schemas", "schemas")
    environ = {"HOME": str(tmp_path / "home")}
    with Mirror({url_path(manifest, by_path[key]): data for key, data in content.items()}) as mirror:
        environ["TETHER_SCHEMAS_BASE_URL"] = mirror.base_url
        lookup = Lookup.from_environ(environ, repo_root=tmp_path / "repo", manifest=manifest)
        resolver = Resolver(lookup)

        v2 = resolver.resolve("schemas-v2")
        assert v2 == lookup.cache_dir / "schemas-v2"
        assert (v2 / "openwop" / "v2" / "thing.schema.json").read_bytes() == content[v2_file]
        assert sorted(mirror.served()) == sorted(url_path(manifest, pinned) for pinned in by_path.values())
        assert resolver.resolve("schemas") == shared
        assert resolver.resolve("fixtures") == lookup.cache_dir / "fixtures" / "openwop-conformance"
        assert len(mirror.served()) == len(content)


def test_every_group_of_the_real_manifest_has_its_own_variable(tmp_path: Path) -> None:
    """An explicit folder can be given for each group, the v2 ones too, and it comes before everything else."""
    manifest = Manifest.load(MANIFEST_PATH)
    assert set(manifest.groups) <= set(ENV_DIRS)
    assert ENV_DIRS["schemas-v2"] == "TETHER_SCHEMAS_V2_DIR" and ENV_DIRS["fixtures-v2"] == "TETHER_FIXTURES_V2_DIR"
    environ = {"HOME": str(tmp_path / "home"), **{ENV_DIRS[name]: str(tmp_path / name) for name in manifest.groups}}
    lookup = Lookup.from_environ(environ, repo_root=tmp_path / "repo", manifest=manifest)
    for name in manifest.groups:
        first = lookup.candidates[name][0]
        assert (first.path, first.label, first.explicit) == (tmp_path / name, ENV_DIRS[name], True)


# --- the manifest ------------------------------------------------------------------------------


def test_the_real_manifest_pins_every_file_at_a_commit() -> None:
    manifest = Manifest.load(MANIFEST_PATH)
    paths = {name: {pinned.path for pinned in group.files} for name, group in manifest.groups.items()}
    schemas, fixtures = paths["schemas"], paths["fixtures"]

    assert manifest.base_url == "https://raw.githubusercontent.com/"
    assert "a2a-v0.3.0.json" in schemas and "openwop/workflow-definition.schema.json" in schemas
    assert len(fixtures) == 10 and all(name.startswith("conformance-") for name in fixtures)
    # major 2 only in its own group: "v2/error-envelope" is one file, the one of schemas-v2
    assert not any(path.startswith("openwop/v2/") for path in schemas)
    assert len(paths["schemas-v2"]) == 25 and all(path.startswith("openwop/v2/") for path in paths["schemas-v2"])
    v2_suite = {"noop", "cancellable", "delay", "approval", "failure"}
    assert paths["fixtures-v2"] == {f"conformance-{name}.json" for name in v2_suite}
    assert {group.dir for group in manifest.groups.values()} == {
        "schemas",
        "fixtures/openwop-conformance",
        "schemas-v2",
        "fixtures/openwop-conformance-v2",
    }
    upstreams = {"a2aproject/A2A", "openwop/openwop", "openwop/openwop-sdks", "openwop/openwop-app-install"}
    for group in manifest.groups.values():
        for pinned in group.files:
            owner, repo, commit, *upstream = pinned.url.removeprefix(manifest.base_url).split("/")
            assert f"{owner}/{repo}" in upstreams, pinned.url
            assert len(commit) == 40 and not commit.strip("0123456789abcdef"), pinned.url
            assert upstream[-1] == (pinned.path.rsplit("/", 1)[-1] if owner != "a2aproject" else "a2a.json")


@pytest.mark.parametrize(
    ("change", "error"),
    [
        (lambda doc: doc["groups"]["schemas"]["files"][0].update(path="../escape.json"), "must be relative"),
        (lambda doc: doc["groups"]["schemas"]["files"][0].update(url="https://elsewhere.invalid/x"), "not under"),
        (lambda doc: doc["groups"]["schemas"]["files"][0].update(sha256="ABC"), "64 lowercase hex"),
        (lambda doc: doc.update(base_url="https://pinned.invalid"), "must end with '/'"),
    ],
)
def test_a_malformed_manifest_is_refused_on_load(change: Any, error: str) -> None:
    doc = _manifest_doc()
    change(doc)
    with pytest.raises(ValueError, match=error):
        Manifest.parse(doc)


def test_the_cache_digest_follows_the_bytes_not_the_urls() -> None:
    moved = _manifest_doc()
    for group in moved["groups"].values():
        for item in group["files"]:
            item["url"] = item["url"].replace("owner/repo", "other/place")
    changed = _manifest_doc({**CONTENT, ("fixtures", "conformance-x.json"): b"{}"})

    assert Manifest.parse(moved).digest == MANIFEST.digest
    assert Manifest.parse(changed).digest != MANIFEST.digest
