"""Blocking runs: ``run_sync`` inside or outside a running event loop (Jupyter has one)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import anyio

from ._context import RunContext

__all__ = ["run_blocking"]

T = TypeVar("T")


def run_blocking(fn: Callable[[], Awaitable[T]], ctx: RunContext[Any]) -> T:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        in_loop = False
    else:
        in_loop = True

    def target() -> T:
        return anyio.run(fn)

    if not in_loop:
        try:
            return target()
        except KeyboardInterrupt:
            ctx.cancellation.cancel("KeyboardInterrupt")
            raise
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="tinyagents-run-sync") as pool:
        future = pool.submit(target)
        while True:
            try:
                return future.result()
            except KeyboardInterrupt:
                ctx.cancellation.cancel("KeyboardInterrupt")
