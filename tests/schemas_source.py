"""Where the official schemas and fixtures come from: a folder we are given, ``../shared``, or a verified download.

The oracle files are not vendored into the repository (they belong to their upstream
projects), yet a fresh clone must pass its own test command. ``schemas_manifest.json``
pins every file by its upstream raw URL at a fixed commit and by its sha256, so any copy
can be checked and a missing one can be fetched. Each group of files is looked up on its
own: ``schemas`` and ``fixtures`` (OpenWOP v1 and A2A, which ``../shared`` holds), and
``schemas-v2`` and ``fixtures-v2`` (OpenWOP v2, which it does not, so they come from the
cache or a download); first match wins:

1. The group's variable in ``ENV_DIRS``: ``TETHER_SCHEMAS_DIR``, ``TETHER_FIXTURES_DIR``,
   ``TETHER_SCHEMAS_V2_DIR``, ``TETHER_FIXTURES_V2_DIR``. Explicit: a missing folder is an
   error, not a reason to look elsewhere. Without ``TETHER_FIXTURES_DIR``, the fixtures
   are also looked for where ``../shared`` keeps them relative to its schemas,
   ``$TETHER_SCHEMAS_DIR/../fixtures/openwop-conformance``, when that folder exists.
2. ``../shared/<dir>`` beside the repository, when it exists.
3. The cache, ``${XDG_CACHE_HOME:-~/.cache}/tether/schemas/<digest>/<dir>``. The digest
   is taken over the manifest's paths and hashes, so a new pin gets a new folder and the
   old one is never reused for it.
4. A download of every manifest file, of every group, into a temporary folder beside the
   cache, each checked against its sha256, then renamed into place: the cache is whole or
   absent, so a cache folder that exists is trusted for every group (a group missing from it
   is an error, never a second download). The group that falls through first pays for all.
   ``TETHER_SCHEMAS_BASE_URL`` replaces the manifest's ``base_url`` (a local mirror).

Whichever folder is found is verified against the manifest, and a mismatch fails instead
of falling through to the next place. They all claim to hold the same pinned bytes; a
folder that differs holds another revision of the oracle, and quietly testing against
something else (or downloading over a shared copy that CI and colleagues also use) would
hide that. A mismatch names the file and both hashes; the fix is to restore the copy, or to
change the pin in the manifest, in a commit, when a new upstream revision is wanted.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

__all__ = [
    "MANIFEST_PATH",
    "Candidate",
    "Group",
    "Lookup",
    "Manifest",
    "PinnedFile",
    "Resolver",
    "SchemasUnavailable",
]

MANIFEST_PATH = Path(__file__).resolve().with_name("schemas_manifest.json")

#: the environment variable naming each group's explicit folder
ENV_DIRS = {
    "schemas": "TETHER_SCHEMAS_DIR",
    "fixtures": "TETHER_FIXTURES_DIR",
    "schemas-v2": "TETHER_SCHEMAS_V2_DIR",
    "fixtures-v2": "TETHER_FIXTURES_V2_DIR",
}
BASE_URL_ENV = "TETHER_SCHEMAS_BASE_URL"
DOWNLOAD_TIMEOUT_SECONDS = 30.0


class SchemasUnavailable(Exception):
    """No verified copy of a group of pinned files could be found or downloaded; the message says what to do."""


@dataclass(frozen=True)
class PinnedFile:
    """One upstream file: where it goes (relative to its group's folder), where it comes from, which bytes it is."""

    path: str
    url: str
    sha256: str


@dataclass(frozen=True)
class Group:
    """Files that live in one folder (``dir``, relative to ``../shared`` and to the cache)."""

    name: str
    dir: str
    files: tuple[PinnedFile, ...]


@dataclass(frozen=True)
class Manifest:
    """The pins, checked on load so a typo fails here rather than as a puzzling download."""

    base_url: str
    groups: Mapping[str, Group]
    source: Path | None = None

    @classmethod
    def load(cls, path: Path = MANIFEST_PATH) -> Manifest:
        return cls.parse(json.loads(path.read_text(encoding="utf-8")), source=path)

    @classmethod
    def parse(cls, doc: Mapping[str, Any], *, source: Path | None = None) -> Manifest:
        base_url = str(doc["base_url"])
        if not base_url.endswith("/"):
            raise ValueError(f"manifest base_url must end with '/': {base_url!r}")
        groups: dict[str, Group] = {}
        for name, raw in doc["groups"].items():
            files = tuple(
                PinnedFile(path=str(item["path"]), url=str(item["url"]), sha256=str(item["sha256"]))
                for item in raw["files"]
            )
            for pinned in files:
                _check_relative(pinned.path)
                if not pinned.url.startswith(base_url):
                    raise ValueError(f"manifest url {pinned.url!r} is not under base_url {base_url!r}")
                if len(pinned.sha256) != 64 or pinned.sha256.strip("0123456789abcdef"):
                    raise ValueError(f"manifest sha256 of {pinned.path!r} is not 64 lowercase hex digits")
            if len({pinned.path for pinned in files}) != len(files):
                raise ValueError(f"manifest group {name!r} lists a path twice")
            _check_relative(str(raw["dir"]))
            groups[str(name)] = Group(name=str(name), dir=str(raw["dir"]), files=files)
        return cls(base_url=base_url, groups=groups, source=source)

    @property
    def digest(self) -> str:
        """A content address: the same paths and hashes give the same cache folder, whatever the URLs."""
        lines = sorted(
            f"{group.dir}/{pinned.path} {pinned.sha256}\n" for group in self.groups.values() for pinned in group.files
        )
        return hashlib.sha256("".join(lines).encode()).hexdigest()[:16]


def _check_relative(path: str) -> None:
    """Manifest paths stay inside the folder they are written to."""
    pure = PurePosixPath(path)
    if pure.is_absolute() or ".." in pure.parts or not pure.parts:
        raise ValueError(f"manifest path {path!r} must be relative and stay inside its folder")


@dataclass(frozen=True)
class Candidate:
    """A folder that may hold a group; ``explicit`` ones must exist (somebody asked for them)."""

    path: Path
    label: str
    explicit: bool


@dataclass(frozen=True)
class Lookup:
    """Where to look and where to download from: the whole input of a resolution, so tests can give their own."""

    manifest: Manifest
    candidates: Mapping[str, tuple[Candidate, ...]]
    cache_root: Path
    base_url: str

    @classmethod
    def from_environ(cls, environ: Mapping[str, str], *, repo_root: Path, manifest: Manifest) -> Lookup:
        """The documented order (module docstring), read from ``environ``."""
        shared = repo_root.parent / "shared"
        candidates: dict[str, list[Candidate]] = {name: [] for name in manifest.groups}
        for name, group in manifest.groups.items():
            variable = ENV_DIRS.get(name)
            if variable and environ.get(variable):
                candidates[name].append(Candidate(Path(environ[variable]), variable, explicit=True))
            elif name == "fixtures" and environ.get(ENV_DIRS["schemas"]) and "schemas" in manifest.groups:
                beside = Path(environ[ENV_DIRS["schemas"]]).parent / group.dir
                candidates[name].append(Candidate(beside, f"$TETHER_SCHEMAS_DIR/../{group.dir}", explicit=False))
            candidates[name].append(Candidate(shared / group.dir, f"../shared/{group.dir}", explicit=False))
        xdg = environ.get("XDG_CACHE_HOME", "")
        home = Path(environ["HOME"]) if environ.get("HOME") else Path.home()
        cache_base = Path(xdg) if os.path.isabs(xdg) else home / ".cache"
        base_url = environ.get(BASE_URL_ENV) or manifest.base_url
        return cls(
            manifest=manifest,
            candidates={name: tuple(found) for name, found in candidates.items()},
            cache_root=cache_base / "tether" / "schemas",
            base_url=base_url if base_url.endswith("/") else base_url + "/",
        )

    @property
    def cache_dir(self) -> Path:
        return self.cache_root / self.manifest.digest

    def url_of(self, pinned: PinnedFile) -> str:
        """The pinned URL, moved onto ``TETHER_SCHEMAS_BASE_URL`` when that is set."""
        return self.base_url + pinned.url.removeprefix(self.manifest.base_url)


def _enumerate(words: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``: the variables a failure message asks for, in one sentence."""
    if len(words) < 2:
        return "".join(words)
    return f"{', '.join(words[:-1])} and {words[-1]}"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass
class Resolver:
    """Resolves each group once and remembers the outcome, failures included, so a dead network costs one try."""

    lookup: Lookup
    _outcomes: dict[str, Path | SchemasUnavailable] = field(default_factory=dict, init=False)
    _download_error: SchemasUnavailable | None = field(default=None, init=False)

    def resolve(self, name: str) -> Path:
        """The verified folder of group ``name``, or SchemasUnavailable saying what to do."""
        if name not in self._outcomes:
            try:
                self._outcomes[name] = self._resolve(self.lookup.manifest.groups[name])
            except SchemasUnavailable as exc:
                self._outcomes[name] = exc
        outcome = self._outcomes[name]
        if isinstance(outcome, SchemasUnavailable):
            raise outcome
        return outcome

    def _resolve(self, group: Group) -> Path:
        looked: list[str] = []
        for candidate in self.lookup.candidates.get(group.name, ()):
            if not candidate.path.is_dir():
                if candidate.explicit:
                    raise self._unavailable(group, f"{candidate.label} is {candidate.path}, which is not a folder")
                looked.append(f"{candidate.label} ({candidate.path}: absent)")
                continue
            self._verify(group, candidate.path, f"{candidate.label} ({candidate.path})", "restore the pinned copy")
            return candidate.path
        cache_dir = self.lookup.cache_dir
        target = cache_dir / group.dir
        if not cache_dir.is_dir():
            looked.append(f"the cache ({cache_dir}: absent)")
            if self._download_error is None:
                try:
                    self._download(cache_dir)
                except SchemasUnavailable as exc:
                    self._download_error = exc
            if self._download_error is not None:
                raise self._unavailable(group, f"looked in {', '.join(looked)}; {self._download_error}")
        self._verify(group, target, f"the cache ({cache_dir})", f"delete {cache_dir} to download it again")
        return target

    def _verify(self, group: Group, folder: Path, where: str, remedy: str) -> None:
        for pinned in group.files:
            path = folder / pinned.path
            if not path.is_file():
                raise self._unavailable(group, f"{pinned.path} is missing from {where}; {remedy}")
            actual = _sha256(path)
            if actual != pinned.sha256:
                raise self._unavailable(
                    group,
                    f"sha256 mismatch for {pinned.path} in {where}: expected {pinned.sha256}, got {actual}; {remedy}, "
                    f"or change its pin in the manifest if a new upstream revision is meant",
                )

    def _download(self, cache_dir: Path) -> None:
        """Every manifest file into ``cache_dir``, all verified, or nothing: a temp folder renamed at the end."""
        # imported here: most sessions find a folder and never download
        import httpx

        cache_dir.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{cache_dir.name}-", dir=cache_dir.parent))
        try:
            with httpx.Client(timeout=DOWNLOAD_TIMEOUT_SECONDS, follow_redirects=True) as client:
                for group in self.lookup.manifest.groups.values():
                    for pinned in group.files:
                        url = self.lookup.url_of(pinned)
                        try:
                            response = client.get(url)
                            response.raise_for_status()
                        except httpx.HTTPError as exc:
                            raise SchemasUnavailable(f"downloading {url} failed ({type(exc).__name__}: {exc})") from exc
                        actual = hashlib.sha256(response.content).hexdigest()
                        if actual != pinned.sha256:
                            raise SchemasUnavailable(
                                f"sha256 mismatch for {group.dir}/{pinned.path} downloaded from {url}: "
                                f"expected {pinned.sha256}, got {actual}; nothing was cached"
                            )
                        destination = staging / group.dir / pinned.path
                        destination.parent.mkdir(parents=True, exist_ok=True)
                        destination.write_bytes(response.content)
            try:
                staging.rename(cache_dir)
            except OSError:
                # another session finished the same download first; the caller verifies what it left
                if not cache_dir.is_dir():
                    raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def _unavailable(self, group: Group, reason: str) -> SchemasUnavailable:
        manifest = self.lookup.manifest
        variables = _enumerate([ENV_DIRS[name] for name in manifest.groups if name in ENV_DIRS])
        if self.lookup.base_url == manifest.base_url:
            network = f"allow network access to {manifest.base_url} (or set {BASE_URL_ENV} to a mirror of it)"
        else:
            network = (
                f"make the mirror at {self.lookup.base_url} ({BASE_URL_ENV}) serve the pinned files, "
                f"or unset {BASE_URL_ENV} to download from {manifest.base_url}"
            )
        return SchemasUnavailable(
            f"official test {group.name} unavailable: {reason}. To fix: set {variables} to folders holding the "
            f"files pinned in {manifest.source or 'the manifest'}, or {network}."
        )
