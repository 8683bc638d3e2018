"""Checkpoints carry the sha256 of their files (issue #25, item 1): weights overwritten in place, header and length
kept, are set aside and retrained rather than resumed from or evaluated."""

import hashlib
import json
import logging
import struct

import pytest

from grpo_budget.errors import UserError
from grpo_budget.evaluate.evaluation import evaluate
from grpo_budget.config.settings import Generation
from grpo_budget.train.checkpoints import (DIGEST_FILE, checkpoints, discard_incomplete, incomplete_reason,
                                           record_digests, verify_listed)
from test_reliability import fake_checkpoint, run, steps, subset  # noqa: F401 (subset is a fixture)


def scramble_body(path):
    """Overwrite a safetensors file's tensor bytes, keeping its header and size: every structural check passes."""
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    body = data[8 + n:]
    path.write_bytes(data[:8 + n] + bytes((b + 1) % 256 for b in body))


def sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_digest_file_round_trip(tmp_path):
    ck = fake_checkpoint(tmp_path / "checkpoint-1")
    (ck / DIGEST_FILE).unlink()
    assert incomplete_reason(ck) == f"{DIGEST_FILE} missing or unreadable (the save stopped before its digests " \
                                    "were written)"
    digests = record_digests(ck)
    assert json.loads((ck / DIGEST_FILE).read_text()) == digests
    assert sorted(digests) == sorted(p.name for p in ck.iterdir() if p.name != DIGEST_FILE)
    assert all(digests[name] == sha256(ck / name) for name in digests)
    assert incomplete_reason(ck) is None
    scramble_body(ck / "adapter_model.safetensors")
    assert incomplete_reason(ck) == "adapter_model.safetensors does not match its recorded sha256"
    (ck / DIGEST_FILE).write_text('{"trunc')
    assert DIGEST_FILE in incomplete_reason(ck)


def test_an_overwritten_checkpoint_sets_aside_the_later_ones_too(tmp_path, caplog):
    for step in (1, 2, 3):
        fake_checkpoint(tmp_path / f"checkpoint-{step}")
    scramble_body(tmp_path / "checkpoint-2" / "adapter_model.safetensors")
    with caplog.at_level(logging.WARNING, logger="grpo_budget.train.checkpoints"):
        assert discard_incomplete(tmp_path) == [tmp_path / "checkpoint-2", tmp_path / "checkpoint-3"]
    # resuming from checkpoint-3 would leave checkpoint-2 never saved again
    assert [s for s, _ in checkpoints(tmp_path)] == [1]
    assert sorted(p.name for p in (tmp_path / "incomplete").iterdir()) == ["checkpoint-2.1", "checkpoint-3.1"]
    assert "does not match its recorded sha256" in caplog.text and "after incomplete checkpoint-2" in caplog.text


def test_scrambled_weights_are_refused_set_aside_and_retrained(tmp_path, subset, tiny_model_dir):  # noqa: F811
    manifest_path = tmp_path / "manifest.json"
    first = run(tmp_path, subset, tiny_model_dir)
    weights = tmp_path / "ck" / "checkpoint-2" / "adapter_model.safetensors"
    assert [c["sha256"] for c in first["checkpoints"]] == [
        sha256(tmp_path / "ck" / f"checkpoint-{s}" / "adapter_model.safetensors") for s in (1, 2)]
    size = weights.stat().st_size
    scramble_body(weights)
    assert weights.stat().st_size == size
    assert incomplete_reason(weights.parent) == "adapter_model.safetensors does not match its recorded sha256"

    # evaluation checks before loading anything: one line naming the checkpoint, where it went and the way out
    gen = Generation.from_dict({}, "evaluation")
    with pytest.raises(UserError) as e:
        evaluate(str(tiny_model_dir), str(subset), str(tmp_path / "eval.parquet"), gen, {}, str(manifest_path))
    aside = tmp_path / "ck" / "incomplete" / "checkpoint-2.1"
    message = str(e.value)
    assert "\n" not in message
    for needle in (str(weights.parent), "adapter_model.safetensors does not match the sha256 recorded at training",
                   f"moved it to {aside}", f"deleted {manifest_path}", "run the same snakemake command again"):
        assert needle in message, (needle, message)
    assert not manifest_path.exists() and not weights.parent.exists()
    assert sha256(aside / "adapter_model.safetensors") != first["checkpoints"][1]["sha256"]

    # the re-run (the manifest is train's output) resumes from the last good checkpoint and saves step 2 again
    second = run(tmp_path, subset, tiny_model_dir)
    assert (second["resumed_from_step"], second["final_step"], steps(second)) == (1, 2, [1, 2])
    assert second["checkpoints"][1]["sha256"] == sha256(weights)
    verify_listed(manifest_path, second["checkpoints"])  # passes
    assert not (tmp_path / "eval.parquet").exists()


def test_training_retrains_from_before_an_overwritten_checkpoint(tmp_path, subset, tiny_model_dir,  # noqa: F811
                                                                  caplog):
    run(tmp_path, subset, tiny_model_dir)
    scramble_body(tmp_path / "ck" / "checkpoint-1" / "adapter_model.safetensors")
    with caplog.at_level(logging.WARNING, logger="grpo_budget.train.checkpoints"):
        manifest = run(tmp_path, subset, tiny_model_dir)
    assert (manifest["resumed_from_step"], manifest["final_step"], steps(manifest)) == (0, 2, [1, 2])
    assert sorted(p.name for p in (tmp_path / "ck" / "incomplete").iterdir()) == ["checkpoint-1.1", "checkpoint-2.1"]
    assert "checkpoint-1 is incomplete (adapter_model.safetensors does not match its recorded sha256)" in caplog.text


def test_manifests_from_before_digests_are_not_checked(tmp_path):
    ck = fake_checkpoint(tmp_path / "checkpoint-1")
    manifest = tmp_path / "manifest.json"
    manifest.write_text("{}")
    verify_listed(manifest, [{"step": 1, "path": str(ck)}])
    assert manifest.exists() and ck.exists()
