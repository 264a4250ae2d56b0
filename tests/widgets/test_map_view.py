"""``MapView``: counters, escaping of row text, Stop, and the static record."""

from __future__ import annotations

import threading

from tinyagents_nb.harness.batch import MapProgress
from tinyagents_nb.widgets import MapView, map_record


def _progress() -> MapProgress:
    progress = MapProgress("reviews")
    progress.max_cost_usd = 1.0
    progress.start(total=10, skipped=2)
    progress.restored(ok=True)
    progress.restored(ok=True)
    progress.row_ended("r3", ok=True, text="<img src=x onerror=alert(1)>", tokens=100, cost=0.01)
    progress.row_ended("r4", ok=False, text="ProviderError: <b>bad</b>", tokens=10, cost=0.001)
    return progress


def test_the_view_shows_counts_spend_and_escapes_row_text() -> None:
    view = MapView(_progress(), on_stop=lambda: None)
    assert view.bar.max == 10
    assert view.bar.value == 4
    stats = view.stats.value
    assert "3 done · 1 failed · 6 pending (2 from the checkpoint)" in stats
    assert "110 tokens" in stats
    assert "budget" in stats
    assert "<img" not in view.outputs.value
    assert "&lt;img src=x" in view.outputs.value
    assert "<b>bad</b>" not in view.errors.value
    assert "&lt;b&gt;bad" in view.errors.value


def test_stop_signals_once_and_greys_out_when_the_map_ends() -> None:
    progress = _progress()
    calls: list[str] = []
    view = MapView(progress, on_stop=lambda: calls.append(threading.current_thread().name), refresh_hz=50)
    view.start()
    view.stop.click()
    view.stop.click()
    assert len(calls) == 1
    progress.finish("stopped", "Stop")
    view.finish()
    assert view.stop.disabled
    assert "stopped" in view.stats.value


def test_the_record_is_plain_text_and_escaped_html() -> None:
    progress = _progress()
    progress.finish("completed")
    record = map_record(progress.snapshot(), into="reviews_result")
    assert "reviews: completed · 3 done · 1 failed · 6 pending" in record["text/plain"]
    assert "result: reviews_result" in record["text/plain"]
    assert "r4: ProviderError: <b>bad</b>" in record["text/plain"]
    assert "<b>bad</b>" not in record["text/html"]
