"""What `--model-path` names, decided once at start-up with one line on any error:
a GGUF file, a checkpoint folder, a LoRA adapter folder (with its base), or a hub id
resolved from the local cache first. `scheme://` values belong to their own backends
(a small dispatch table, so `trio://` and `tinker://` plug in without touching this)."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_agenteval.datasets.hub import hub_unreachable, offline_requested
from pytest_agenteval.datasets.tabular import file_sha256

# Files whose bytes decide what the model does: config, tokenizer and weights.
CONFIG_FILES = ("config.json", "generation_config.json", "adapter_config.json")
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "tokenizer.model",
    "special_tokens_map.json",
    "vocab.json",
    "merges.txt",
    "added_tokens.json",
    "chat_template.jinja",
    "chat_template.json",
)
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".gguf")
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+(@[\w./-]+)?$")


class ResolveError(ValueError):
    """A `--model-path` the run cannot use; the message is one line naming the fix."""


@dataclass(frozen=True)
class ResolvedModel:
    """A model folder or file, its identity, and (for adapters) its base."""

    # "gguf" | "gguf-adapter" (a GGUF LoRA, `base` its gguf) | "checkpoint" | "adapter" |
    # "scheme" (another backend's URL)
    kind: str
    path: Path | None  # the file or folder (for "scheme": None)
    source: str  # what the user wrote
    fingerprint: str = ""  # sha256 over config, tokenizer and weight files (adapter: the adapter's)
    files: Mapping[str, str] = field(default_factory=dict)  # name -> sha256
    revision: str | None = None  # hub commit, when resolved from the hub
    base: ResolvedModel | None = None  # adapters: the base checkpoint (gguf-adapter: the base gguf)
    lora_rank: int | None = None  # adapters: `r` from adapter_config.json
    chat_template: str | None = None  # --chat-template FILE, when given

    @property
    def fp12(self) -> str:
        return self.fingerprint[:12]

    @property
    def weights_fingerprint(self) -> str:
        """What the generation cache keys a launched server on: an adapter's own files and
        its base's (new base weights under the same path change what the adapter does)."""
        if self.base is None or not self.fingerprint:
            return self.fingerprint
        return hashlib.sha256(f"{self.base.fingerprint}+{self.fingerprint}".encode()).hexdigest()

    @property
    def served_name(self) -> str:
        """The name a launched server must list for us to trust it is ours."""
        return f"agenteval-{self.fp12}"

    def describe(self) -> dict[str, Any]:
        info: dict[str, Any] = {
            "kind": self.kind,
            "source": self.source,
            "path": str(self.path) if self.path else None,
            "sha256": self.fingerprint,
            "files": dict(self.files),
        }
        if self.revision:
            info["revision"] = self.revision
        if self.lora_rank is not None:
            info["lora_rank"] = self.lora_rank
        if self.chat_template:
            info["chat_template"] = self.chat_template
        if self.base is not None:
            info["base"] = self.base.describe()
        return info


# -- hashing, cached on disk by (path, size, mtime) ---------------------------------------
class FileHashes:
    """sha256 of files, remembered in a JSON file so a 30 GB checkpoint is read once."""

    def __init__(self, cache_file: Path | None, enabled: bool = True) -> None:
        self.cache_file = cache_file
        self.enabled = enabled  # False: classify only (no file is read; hashes are "")
        self._known: dict[str, str] = {}
        if cache_file is not None and cache_file.is_file():
            try:
                self._known = json.loads(cache_file.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError):
                self._known = {}
        self._dirty = False

    def sha256(self, path: Path) -> str:
        if not self.enabled:
            return ""
        stat = path.stat()
        key = f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}"
        if key not in self._known:
            self._known[key] = file_sha256(path)
            self._dirty = True
        return self._known[key]

    def save(self) -> None:
        if self.cache_file is None or not self._dirty:
            return
        try:
            self.cache_file.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.cache_file.with_suffix(".tmp")
            tmp.write_text(json.dumps(self._known), encoding="utf-8")
            tmp.replace(self.cache_file)
        except OSError:
            pass  # a cache: losing it costs time, not correctness


def folder_identity(folder: Path, hashes: FileHashes) -> tuple[str, dict[str, str]]:
    """One fingerprint over the files that decide behaviour, and each file's own hash."""
    names = sorted(
        p.name
        for p in folder.iterdir()
        if p.is_file()
        and (p.name in CONFIG_FILES or p.name in TOKENIZER_FILES or p.suffix in WEIGHT_SUFFIXES)
    )
    files = {name: hashes.sha256(folder / name) for name in names}
    if not hashes.enabled:
        return "", files
    combined = hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()
    return combined, files


# -- chat templates -----------------------------------------------------------------------
def has_chat_template(folder: Path) -> bool:
    """A chat template in the folder: chat_template.jinja/.json or tokenizer_config.json."""
    if (folder / "chat_template.jinja").is_file() or (folder / "chat_template.json").is_file():
        return True
    config = folder / "tokenizer_config.json"
    if not config.is_file():
        return False
    try:
        return bool(json.loads(config.read_text(encoding="utf-8")).get("chat_template"))
    except (OSError, json.JSONDecodeError, AttributeError):
        return False


