"""A manifest's paths are relative to its results folder, read back against the folder it is in now: a copy checks
and evaluates its own checkpoints, a moved folder finds them, and a job changes nothing outside its own folder."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import torch
from safetensors.torch import save_file

from grpo_budget import io
from grpo_budget.errors import UserError
from grpo_budget.io import RESULTS, confined, read_json, write_json
from grpo_budget.train.checkpoints import adapter_digest, claim_checkpoint_dir, record_digests, verify_listed
from grpo_budget.train.manifest import checkpoint_path, recorded, results_root

RUN = "runs/tiny/framearith/hard/b0.2/s0"


def checkpoint(path: Path, value: float) -> Path:
    """The files of a saved checkpoint, with their digests."""
    path.mkdir(parents=True)
    (path / "trainer_state.json").write_text('{"global_step": 1}')
    (path / "adapter_config.json").write_text("{}")
    save_file({"w": torch.full((64,), value)}, path / "adapter_model.safetensors")
    for name in ("optimizer.pt", "scheduler.pt", "rng_state.pth"):
        torch.save({}, path / name)
    record_digests(path)
    return path


def finished_run(results: Path, legacy: bool) -> Path:
    """A run folder with checkpoints 3 and 6 and its manifest, as training writes it now or, with ``legacy``, as it
    did before paths were relative (absolute paths)."""
    run = results / RUN
    manifest = run / "manifest.json"
    entries = []
    for step in (3, 6):
        ck = checkpoint(run / "checkpoints" / f"checkpoint-{step}", float(step))
        entries.append({"step": step, "path": str(ck) if legacy else recorded(ck, manifest),
                        "sha256": adapter_digest(ck)})
    write_json({"checkpoints": entries}, manifest)
    return manifest


def tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*"))
            if p.is_file()}


def test_the_results_folder_is_found_from_the_manifests_place_in_the_layout(tmp_path):
    assert results_root(tmp_path / "r" / RUN / "manifest.json") == tmp_path / "r"
    assert results_root(tmp_path / "r" / RUN / "v-beta0.1" / "manifest.json") == tmp_path / "r"
    assert results_root(tmp_path / "runs" / RUN / "manifest.json") == tmp_path / "runs"  # a folder named runs
    assert results_root(tmp_path / "x" / "manifest.json") == tmp_path / "x"  # outside the layout: its own folder
    manifest = finished_run(tmp_path / "r", legacy=False)
    entries = read_json(manifest)["checkpoints"]
    assert entries[0]["path"] == f"{RESULTS}/{RUN}/checkpoints/checkpoint-3"
    assert recorded("Qwen/Qwen3-4B", manifest) == "Qwen/Qwen3-4B"  # a hub id stays as it is


@pytest.mark.parametrize("legacy", [False, True])
def test_a_copy_checks_its_own_checkpoints_and_leaves_the_original_untouched(tmp_path, legacy):
    """cp -a of a results folder, one adapter of the copy overwritten in place: the copy's check catches it and
    sets the copy's checkpoint aside; the original folder is byte for byte as it was (before, an absolute path
    made the copy check, and on a mismatch move, the original's)."""
    manifest = finished_run(tmp_path / "original", legacy)
    shutil.copytree(tmp_path / "original", tmp_path / "copy", symlinks=True)
    before = tree(tmp_path / "original")
    copied = tmp_path / "copy" / RUN
    adapter = copied / "checkpoints/checkpoint-6/adapter_model.safetensors"
    save_file({"w": torch.full((64,), -1.0)}, adapter)  # same size, other weights
    entries = read_json(copied / "manifest.json")["checkpoints"]
    with confined(tmp_path / "copy"), pytest.raises(UserError, match=f"checkpoint {copied}/checkpoints/checkpoint-6: "
                                                                     "its adapter_model.safetensors does not match"):
        verify_listed(copied / "manifest.json", entries)
    assert (copied / "checkpoints/incomplete/checkpoint-6.1").is_dir() and not (copied / "manifest.json").exists()
    assert tree(tmp_path / "original") == before
    assert [p for _, p in verify_listed(manifest, read_json(manifest)["checkpoints"])] == [
        tmp_path / "original" / RUN / "checkpoints" / f"checkpoint-{s}" for s in (3, 6)]


@pytest.mark.parametrize("legacy", [False, True])
def test_a_moved_folder_reads_its_checkpoints_where_they_are_now(tmp_path, legacy):
    finished_run(tmp_path / "a" / "results", legacy)
    shutil.move(tmp_path / "a" / "results", tmp_path / "b")
    manifest = tmp_path / "b" / RUN / "manifest.json"
    listed = verify_listed(manifest, read_json(manifest)["checkpoints"])
    assert listed == [(s, tmp_path / "b" / RUN / "checkpoints" / f"checkpoint-{s}") for s in (3, 6)]


def test_an_old_manifest_relative_to_the_working_directory_and_a_foreign_path(tmp_path):
    manifest = tmp_path / "moved" / RUN / "manifest.json"
    # written with `results: results-tiny` (a path relative to the project folder), then moved
    assert checkpoint_path(manifest, f"results-tiny/{RUN}/checkpoints/checkpoint-3") == (
        tmp_path / "moved" / RUN / "checkpoints" / "checkpoint-3")
    for foreign in ("/elsewhere/runs/tiny/framearith/random/b0.2/s0/checkpoints/checkpoint-3", "/tmp/checkpoint-3",
                    f"{RESULTS}/../outside/checkpoint-3"):
        with pytest.raises(UserError, match="which is not in this run's folder"):
            checkpoint_path(manifest, foreign)


def test_a_confined_job_writes_moves_and_deletes_nothing_outside_its_folder(tmp_path):
    mine, other = tmp_path / "mine", tmp_path / "other"
    (other / "ck" / "checkpoint-1").mkdir(parents=True)
    write_json({"fingerprint": "a"}, other / "ck" / "fingerprint.json")
    io.write_parquet(pd.DataFrame({"x": [1]}), other / "t.parquet")
    io.digest_path(other / "t.parquet").write_text("0" * 64 + "\n")  # a mismatch would move it aside
    before = tree(other)
    with confined(mine):
        write_json({"ok": True}, mine / "x.json")
        with pytest.raises(UserError, match="refusing to write it, since it lies outside the results folder"):
            write_json({"no": True}, other / "x.json")
        with pytest.raises(UserError, match="refusing to move it"):
            claim_checkpoint_dir(other / "ck", {"fingerprint": "b", "parts": {}})
        with pytest.raises(UserError, match="refusing to move it"):
            io.read_parquet(other / "t.parquet")
    assert tree(other) == before and json.loads((mine / "x.json").read_text()) == {"ok": True}
