"""OpenBLAS's kernel, chosen before numpy or scipy load it, so that a run's results do not depend
on the processor's generation.

OpenBLAS picks its kernels for the processor when it is loaded. scikit-learn's SVR, the
regressor of the SU predictor (:mod:`batsched_ml.scheduler.su`), computes its kernel's dot
products with it, and the AVX-512 kernels (``SkylakeX``) round those sums otherwise than the
AVX2 ones (``Haswell``): the same replay predicted other runtimes, and so made another
schedule, on a processor with AVX-512 than on one without. On every x86-64 processor with AVX2
and FMA, the AVX2 kernels are chosen here (``OPENBLAS_CORETYPE``), the ones the results pages
were made with, unless the user chose a kernel. The variable is read once, when the library is
loaded: it takes effect only if this runs first, which ``import batsched_ml`` does (and the
command line always). A process that loaded numpy before batsched-ml keeps the kernel OpenBLAS
chose: the SU predictor warns of it (:func:`other_kernel_warning`). Other processors (Arm, or
x86-64 without AVX2) keep OpenBLAS's own choice, and may predict otherwise: the SU predictor
warns of that too, and a run's record (``run.json``) names the kernel asked for.
"""

from __future__ import annotations

import os
from typing import Any

VARIABLE = "OPENBLAS_CORETYPE"
#: The kernel chosen where the processor has it.
REFERENCE = "Haswell"


def _has_avx2_and_fma() -> bool:
    """Whether the processor has AVX2 and FMA (``/proc/cpuinfo``'s flags; ``False`` where it
    cannot be read)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("flags"):
                    return {"avx2", "fma"} <= set(line.split(":", 1)[-1].split())
    except OSError:
        return False
    return False


def choose() -> str | None:
    """Set ``OPENBLAS_CORETYPE`` to :data:`REFERENCE` where the processor has it and the user
    chose no kernel; return the kernel asked for (``None``: OpenBLAS's own choice)."""
    if VARIABLE in os.environ:
        return os.environ[VARIABLE]
    # os.uname, not the platform module, which takes longer to import: this runs at every
    # command's start (no os.uname on Windows, which has no /proc/cpuinfo either)
    uname = getattr(os, "uname", None)
    machine = uname().machine.lower() if uname is not None else ""
    if machine in ("x86_64", "amd64") and _has_avx2_and_fma():
        os.environ[VARIABLE] = REFERENCE
        return REFERENCE
    return None


def other_kernels(libraries: list[dict[str, Any]], wanted: str | None) -> list[str]:
    """The kernels other than ``wanted`` (:data:`REFERENCE` when none was asked for) that the
    loaded OpenBLAS libraries run (``threadpoolctl.threadpool_info()``'s entries)."""
    wanted = wanted or REFERENCE
    found = {
        str(library.get("architecture"))
        for library in libraries
        if library.get("internal_api") == "openblas"
    }
    return sorted(kernel for kernel in found if kernel.lower() != wanted.lower())


def other_kernel_warning(libraries: list[dict[str, Any]]) -> str | None:
    """What to warn of when OpenBLAS runs another kernel than the one chosen here (numpy was
    loaded before batsched-ml) or, where none could be chosen (no AVX2 and FMA, or not x86-64),
    another than :data:`REFERENCE`; ``None`` when it runs the kernel asked for."""
    other = other_kernels(libraries, CHOSEN)
    if not other:
        return None
    kernel = ", ".join(other)
    if CHOSEN is None:
        return (
            f"OpenBLAS runs its {kernel} kernel: this processor is not an x86-64 one with AVX2 "
            f"and FMA, so the {REFERENCE} kernel the results pages were made with cannot be "
            "asked for, and the SU predictor's SVR predictions (so the schedule) may differ "
            "from theirs and from another machine's"
        )
    return (
        f"OpenBLAS runs its {kernel} kernel, not {CHOSEN}: numpy was loaded before "
        "batsched_ml, and the SU predictor's SVR predictions (so the schedule) may differ from "
        f"another machine's; import batsched_ml first, or set {VARIABLE}={CHOSEN}"
    )


CHOSEN = choose()
