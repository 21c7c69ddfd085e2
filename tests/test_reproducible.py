"""Same seed, same numbers: on a busy machine, and after a kill and a resume."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import grprune
from tests.conftest import strip_keys
from grprune.record.files import CHECKPOINT, EDGE_PROBS, RESULTS, STATE, SUMMARY, read_records

# Fields that measure time, memory or the data cache, not the computation.
VOLATILE = {"epoch_time_s", "train_time_s", "wall_time_s", "data_load_s", "peak_mem_mib",
            "peak_rss_mib", "epoch_time_s_median", "cache"}


#: the settings importing grprune makes (this test process has imported it)
PINNED = ("MKL_CBWR", "ATEN_CPU_CAPABILITY")


def _cpu_flag(flag: str) -> bool:
    try:
        with open("/proc/cpuinfo") as fh:
            return any(flag in line.split() for line in fh if line.startswith("flags"))
    except OSError:
        return False


def _output(args: list[str], **env) -> str:
    """stdout of ``python ARGS`` in this environment without the settings importing grprune
    makes (:data:`PINNED`), plus ``env``."""
    environ = {k: v for k, v in os.environ.items() if k not in PINNED}
    return subprocess.run([sys.executable, *args], env={**environ, **env}, check=True,
                          capture_output=True, text=True, stdin=subprocess.DEVNULL).stdout.strip()


def _strip(obj):
    """``obj`` without the VOLATILE fields, at any depth."""
    return strip_keys(obj, VOLATILE)


def _numbers(run_dir: Path) -> tuple[list, dict]:
    summary = json.loads((run_dir / SUMMARY).read_text())
    return _strip(read_records(run_dir / RESULTS)), _strip(summary)


def test_importing_grprune_fixes_mkl_reproducibility_mode_unless_the_user_chose_one():
    code = "import os, grprune; print(os.environ['MKL_CBWR'])"
    assert _output(["-c", code]) == "AUTO"
    assert _output(["-c", code], MKL_CBWR="COMPATIBLE") == "COMPATIBLE"


AVX2 = pytest.mark.skipif(not grprune._cpu_has_avx2(), reason="not an x86-64 CPU with AVX2")


@AVX2
def test_importing_grprune_pins_torchs_avx2_kernels_unless_the_user_chose_others():
    code = "import grprune, torch; print(torch.backends.cpu.get_cpu_capability())"
    assert _output(["-c", code]) == "AVX2"
    assert _output(["-c", code], ATEN_CPU_CAPABILITY="default") == "DEFAULT"


@AVX2
def test_a_run_repeats_on_cpus_with_and_without_avx512(tmp_path):
    # An AVX2-only CPU runs the AVX2 kernels (ATEN_CPU_CAPABILITY=avx2 stands in for one);
    # before the pin an AVX-512 CPU parted from it in the first epoch.
    run = ["-m", "grprune", "run", "--data", "ogbg-molbbbp", "--epochs", "2", "--device",
           "cpu", "--progress", "none", "--json", "-H", "data.limit=400"]
    _output([*run, "--out", str(tmp_path / "default")])
    _output([*run, "--out", str(tmp_path / "avx2")], ATEN_CPU_CAPABILITY="avx2")
    assert _numbers(tmp_path / "default") == _numbers(tmp_path / "avx2")
    summary = json.loads((tmp_path / "default" / SUMMARY).read_text())
    assert summary["determinism"]["cpu_capability"] == "AVX2"


@pytest.mark.skipif(not _cpu_flag("avx512f"), reason="no AVX-512 to fall back to")
def test_a_run_warns_when_torch_computed_before_grprune_pinned_its_kernels():
    code = ("import torch; torch.ones(2).sum(); import grprune, warnings\n"
            "from grprune import determinism\n"
            "with warnings.catch_warnings(record=True) as w:\n"
            "    warnings.simplefilter('always')\n"
            "    rec = determinism.apply(torch.device('cpu'), True)\n"
            "print(rec['cpu_capability'], len(w), str(w[0].message) if w else '')")
    out = _output(["-c", code])
    assert out.startswith("AVX512 1 grprune: torch runs its AVX512 CPU kernels"), out


def test_runs_of_one_seed_repeat_exactly_while_another_process_keeps_a_core_busy(tmp_path):
    # Two threads while a busy loop holds a core: before the CSR sums, two such molbbbp runs
    # differed from the first epoch in every try on this project's 2-core machine. (400
    # training graphs: OpenMP threads waiting for a busy core make every step slow.)
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"],
                            stdin=subprocess.DEVNULL)
    try:
        for i in range(2):
            # train.threads=2: on a busy core the default would probe and take one
            _output(["-m", "grprune", "run", "--data", "ogbg-molbbbp", "--epochs", "2",
                     "-H", "data.limit=400", "-H", "train.threads=2", "--device", "cpu",
                     "--progress", "none", "--json", "--out", str(tmp_path / f"r{i}")],
                    OMP_NUM_THREADS="2")
    finally:
        busy.kill()
        busy.wait()
    first, second = _numbers(tmp_path / "r0"), _numbers(tmp_path / "r1")
    assert first == second
    determinism = first[1]["determinism"]
    assert determinism["deterministic"] is True
    assert determinism["threads"] == 2


@pytest.mark.parametrize("kw", [
    {"reg": "size,eps-align"},                        # PrunE, the GIN encoder and selector
    {"reg": "size,eps-align", "preset": "official"},  # the official code's recipe
    {"reg": "size,eps-align", "encoder": "gcn", "selector": "gumbel-gcn"},
    {"reg": "none"}, {"reg": "gsat"}, {"reg": "ciga"}, {"reg": "vrex"},
], ids=lambda kw: "-".join(f"{v}" for v in kw.values()))
def test_a_run_gives_the_same_numbers_on_one_and_two_threads(tmp_path, kw):
    """The CPU trains on torch's thread count (``train.deterministic`` no longer lowers it),
    and the ops whose sums depend on it run on one thread
    (:func:`grprune.determinism.one_thread`, :func:`~grprune.determinism.serial`): one
    seed gives the same records and summary on 1 and on 2 threads. Batches of ~1,500 atoms,
    so the sums over all N x D node states are above torch's two-pass threshold."""
    import torch

    from grprune.run import execute, plan_run

    got = []
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            plan = plan_run(data="ogbg-molbbbp", seed=0, progress="none",
                            out=tmp_path / f"t{threads}", device="cpu",
                            overrides=["data.limit=192", "train.epochs=2",
                                       "train.warmup_epochs=0", "train.eval_train=false",
                                       f"train.threads={threads}"],  # not the probe's choice
                            **kw)
            summary = execute(plan.cfg, plan.run_dir, log=lambda line: None)[1]
            assert summary.determinism["threads"] == threads
            records, written = _numbers(plan.run_dir)
            written.pop("determinism")
            got.append((records, written))
    finally:
        torch.set_num_threads(1)  # conftest's
    assert got[0] == got[1]


