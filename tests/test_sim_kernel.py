"""The compiled SimGrid kernel (``batsched_ml/sim/_ckernel.c``) against the Python one.

The Python kernel (:class:`batsched_ml.sim.simgrid.Kernel`) is the reference; the compiled one
must give the same messages, the same job tables and the same clock, bit for bit. The recorded
transcripts run through both (``tests/test_sim_reference.py``), the property tests compare both
with the plain kernel (``tests/test_sim_clock.py``); here, the choice of the kernel, what a
stale build does, and cases only the compiled kernel can get wrong (its own errors, memory).

Where the package was installed without the extension (a plain copy of the sources), the tests
build it from ``_ckernel.c`` with the flags of ``setup.py`` into a temporary folder; they skip
only where no C compiler is found.
"""

from __future__ import annotations

import atexit
import functools
import gc
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import weakref
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import batsched_ml.sim
from batsched_ml import compiled
from batsched_ml.sim import simgrid, simulator
from batsched_ml.sim.loop import SerialFcfs, drive
from batsched_ml.sim.simulator import BatsimSimulator

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "batsched_ml" / "sim" / "_ckernel.c"


@functools.cache
def _compiled_module() -> ModuleType | None:
    """The compiled kernel's module: the installed one if it was built from this source, else
    one built here from ``_ckernel.c``; None without a C compiler."""
    digest = compiled.source_digest(SOURCE)
    if _is_installed_build():
        from batsched_ml.sim import _ckernel  # type: ignore[attr-defined]

        return _ckernel
    compiler = (sysconfig.get_config_var("CC") or "cc").split()
    if shutil.which(compiler[0]) is None:
        return None
    folder = Path(tempfile.mkdtemp(prefix="batsched-ml-ckernel-"))
    atexit.register(shutil.rmtree, folder, True)  # the loaded module needs no file
    target = folder / f"_ckernel{sysconfig.get_config_var('EXT_SUFFIX')}"
    command = [
        *compiler,
        "-shared",
        "-fPIC",
        "-O2",
        "-ffp-contract=off",  # as setup.py
        f'-DSOURCE_SHA256="{digest}"',
        f"-I{sysconfig.get_paths()['include']}",
        str(SOURCE),
        "-o",
        str(target),
    ]
    subprocess.run(command, check=True, capture_output=True)
    name = "batsched_ml.sim._ckernel"
    spec = importlib.util.spec_from_file_location(name, target)
    assert spec is not None and spec.loader is not None
    before = sys.modules.get(name)
    module = importlib.util.module_from_spec(spec)  # (it enters sys.modules: taken out below)
    spec.loader.exec_module(module)
    if before is None:
        sys.modules.pop(name, None)
    else:
        sys.modules[name] = before
    return module


def compiled_kernel() -> Any:
    """The compiled ``Kernel`` class, or skip the test (no C compiler)."""
    module = _compiled_module()
    if module is None:
        pytest.skip("no C compiler: the compiled kernel cannot be built")
    return module.Kernel


def kernel_named(name: str) -> Any:
    return simgrid.Kernel if name == "python" else compiled_kernel()


KERNELS = ["python", "compiled"]


def _run_kth_slice(kernel: Any, jobs: int = 400) -> tuple[int, list[str], float, int]:
    from batsched_ml.workload.convert import convert_trace
    from batsched_ml.workload.swf import read_swf

    trace = ROOT / "batsched_ml" / "data"
    path = next(iter(sorted(trace.glob("*.swf.gz"))))
    workload = convert_trace(read_swf(path)).data
    workload["jobs"] = workload["jobs"][:jobs]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(simulator, "Kernel", kernel)
        sim = BatsimSimulator([workload], [f"host{i}" for i in range(workload["nb_res"])])
        messages = drive(sim, SerialFcfs(workload["nb_res"]))
    return messages, sim.rows, sim.now, sim.steps


