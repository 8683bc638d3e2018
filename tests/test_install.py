"""An ordinary install: the package built as a wheel and installed non-editable (as cluster images and shared
environments do) finds its schema, captions and bundled model configs, validates a config and dry-runs the
embedded default from a workflow folder that holds no package source."""

import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The wheel of this checkout installed into a fresh target folder (dependencies: this environment's)."""
    tmp = tmp_path_factory.mktemp("install")
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                            str(tmp / "dist"), str(ROOT)], capture_output=True, text=True, cwd=tmp)
    assert build.returncode == 0, build.stderr[-2000:]
    (wheel,) = (tmp / "dist").glob("grpo_budget-*.whl")
    target = tmp / "site"
    install = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target),
                              str(wheel)], capture_output=True, text=True)
    assert install.returncode == 0, install.stderr[-2000:]
    return target


def run_installed(target, args, cwd):
    env = dict(os.environ, PYTHONPATH=str(target))  # ahead of this environment's editable install
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=cwd, env=env)


def test_the_installed_package_is_the_wheels_and_carries_its_data(installed, tmp_path):
    probe = ("import grpo_budget; from grpo_budget.config import schema; "
             "from grpo_budget.aggregate import outputs, run; "
             "from grpo_budget.cluster import shapes; print(grpo_budget.__file__); "
             "print(schema.SCHEMA_PATH.is_file(), all(outputs.caption_file(n).is_file() for n in run.OUTPUTS), "
             "len(list(shapes.BUNDLED.glob('*.json'))))")
    out = run_installed(installed, ["-c", probe], tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    where, found = out.stdout.splitlines()
    assert where.startswith(str(installed))
    assert found.split()[:2] == ["True", "True"] and int(found.split()[2]) >= 7


def test_an_installed_wheel_validates_a_config_and_dry_runs_the_embedded_default(installed, tmp_path):
    work = tmp_path / "workflow-only"
    work.mkdir()
    shutil.copy(ROOT / "Snakefile", work)
    shutil.copy(ROOT / "config.yaml", work)
    shutil.copytree(ROOT / "workflow" / "rules", work / "workflow" / "rules")
    shutil.copytree(ROOT / "workflow" / "report", work / "workflow" / "report")
    shutil.copytree(ROOT / "profiles", work / "profiles")
    shutil.copytree(ROOT / "envs", work / "envs")
    validate = run_installed(installed, ["-c", "import sys; from grpo_budget.cli import main; "
                                               "sys.exit(main(['validate-config', 'config.yaml']))"], work)
    assert validate.returncode == 0, validate.stderr[-2000:]
    dry = run_installed(installed, ["-m", "snakemake", "-n", "--quiet", "rules"], work)
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert "train" in dry.stdout and "evaluate" in dry.stdout


def test_the_installed_sandbox_carries_its_mount_points_and_runs_code(installed, tmp_path):
    """The code sandbox's root is the package's own folder of empty mount points: the wheel must carry them."""
    probe = ("from pathlib import Path; from grpo_budget.generation import sandbox; "
             "print(','.join(sorted(str(p.relative_to(sandbox.ROOT)) for p in Path(sandbox.ROOT).rglob('*') if p.is_file()))); "
             "print(sandbox.ROOT); print(sandbox.problem())")
    out = run_installed(installed, ["-c", probe], tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    files, root, problem = out.stdout.splitlines()
    assert root.startswith(str(installed))
    assert files.split(",") == ["bin/mount-point", "dev/null", "dev/urandom", "lib/mount-point", "lib64/mount-point",
                                "sbin/mount-point", "usr/mount-point", "work/mount-point"]
    from grpo_budget.generation import sandbox

    if sandbox.problem() is None:  # where this checkout's sandbox runs, the installed one runs too
        assert problem == "None", problem