class _Clock:
    """A stand-in for ``time.perf_counter``: each reading advances by ``step[threads]``
    seconds, ``threads`` being torch's count at the reading."""

    def __init__(self, step):
        self.now, self.step = 0.0, step

    def __call__(self):
        import torch
        self.now += self.step[min(torch.get_num_threads(), 2)]
        return self.now


@pytest.mark.parametrize("step, chosen", [({1: 1.0, 2: 0.1}, 3),    # idle cores: all
                                          ({1: 0.1, 2: 5.0}, 1)])   # busy cores: one
def test_the_thread_probe_takes_the_faster_count(monkeypatch, step, chosen):
    import torch

    from grprune import determinism
    before = torch.get_num_threads()
    clock = _Clock(step)
    monkeypatch.setattr(determinism.time, "perf_counter", clock)
    try:
        assert determinism.faster_thread_count(3) == chosen == torch.get_num_threads()
        if chosen == 1:  # the slow count's timing stops at 4x one thread's, not 16 regions
            assert clock.now < 16 * step[2]
        assert determinism.faster_thread_count(1) == 1 == torch.get_num_threads()
    finally:
        torch.set_num_threads(before)


def test_a_run_probes_its_threads_each_epoch_and_gives_torchs_count_back(tmp_path,
                                                                         monkeypatch):
    """``train.threads=0`` (auto): the probe before every epoch, between 1 and torch's count
    when the trainer was built; ``train.threads=N``: N threads; after the run, torch's count
    as it was."""
    import torch

    from grprune import determinism
    from grprune.run import execute, plan_run
    probes: list[int] = []
    during: list[int] = []

    def one_thread_probed(most: int) -> int:
        probes.append(most)
        torch.set_num_threads(1)
        return 1

    monkeypatch.setattr(determinism, "faster_thread_count", one_thread_probed)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        for threads in (0, 3):
            plan = plan_run(data="ogbg-molbbbp", seed=0, progress="none", device="cpu",
                            out=tmp_path / f"t{threads}", reg="none", preset="paper",
                            overrides=["data.limit=48", "train.epochs=2",
                                       f"train.threads={threads}"])
            summary = execute(plan.cfg, plan.run_dir, log=lambda line: None,
                              on_epoch=lambda rec: during.append(torch.get_num_threads()))[1]
            assert torch.get_num_threads() == 2
            assert summary.determinism["threads"] == (threads or 2)
        assert probes == [2, 2] and during == [1, 1, 3, 3]
    finally:
        torch.set_num_threads(before)


_KILLER = """
import os, signal, sys
from pathlib import Path
from grprune.record import files as R  # where the writers live
target, nth = sys.argv[1], int(sys.argv[2])
count = 0
def then_maybe_die(write):
    def wrapped(path, data):
        global count
        write(path, data)
        if Path(path).name == target:
            count += 1
            if count == nth:
                os.kill(os.getpid(), signal.SIGKILL)
    return wrapped
# atomic writes, and results.jsonl's appends (one line per epoch)
R.atomic_write_bytes = then_maybe_die(R.atomic_write_bytes)
R.append_bytes = then_maybe_die(R.append_bytes)
from grprune.cli import main
main(sys.argv[3:])
"""

RUN = ["run", "--data", "ogbg-molbbbp", "--epochs", "5", "--device", "cpu", "--progress",
       "none", "--json", "-H", "data.limit=160", "-H", "train.batch_size=32",
       "-H", "train.patience=3"]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("uninterrupted") / "run"
    _output(["-m", "grprune", *RUN, "--out", str(out)])
    return out


@pytest.mark.parametrize("target, nth", [
    (CHECKPOINT, 2),   # after a new best checkpoint, before that epoch's record
    (RESULTS, 3),      # after the third record, before that epoch's state
    (STATE, 2),        # between epochs
    (EDGE_PROBS, 1),   # after training, while the summary is being made
])
def test_a_run_killed_at_any_write_resumes_to_the_uninterrupted_numbers(
        tmp_path, uninterrupted, target, nth):
    cut = tmp_path / "cut"
    killed = subprocess.run([sys.executable, "-c", _KILLER, target, str(nth), *RUN,
                             "--out", str(cut)], capture_output=True, text=True,
                            stdin=subprocess.DEVNULL)
    assert killed.returncode == -9, killed.stderr
    assert not (cut / SUMMARY).exists()
    _output(["-m", "grprune", *RUN, "--out", str(cut)])
    assert _numbers(cut) == _numbers(uninterrupted)