def test_both_kernels_run_the_shipped_trace_alike() -> None:
    assert _run_kth_slice(simgrid.Kernel) == _run_kth_slice(compiled_kernel())


def test_the_environment_variable_forces_the_python_kernel() -> None:
    code = "from batsched_ml.sim import simulator; print(simulator.Kernel.__module__)"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop(simgrid.KERNEL_VARIABLE, None)
    forced = {**env, simgrid.KERNEL_VARIABLE: "python"}
    out = subprocess.run([sys.executable, "-c", code], env=forced, capture_output=True, text=True)
    assert out.stdout.strip() == "batsched_ml.sim.simgrid"
    default = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    if _is_installed_build():
        assert default.stdout.strip() == "batsched_ml.sim._ckernel"
    elif importlib.util.find_spec("batsched_ml.sim._ckernel") is None:
        assert default.stdout.strip() == "batsched_ml.sim.simgrid"


@functools.cache
def _is_installed_build() -> bool:
    """Whether the package imported here has the compiled kernel, built from this source."""
    try:
        from batsched_ml.sim import _ckernel  # type: ignore[attr-defined]
    except ImportError:
        return False
    return bool(compiled.source_digest(SOURCE) == _ckernel.SOURCE_SHA256)


def test_a_stale_build_is_not_used(monkeypatch) -> None:
    """An editable install compiled from an older _ckernel.c: warned about, not used."""
    stale = ModuleType("batsched_ml.sim._ckernel")
    stale.SOURCE_SHA256 = "0" * 64  # type: ignore[attr-defined]
    stale.Kernel = object  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "batsched_ml.sim._ckernel", stale)
    monkeypatch.setattr(batsched_ml.sim, "_ckernel", stale, raising=False)  # if imported
    monkeypatch.delenv(simgrid.KERNEL_VARIABLE, raising=False)
    with pytest.warns(RuntimeWarning, match="rebuild it"):
        assert simgrid.kernel_class() is simgrid.Kernel


def test_an_install_of_this_checkout_builds_the_compiled_kernel() -> None:
    """``pip install -e .`` (CI's install) compiles the kernel into this tree: the install must
    not have skipped it (the extension is optional only for machines without a compiler)."""
    import importlib.metadata
    import json

    # (a source tree's own batsched_ml.egg-info, found first from the tree, has no direct_url)
    installs = [
        json.loads(dist.read_text("direct_url.json") or "{}")
        for dist in importlib.metadata.distributions(name="batsched-ml")
    ]
    if not any(
        direct.get("dir_info", {}).get("editable") and direct.get("url") == ROOT.as_uri()
        for direct in installs
    ):
        pytest.skip("not an editable install of this checkout")
    if shutil.which((sysconfig.get_config_var("CC") or "cc").split()[0]) is None:
        pytest.skip("no C compiler")
    assert _is_installed_build(), "reinstall (pip install -e .) to build the compiled kernel"


@pytest.mark.parametrize("name", KERNELS)
def test_an_unknown_simcall_is_a_kernel_error(name: str) -> None:
    kernel = kernel_named(name)()

    def actor():
        yield ("nonsense",)

    kernel.spawn("a", actor())
    with pytest.raises(simgrid.KernelError, match="unknown simcall"):
        list(kernel.run())


@pytest.mark.parametrize("name", KERNELS)
def test_two_transfers_at_once_are_refused(name: str) -> None:
    kernel = kernel_named(name)()

    def sender(box: str):
        yield (simgrid.PUT, box, "x")

    def receiver(box: str):
        yield (simgrid.GET, box)

    for box in ("a", "b"):
        kernel.spawn(f"s{box}", sender(box))
        kernel.spawn(f"r{box}", receiver(box))
    with pytest.raises(simgrid.KernelError, match="two transfers"):
        list(kernel.run())


