"""An overlay that configures a block its bases switch off (``enabled: false``) without switching it on configures
nothing: the block's settings reach no job. config/trec-dl.yaml set Fig. 2's ``attention_scaling`` lengths for the GPU
while config/config.yaml's ``enabled: false`` still held, so the full-scale run had no attention-scaling job at all
(found by the TREC DL rehearsal, docs/studies/trec-dl-rehearsal.md). Every shipped overlay is read over its stated
bases (longrank.config.files)."""

from __future__ import annotations

import pytest
import yaml

from conftest import REPO
from longrank.config.files import merged, overlays

OVERLAYS = overlays()


def switched_off_yet_configured(base: dict, overlay: dict, where: str = "") -> list[str]:
    """Dotted keys of the mappings ``overlay`` sets settings of while ``base`` holds them at ``enabled: false``."""
    found = []
    for key, value in overlay.items():
        if not isinstance(value, dict) or not isinstance(base.get(key), dict):
            continue
        path = f"{where}{key}"
        if base[key].get("enabled") is False and "enabled" not in value and set(value) - {"enabled"}:
            found.append(path)
        found += switched_off_yet_configured(base[key], value, f"{path}.")
    return found


@pytest.mark.parametrize("overlay", OVERLAYS, ids=lambda o: o.path)
def test_no_overlay_configures_a_block_its_bases_switch_off(overlay):
    base = merged(overlay.bases[1:])
    own = yaml.safe_load((REPO / overlay.path).read_text()) or {}
    found = switched_off_yet_configured(base, own)
    assert not found, (
        f"{overlay.path} sets {found} whose bases hold enabled: false: write enabled: true there (or nothing runs)"
    )


def test_the_check_sees_a_switched_off_block():
    base = {"attention_scaling": {"enabled": False}, "models": {"m": {"enabled": False, "type": "x"}}}
    overlay = {"attention_scaling": {"lengths": [500]}, "models": {"m": {"steps": 1}}}
    assert switched_off_yet_configured(base, overlay) == ["attention_scaling", "models.m"]
    assert switched_off_yet_configured(base, {"attention_scaling": {"enabled": True, "lengths": [1]}}) == []
