"""Hub models fetched once: each hub id's folder in ``model_store``, downloaded there by the ``fetch_model`` rule
before any GPU job, so that jobs on compute nodes without network access read it with the hub offline.

``GRPO_BUDGET_HUB_MIRROR`` names a folder that holds ``ORG/NAME/`` copies of hub models (a site's shared mirror, or
a test's stand-in for the hub): fetching then copies from it instead of downloading.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from grpo_budget.errors import UserError

HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
COMPLETE = ".fetched"  # written last: a folder without it is an interrupted download
MIRROR_ENV = "GRPO_BUDGET_HUB_MIRROR"


def is_hub_id(path: str) -> bool:
    """A hub id (``org/name``) rather than a local folder."""
    return bool(HUB_ID.match(path)) and not Path(path).exists()


def folder_name(hub_id: str) -> str:
    return hub_id.replace("/", "--")


def store_folder(model_store: str, hub_id: str) -> str:
    return str(Path(model_store) / folder_name(hub_id))


def fetched(config: dict, model: str) -> bool:
    """Whether the fetch_model rule downloads this model into ``model_store`` before its jobs."""
    path = config["models"][model].get("path")
    return bool(config.get("model_store")) and path is not None and is_hub_id(path)


def store_pattern(config: dict) -> str:
    """The fetch_model rule's output: one folder per hub model in ``model_store``."""
    return str(Path(config["model_store"]) / "{hub_model}")


def hub_id_of(config: dict, folder: str) -> str:
    """The hub id whose ``model_store`` folder is ``folder`` (the fetch_model rule's wildcard)."""
    ids = {folder_name(spec["path"]): spec["path"] for m, spec in config["models"].items() if fetched(config, m)}
    if folder not in ids:
        raise UserError(f"{folder}: no configured hub model is stored there (known: {', '.join(sorted(ids))})")
    return ids[folder]


def fetch_into(hub_id: str, partial: str | Path, out: str | Path) -> Path:
    """The fetch_model job: download into ``partial`` (kept across a killed job, so the download resumes), then
    move the complete folder to ``out``."""
    partial, out = Path(partial), Path(out)
    partial.parent.mkdir(parents=True, exist_ok=True)
    fetch(hub_id, partial)
    if out.exists():
        shutil.rmtree(out)
    partial.rename(out)
    return out


def fetch(hub_id: str, dest: str | Path) -> Path:
    """Download (or copy from the mirror) every file of ``hub_id`` into ``dest``; the token comes from
    ``HF_TOKEN`` (gated models such as Llama need one). Resumes an interrupted download."""
    dest = Path(dest)
    mirror = os.environ.get(MIRROR_ENV)
    if mirror:
        source = Path(mirror) / hub_id
        if not (source / "config.json").is_file():
            raise UserError(f"{MIRROR_ENV}={mirror} has no {hub_id}/config.json")
        shutil.copytree(source, dest, dirs_exist_ok=True)
    else:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

        try:
            snapshot_download(hub_id, local_dir=dest, token=os.environ.get("HF_TOKEN"))
        except GatedRepoError as e:
            raise UserError(f"{hub_id} is gated: accept its licence on huggingface.co and export HF_TOKEN") from e
        except RepositoryNotFoundError as e:
            raise UserError(f"{hub_id}: no such model on the hub (or it is private: export HF_TOKEN)") from e
        except Exception as e:  # noqa: BLE001 - no network, a proxy, a timeout: the model and the ways out, one line
            raise UserError(unreachable(hub_id, e)) from e
    (dest / COMPLETE).write_text(hub_id + "\n")
    return dest


def unreachable(hub_id: str, e: BaseException) -> str:
    """One line for a hub model that cannot be fetched or loaded: which, why, and the ways round the hub."""
    reason = " ".join(str(e).split())[:160]
    return (f"{hub_id}: cannot be fetched from the Hugging Face hub ({type(e).__name__}: {reason}); fixes: a local "
            f"folder as the model's path:, a model_store folder fetched where the hub is reachable (grpo-budget "
            f"fetch-models there, then copy it), HF_HUB_OFFLINE=1 with the model already in the hub cache, or a mirror "
            f"(HF_ENDPOINT=URL, or {MIRROR_ENV}=FOLDER holding {hub_id}/)")