def _check_template(model: ResolvedModel, chat_template: str | None) -> None:
    folders = [model.path] + ([model.base.path] if model.base is not None else [])
    if chat_template:
        if not Path(chat_template).expanduser().is_file():
            raise ResolveError(f"--chat-template {chat_template}: no such file; give a Jinja template file")
        return
    if not any(f is not None and has_chat_template(f) for f in folders):
        raise ResolveError(
            f"--model-path {model.source}: no chat template in the checkpoint"
            f"{' or its base' if model.base is not None else ''} (tokenizer_config.json chat_template "
            "or chat_template.jinja); pass --chat-template FILE with the template it was trained with"
        )


# -- the classifier -----------------------------------------------------------------------
SchemeHandler = Callable[[str], ResolvedModel]
SCHEMES: dict[str, SchemeHandler | None] = {}  # "trio" -> handler; None: owned elsewhere, pass through


def register_scheme(name: str, handler: SchemeHandler | None = None) -> None:
    """Let another backend own `name://...` values (wt-trio: trio, tinker)."""
    SCHEMES[name] = handler


def resolve_model_path(
    source: str,
    *,
    base_model: str | None = None,
    chat_template: str | None = None,
    hash_cache: Path | None = None,
    identity: bool = True,
) -> ResolvedModel:
    """Classify `--model-path` and compute its identity; raise ResolveError (one line).
    `identity=False` only classifies (every process may call that; hashing a 30 GB
    checkpoint is done once, on the controller, with `hash_cache`)."""
    if "://" in source:
        scheme = source.split("://", 1)[0]
        handler = SCHEMES.get(scheme)
        if handler is not None:
            return handler(source)
        return ResolvedModel("scheme", None, source)  # its backend decides (or rejects) it
    hashes = FileHashes(hash_cache, enabled=identity)
    try:
        model = _resolve_local(source, base_model, hashes)
        if model.kind in ("checkpoint", "adapter"):
            _check_template(model, chat_template)
            if chat_template:
                model = _with_template(model, chat_template, hashes)
        return model
    finally:
        hashes.save()


def _with_template(model: ResolvedModel, chat_template: str, hashes: FileHashes) -> ResolvedModel:
    """A template given on the command line is part of the identity: it changes every prompt."""
    path = Path(chat_template).expanduser().resolve()
    files = {**model.files, "--chat-template": hashes.sha256(path)}
    combined = (
        hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest() if hashes.enabled else ""
    )
    return ResolvedModel(
        model.kind,
        model.path,
        model.source,
        combined,
        files,
        model.revision,
        model.base,
        model.lora_rank,
        str(path),
    )


def _resolve_local(source: str, base_model: str | None, hashes: FileHashes) -> ResolvedModel:
    path = Path(source).expanduser()
    if path.suffix == ".gguf":
        if not path.is_file():
            raise ResolveError(f"--model-path {source}: no such file; give an existing .gguf file")
        digest = hashes.sha256(path)
        if is_gguf_adapter(path):
            return _resolve_gguf_adapter(path, source, base_model, hashes)
        return ResolvedModel("gguf", path, source, digest, {path.name: digest})
    if path.is_dir():
        return _resolve_folder(path, source, base_model, hashes)
    if path.exists():
        raise ResolveError(
            f"--model-path {source}: a file that is not *.gguf; give a .gguf file, a checkpoint "
            "folder (config.json) or an adapter folder (adapter_config.json)"
        )
    if HUB_ID.match(source):
        folder, revision = hub_snapshot(source)
        model = _resolve_folder(folder, source, base_model, hashes)
        return ResolvedModel(
            model.kind,
            model.path,
            source,
            model.fingerprint,
            model.files,
            revision,
            model.base,
            model.lora_rank,
        )
    raise ResolveError(
        f"--model-path {source}: no such file or folder, and not a hub id (owner/name); give a .gguf "
        "file, a checkpoint or adapter folder, a hub id, or replay:RESULTS.jsonl"
    )


def is_gguf_adapter(path: Path) -> bool:
    """A gguf whose header says `general.type=adapter` (a LoRA); a header we cannot read is
    left for llama.cpp to refuse with its own message."""
    from pytest_agenteval.models.gguf import GgufHeaderError, gguf_general_type

    try:
        return gguf_general_type(path) == "adapter"
    except (GgufHeaderError, OSError):
        return False