@pytest.mark.parametrize("name", KERNELS)
def test_an_actors_exception_comes_out_of_the_run(name: str) -> None:
    kernel = kernel_named(name)()

    def actor():
        yield (simgrid.SLEEP, 1.5)
        raise ValueError("from the actor")

    kernel.spawn("a", actor())
    run = kernel.run()
    with pytest.raises(ValueError, match="from the actor"):
        next(run)
    assert kernel.now == 1.5
    with pytest.raises(StopIteration):
        next(run)


@pytest.mark.parametrize("name", KERNELS)
def test_exchanges_kills_and_mailboxes(name: str) -> None:
    """Messages handed out and replies sent back, a kill of a sleeping actor (its code closed,
    its sleep cancelled), a pending mailbox seen from an actor, the clock at each point."""
    kernel = kernel_named(name)()
    seen: list[Any] = []

    def victim():
        try:
            yield (simgrid.SLEEP, 100.0)
            seen.append("victim woke")
        finally:
            seen.append(("victim closed", kernel.now))

    def killer(target_box: list[Any]):
        yield (simgrid.SLEEP, 2.0)
        yield (simgrid.KILL, target_box[0])
        seen.append(("killed", kernel.now))
        reply = yield (simgrid.EXCHANGE, "ask")
        seen.append(("reply", reply))
        reply = yield (simgrid.EXCHANGE, "again")
        seen.append(("reply", reply))
        yield (simgrid.PUT, "box", "payload")
        seen.append(("sent", kernel.now))

    def receiver():
        yield (simgrid.SLEEP, 3.0)
        seen.append(("pending", kernel.has_pending("box"), kernel.has_pending("none")))
        got = yield (simgrid.GET, "box")
        seen.append(("got", got, kernel.now))

    target: list[Any] = []
    target.append(kernel.spawn("victim", victim()))
    kernel.spawn("killer", killer(target))
    kernel.spawn("receiver", receiver())
    run = kernel.run()
    assert next(run) == "ask"
    assert run.send(1) == "again"
    with pytest.raises(StopIteration):
        run.send(2)
    assert seen == [
        ("victim closed", 2.0),
        ("killed", 2.0),
        ("reply", 1),
        ("reply", 2),
        ("pending", True, False),
        ("sent", 3.0 + 1e-12),
        ("got", "payload", 3.0 + 1e-12),
    ]
    assert kernel.steps == 3


def test_the_compiled_kernel_frees_a_finished_simulation() -> None:
    """The actors' code refers to the simulator, which refers to the kernel: the cycle goes
    through the compiled objects, which the garbage collector must see through."""
    kernel_type = compiled_kernel()
    refs = []
    for _ in range(3):
        kernel = kernel_type()

        def actor(k=kernel):
            yield (simgrid.SLEEP, 1.0 + k.now)
            yield (simgrid.PUT, "box", k)  # a payload that refers back to the kernel

        kernel.spawn("a", actor())
        kernel.spawn("b", actor())
        run = kernel.run()
        with pytest.raises(StopIteration):
            run.send(None)
        refs.append(weakref.ref(kernel))
        del kernel, run, actor
    gc.collect()
    assert [ref() for ref in refs] == [None, None, None]


@pytest.mark.parametrize("name", KERNELS)
def test_an_actor_cannot_resume_the_run_it_runs_in(name: str) -> None:
    """As a generator refuses to be resumed from its own code ("already executing")."""
    kernel = kernel_named(name)()
    runs: list[Any] = []

    def actor():
        yield (simgrid.SLEEP, 1.0)
        next(runs[0])

    kernel.spawn("a", actor())
    runs.append(kernel.run())
    with pytest.raises(ValueError, match="already executing"):
        next(runs[0])


# --- random actor programs: the compiled kernel against the Python one -------------------------

_DURATIONS = [1e-13, 5e-10, 1e-9, 0.25, 1.0, 1.0 + 2.0**-40, 3.0, 7860.0, 16384.0, 20000.5]


