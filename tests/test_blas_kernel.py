"""OpenBLAS's kernel chosen before numpy loads it (``batsched_ml.blas_kernel``): SVR's dot
products, and so the SU predictor's predictions, are then the same on every x86-64 processor
with AVX2, AVX-512 or not."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import warnings

import pytest

from batsched_ml import blas_kernel
from batsched_ml.scheduler import su

SVR_KERNEL = """
import batsched_ml, os, numpy, sklearn.svm, threadpoolctl
kernels = sorted({str(i.get("architecture")) for i in threadpoolctl.threadpool_info()
                  if i.get("internal_api") == "openblas"})
print(os.environ.get("OPENBLAS_CORETYPE"), ",".join(kernels))
"""


def _run(code: str, **env: str) -> list[str]:
    environment = {k: v for k, v in os.environ.items() if k != blas_kernel.VARIABLE} | env
    done = subprocess.run(
        [sys.executable, "-c", code], env=environment, capture_output=True, text=True, check=True
    )
    return done.stdout.split()


def _has_avx2() -> bool:
    machine = platform.machine().lower()
    return machine in ("x86_64", "amd64") and blas_kernel._has_avx2_and_fma()


def test_import_chooses_the_avx2_kernel_that_numpy_and_scikit_learn_then_run() -> None:
    chosen, kernels = _run(SVR_KERNEL)
    if not _has_avx2():
        assert chosen == "None"  # OpenBLAS's own choice
        pytest.skip("not an x86-64 processor with AVX2: OpenBLAS chooses its kernel")
    assert chosen == "Haswell"
    assert kernels == "Haswell"  # numpy's OpenBLAS and scipy's (scikit-learn's SVR)


def test_a_kernel_the_user_chose_is_kept() -> None:
    assert _run(
        "import batsched_ml, os; print(os.environ['OPENBLAS_CORETYPE'])",
        OPENBLAS_CORETYPE="Prescott",
    ) == ["Prescott"]


def test_other_kernels_are_those_of_the_loaded_openblas_libraries() -> None:
    libraries = [
        {"internal_api": "openmp", "architecture": None},
        {"internal_api": "openblas", "architecture": "SkylakeX"},
        {"internal_api": "openblas", "architecture": "Haswell"},
    ]
    assert blas_kernel.other_kernels(libraries, "Haswell") == ["SkylakeX"]
    assert blas_kernel.other_kernels(libraries, "SkylakeX") == ["Haswell"]
    assert blas_kernel.other_kernels(libraries[:1] + libraries[2:], "haswell") == []
    # none asked for (no AVX2 and FMA, or not x86-64): those other than the pages' Haswell
    assert blas_kernel.other_kernels(libraries, None) == ["SkylakeX"]


def test_su_warns_once_when_openblas_runs_another_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    import threadpoolctl

    monkeypatch.setattr(blas_kernel, "CHOSEN", "Haswell")
    monkeypatch.setattr(su, "_KERNEL_CHECKED", [])
    monkeypatch.setattr(
        threadpoolctl,
        "threadpool_info",
        lambda: [{"internal_api": "openblas", "architecture": "SkylakeX"}],
    )
    predictor = su.SUPrediction()
    with pytest.warns(RuntimeWarning, match=r"SkylakeX kernel, not Haswell.*OPENBLAS_CORETYPE"):
        predictor.make_regressor()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        predictor.make_regressor()  # once a process


def test_su_warns_where_no_kernel_could_be_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """An Arm processor, or an x86-64 one without AVX2: OpenBLAS's own kernel runs, and SU
    says its predictions may differ from the pages' (made with Haswell); not with Haswell."""
    import threadpoolctl

    monkeypatch.setattr(blas_kernel, "CHOSEN", None)
    running = [{"internal_api": "openblas", "architecture": "neoversen1"}]
    monkeypatch.setattr(threadpoolctl, "threadpool_info", lambda: running)
    monkeypatch.setattr(su, "_KERNEL_CHECKED", [])
    with pytest.warns(RuntimeWarning, match=r"neoversen1 kernel: this processor is not an x86"):
        su.SUPrediction().make_regressor()
    running[0]["architecture"] = "Haswell"
    monkeypatch.setattr(su, "_KERNEL_CHECKED", [])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        su.SUPrediction().make_regressor()


def test_a_run_s_record_names_the_kernel_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    from batsched_ml.results.runfolder import code_identity

    for kernel in ("Haswell", None):
        monkeypatch.setattr(blas_kernel, "CHOSEN", kernel)
        code_identity.cache_clear()
        try:
            assert code_identity()["blas_kernel"] == kernel
        finally:
            code_identity.cache_clear()