def _resolve_gguf_adapter(
    path: Path, source: str, base_model: str | None, hashes: FileHashes
) -> ResolvedModel:
    """A GGUF LoRA and its base gguf (`--base-model`), of the same architecture."""
    from pytest_agenteval.models.gguf import gguf_metadata

    if not base_model:
        raise ResolveError(
            f"--model-path {source} is a GGUF LoRA adapter (general.type=adapter); "
            "pass --base-model BASE.gguf, the gguf model it was trained on"
        )
    base_path = Path(base_model).expanduser()
    if base_path.suffix != ".gguf" or not base_path.is_file():
        raise ResolveError(
            f"--base-model {base_model}: the base of a GGUF LoRA adapter must be an existing .gguf file"
        )
    if is_gguf_adapter(base_path):
        raise ResolveError(
            f"--base-model {base_model}: the base of a GGUF LoRA adapter must be a gguf model "
            "(general.type=model), not adapter"
        )
    arch = "general.architecture"
    own, theirs = gguf_metadata(path, [arch]).get(arch), gguf_metadata(base_path, [arch]).get(arch)
    if own != theirs:
        raise ResolveError(
            f"--model-path {source} is a LoRA for {own} but --base-model {base_model} is {theirs}; "
            "pass the base the adapter was trained on"
        )
    base_digest = hashes.sha256(base_path)
    base = ResolvedModel("gguf", base_path, base_model, base_digest, {base_path.name: base_digest})
    digest = hashes.sha256(path)
    return ResolvedModel("gguf-adapter", path, source, digest, {path.name: digest}, base=base)


def _resolve_folder(folder: Path, source: str, base_model: str | None, hashes: FileHashes) -> ResolvedModel:
    if (folder / "adapter_config.json").is_file():
        return _resolve_adapter(folder, source, base_model, hashes)
    if (folder / "config.json").is_file():
        fingerprint, files = folder_identity(folder, hashes)
        if not any(name.endswith(WEIGHT_SUFFIXES) for name in files):
            raise ResolveError(
                f"--model-path {source}: config.json but no weight files (*.safetensors, *.bin)"
            )
        return ResolvedModel("checkpoint", folder, source, fingerprint, files)
    raise ResolveError(
        f"--model-path {source}: a folder without config.json (checkpoint) or adapter_config.json "
        "(LoRA adapter); point it at the model folder itself"
    )


def _resolve_adapter(folder: Path, source: str, base_model: str | None, hashes: FileHashes) -> ResolvedModel:
    try:
        config = json.loads((folder / "adapter_config.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ResolveError(f"--model-path {source}: adapter_config.json does not parse ({exc})") from None
    own_base = config.get("base_model_name_or_path") or None
    if base_model and own_base and not _same_model(base_model, own_base):
        raise ResolveError(
            f"--base-model {base_model} differs from the adapter's base_model_name_or_path {own_base}; "
            "pass the base the adapter was trained on (or fix adapter_config.json)"
        )
    chosen = base_model or own_base
    if not chosen:
        raise ResolveError(
            f"--model-path {source}: the adapter names no base_model_name_or_path; pass --base-model"
        )
    base = _resolve_local(chosen, None, hashes)
    if base.kind != "checkpoint":
        raise ResolveError(
            f"--base-model {chosen}: the base of an adapter must be a checkpoint folder or hub id"
        )
    fingerprint, files = folder_identity(folder, hashes)
    rank = config.get("r")
    return ResolvedModel(
        "adapter",
        folder,
        source,
        fingerprint,
        files,
        None,
        base,
        int(rank) if isinstance(rank, int) else None,
    )


def _same_model(given: str, recorded: str) -> bool:
    """The same base, written as a path or a hub id (a local copy is named by its folder)."""
    if given == recorded:
        return True
    a, b = Path(given).expanduser(), Path(recorded).expanduser()
    if a.exists() and b.exists():
        return a.resolve() == b.resolve()
    return a.name == b.name or given.rstrip("/").split("/")[-1] == recorded.rstrip("/").split("/")[-1]


def hub_snapshot(source: str) -> tuple[Path, str]:
    """The local snapshot of a hub id (cache first) and its commit; downloads only when
    the cache lacks it and the user has not asked for offline."""
    repo_id, _, revision = source.partition("@")
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import LocalEntryNotFoundError
    except ImportError:
        raise ResolveError(
            f"--model-path {source}: a hub id needs huggingface_hub; pip install huggingface_hub"
        ) from None
    try:
        folder = snapshot_download(repo_id, revision=revision or None, local_files_only=True)
    except LocalEntryNotFoundError:
        if offline_requested():
            raise ResolveError(
                f"--model-path {source}: not in the local Hugging Face cache and HF_HUB_OFFLINE is set; "
                f"download it first (huggingface-cli download {repo_id}) or unset HF_HUB_OFFLINE"
            ) from None
        unreachable = hub_unreachable()
        if unreachable is not None:
            raise ResolveError(
                f"--model-path {source}: not in the local Hugging Face cache and the hub is unreachable "
                f"({unreachable}); download it where the hub answers (huggingface-cli download {repo_id})"
            ) from None
        try:
            folder = snapshot_download(repo_id, revision=revision or None)
        except Exception as exc:  # noqa: BLE001 - any hub failure is one line
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ResolveError(
                f"--model-path {source}: not in the local cache and the download failed ({first}); "
                f"check the id, HF_TOKEN, or download it (huggingface-cli download {repo_id})"
            ) from None
    except Exception as exc:  # noqa: BLE001 - e.g. a malformed id the hub library rejects
        raise ResolveError(f"--model-path {source}: {str(exc).splitlines()[0]}") from None
    path = Path(folder)
    return path, path.name  # snapshots/<commit>