def _program(draw: Any, depth: int = 0) -> list[tuple[Any, ...]]:
    from hypothesis import strategies as st

    ops: list[tuple[Any, ...]] = []
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["sleep", "sleep", "put", "get", "exchange", "create", "kill"]))
        if kind == "sleep":
            ops.append(("sleep", draw(st.sampled_from(_DURATIONS))))
        elif kind == "put":
            ops.append(("put", draw(st.sampled_from(["a", "a", "b"])), draw(st.integers(0, 99))))
        elif kind == "get":
            ops.append(("get", draw(st.sampled_from(["a", "a", "b"]))))
        elif kind == "exchange":
            ops.append(("exchange", draw(st.integers(0, 99))))
        elif kind == "create" and depth < 2:
            ops.append(("create", _program(draw, depth + 1)))
        elif kind == "kill":
            ops.append(("kill", draw(st.integers(0, 9))))
    return ops


def _play(kernel_type: Any, programs: list[list[tuple[Any, ...]]]) -> list[Any]:
    """Run the programs as actors; the log of what each saw, with the clock, bit for bit."""
    kernel = kernel_type()
    log: list[Any] = []
    actors: list[Any] = []
    names = iter(range(10**6))

    def code(name: int, ops: list[tuple[Any, ...]]):
        try:
            for op in ops:
                if op[0] == "sleep":
                    got = yield (simgrid.SLEEP, op[1])
                elif op[0] == "put":
                    got = yield (simgrid.PUT, op[1], (name, op[2]))
                elif op[0] == "get":
                    got = yield (simgrid.GET, op[1])
                elif op[0] == "exchange":
                    got = yield (simgrid.EXCHANGE, (name, op[1]))
                elif op[0] == "create":
                    child = next(names)
                    created = yield (simgrid.CREATE, f"actor {child}", code(child, op[1]))
                    actors.append(created)
                    got = child
                else:
                    if not actors:
                        continue
                    yield (simgrid.KILL, actors[op[1] % len(actors)])
                    got = op[1] % len(actors)
                log.append((name, op[0], got, kernel.now.hex()))
        finally:
            log.append((name, "end", kernel.now.hex()))

    for ops in programs:
        name = next(names)
        actors.append(kernel.spawn(f"actor {name}", code(name, ops)))
    run = kernel.run()
    try:
        message = next(run)
        while True:
            log.append(("exchange", message, kernel.now.hex()))
            message = run.send(("reply", message))
    except StopIteration:
        pass
    except simgrid.KernelError as error:
        # taken here, while the traceback keeps the Python kernel's frame (and the actors it
        # held) alive: what the actors log when they are freed is no part of the semantics
        return [*log, ("error", str(error)), ("steps", kernel.steps, kernel.now.hex())]
    # a copy, for the same reason: the actors still waiting at the end log their "end"
    # whenever the garbage collector frees them
    return [*log, ("steps", kernel.steps, kernel.now.hex())]


def test_random_programs_run_alike_on_both_kernels() -> None:
    """Sleeps (equal, closer than the precision, below a transfer's 1e-12 s, across 2**14 s),
    puts and gets on two mailboxes (a second transfer at once is an error in both), messages
    handed out, actors created and killed (sleeping, waiting on a mailbox, or themselves):
    the same log, the same clock, the same steps; and the same as the plain line-by-line
    kernel of ``tests/test_sim_clock.py`` (a put's or a get's wait a simcall of its own)."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from tests.test_sim_clock import NaiveKernel

    compiled = compiled_kernel()

    @settings(max_examples=300, deadline=None, database=None)
    @given(st.data())
    def check(data: Any) -> None:
        programs = [_program(data.draw) for _ in range(data.draw(st.integers(1, 5)))]
        plain = _play(NaiveKernel, programs)
        assert _play(simgrid.Kernel, programs) == plain
        assert _play(compiled, programs) == plain

    check()
