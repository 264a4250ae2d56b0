"""The dashboard's colours are readable (WCAG AA) on light and dark notebook themes."""

from __future__ import annotations

import pytest

from tinyagents_nb.widgets._style import DARK, LIGHT, STYLESHEET, THEME_BACKGROUNDS, contrast_ratio, status_class

AA = 4.5


def test_contrast_ratio_matches_the_wcag_formula() -> None:
    assert contrast_ratio("#000000", "#ffffff") == pytest.approx(21.0)
    assert contrast_ratio("#777777", "#ffffff") == pytest.approx(4.48, abs=0.01)
    assert contrast_ratio("#1a7f37", "#111111") < AA  # the old status green on the dark theme: what failed


@pytest.mark.parametrize(("theme", "palette"), [("light", LIGHT), ("dark", DARK)])
def test_every_status_colour_passes_aa_on_its_theme(theme: str, palette: dict[str, str]) -> None:
    for tone, colour in palette.items():
        for background in THEME_BACKGROUNDS[theme]:
            ratio = contrast_ratio(colour, background)
            assert ratio >= AA, f"{theme} {tone} {colour} on {background}: {ratio:.2f}"


def test_the_stylesheet_uses_both_palettes_and_scopes_the_dark_one() -> None:
    for colour in (*LIGHT.values(), *DARK.values()):
        assert colour in STYLESHEET
    assert 'body[data-jp-theme-light="false"] .ta-dash' in STYLESHEET
    assert ".jupyter-widgets-disconnected .ta-gone{display:inline" in STYLESHEET
    assert status_class("completed") == "ta-tone-ok"
    assert status_class("something new") == "ta-tone-muted"
