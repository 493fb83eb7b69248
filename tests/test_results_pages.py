"""The results pages against today's code: each page's settings, replayed on the probe workload
(:mod:`batsched_ml.experiments.probe`), must give what they gave the code that made the page's runs.
A failure names the page and the setting: the page is then made again by its campaign."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from batsched_ml.experiments import probe
from batsched_ml.runs.replaying import ReplayConfig, config_of_record

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def results_pages() -> list[str]:
    """The Results section's pages that show runs, as the site's hook reads them."""
    return probe.results_pages(yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"])


def _recorded(page: str) -> dict[str, Any]:
    return json.loads(probe.probes_path(DOCS / page).read_text())


def _entries() -> list[tuple[str, int]]:
    out = []
    for page in results_pages():
        path = probe.probes_path(DOCS / page)
        if path.is_file():
            out += [(page, i) for i in range(len(json.loads(path.read_text())["probes"]))]
    return out


def test_the_results_section_is_read() -> None:
    assert "results.md" in results_pages()
    assert "related-work-notes.md" not in results_pages()


#: Results pages whose runs are not tied to today's code yet: the site shows them under a
#: warning. A page leaves this set when its campaign is run again and its probes written.
UNCHECKED: set[str] = set()


@pytest.mark.parametrize("page", results_pages())
def test_every_results_page_has_the_probes_of_its_runs_or_a_warning(page: str) -> None:
    before, after = probe.provenance(DOCS / page)
    if page in UNCHECKED:
        assert not probe.probes_path(DOCS / page).is_file(), f"{page} has probes: not UNCHECKED"
        assert "Not checked against the current code" in before and not after
        return
    assert probe.probes_path(DOCS / page).is_file(), (
        f"{page} has no probes: make its runs, then python -m batsched_ml.experiments.probe write "
        f"docs/{page} --campaign ... --runs ..."
    )
    assert not before and "made by batsched-ml" in after


@pytest.mark.parametrize(("page", "index"), _entries())
def test_todays_code_gives_the_page_s_results_on_its_probe(page: str, index: int) -> None:
    recorded = _recorded(page)
    assert recorded["probe_jobs"] == probe.PROBE_JOBS
    entry = recorded["probes"][index]
    config = config_of_record(entry["config"])
    assert config.as_dict() == entry["config"]
    assert entry["jobs"] == probe.jobs_for(config)
    assert probe.probe(config) == entry["digest"], (
        f"docs/{page} was made by code whose results differ from today's for "
        f"{config.title()}: make its runs again ({recorded['settings_from']})"
    )


@pytest.mark.parametrize("page", results_pages())
def test_todays_code_shakes_the_page_s_copies_as_its_runs_were(page: str) -> None:
    path = probe.probes_path(DOCS / page)
    if not path.is_file():
        pytest.skip("an unchecked page: no probes")
    shake = json.loads(path.read_text())["shake"]
    assert shake is None or shake == probe.shake_probe()


@pytest.mark.scheduler_source
def test_a_changed_easy_rule_is_caught_by_the_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tripwire trips: an EASY pass that never backfills gives another digest, and the
    page check names the setting."""
    from batsched_ml.scheduler import dispatchers

    config = ReplayConfig()
    recorded = {
        "probe_jobs": probe.PROBE_JOBS,
        "shake": None,
        "probes": [{"config": config.as_dict(), "jobs": probe.PROBE_JOBS}],
    }
    recorded["probes"][0]["digest"] = probe.probe(config)
    assert probe.differences(recorded) == []
    original = dispatchers.easy_pass
    monkeypatch.setattr(
        dispatchers,
        "easy_pass",
        lambda *args, **kwargs: original(*args, **{**kwargs, "backfilling": False}),
    )
    assert probe.differences(recorded) == [config.title()]


def test_the_probe_workload_is_the_head_of_the_shipped_trace() -> None:
    workload = probe.probe_workload()
    assert len(workload["jobs"]) == probe.PROBE_JOBS
    assert workload["jobs"][0]["id"] == 15
    assert set(workload["profiles"]) == {job["profile"] for job in workload["jobs"]}
    assert len(probe.probe_workload(300)["jobs"]) == 300
    assert probe.jobs_for(ReplayConfig(dispatcher="cph")) == 300


def test_a_page_of_several_campaigns_has_the_settings_of_them_all(tmp_path: Path) -> None:
    """``probe write --campaign A --campaign B``: each setting once, shaken when one has copies."""
    head = "[campaign]\ntraces=['A']\npolicies=['fcfs', 'spf']\n"
    first = tmp_path / "first.toml"
    first.write_text(head + "variants=['base', 'class-clairvoyant']\ncopies=3\n")
    second = tmp_path / "second.toml"
    second.write_text(head + "variants=['base']\npredictors=['requested', 'easy++']\n")
    configs, shaken = probe.settings_of_campaigns([first, second])
    titles = [config.title() for config in configs]
    assert len(titles) == len(set(titles)) == 6  # 2 policies x (base, ceiling, base + easy++)
    assert shaken
    assert probe.settings_of_campaigns([second]) == (probe.settings_of_campaign(second)[0], False)
