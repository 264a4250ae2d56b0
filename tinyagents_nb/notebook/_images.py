"""``NotebookImage``: a PNG or JPEG a cell displayed, kept so a model with vision can see it.

Display outputs carry images as base64 text (``image/png``, ``image/jpeg``). The notebook tools hand
them to the model as ``ImageRef`` parts of their result, and the harness leaves them out for a model
whose profile lacks vision (that model reads the text description each output also leaves). Every
image is bounded: one larger than ``MAX_IMAGE_CHARS`` of base64 is described, not kept, and a tool
result carries at most ``MAX_IMAGES``. An image is checked to be what its type says (the first bytes
of a PNG or a JPEG), so a malformed output never makes a provider reject the whole request.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from tinyagents_nb.harness import ImageRef

__all__ = ["MAX_IMAGES", "MAX_IMAGE_CHARS", "NotebookImage", "image_blocks", "image_of"]

MAX_IMAGE_CHARS: Final = 1_000_000
"""The largest image kept, in base64 characters (about 730 KB of PNG)."""
MAX_IMAGES: Final = 3
"""The most images one tool result carries (the newest first)."""
_KINDS: Final = {"image/png": b"\x89PNG\r\n\x1a\n", "image/jpeg": b"\xff\xd8\xff"}
_BASE64: Final = re.compile(r"[A-Za-z0-9+/]*={0,2}")


@dataclass(frozen=True, slots=True)
class NotebookImage:
    """One displayed image: its media type and its base64 data."""

    mime: str
    data: str

    def ref(self) -> ImageRef:
        return ImageRef(url=f"data:{self.mime};base64,{self.data}", media_type=self.mime)


def _size(chars: int) -> str:
    size = chars * 3 // 4
    return f"{size / 1_000_000:.1f} MB" if size >= 1_000_000 else f"{max(1, size // 1_000)} KB"


def image_of(data: Mapping[str, Any], *, max_chars: int = MAX_IMAGE_CHARS) -> tuple[NotebookImage | None, str]:
    """The PNG or JPEG of a display output's ``data`` (if one fits) and the words that describe it.

    Returns ``(None, "")`` for an output without an image; ``(None, description)`` for an image that
    is too large, of another type or not what its type says.
    """
    kinds = [kind for kind in data if str(kind).startswith("image/")]
    if not kinds:
        return None, ""
    kind = next((k for k in _KINDS if k in data), kinds[0])
    raw = data[kind]
    text = raw.decode("ascii", "replace") if isinstance(raw, bytes) else str(raw)
    text = "".join(text.split())
    if kind not in _KINDS:
        return None, f"{kind} image (not sent: only PNG and JPEG are)"
    if len(text) > max_chars:
        return None, f"{kind} image, {_size(len(text))} (too large to send)"
    if not _BASE64.fullmatch(text):
        return None, f"{kind} image (not valid base64)"
    try:
        head = base64.b64decode(text[:16] + "=" * (-len(text[:16]) % 4))
    except (binascii.Error, ValueError):
        head = b""
    if not head.startswith(_KINDS[kind]):
        return None, f"{kind} image (its data is not a {kind.split('/')[1].upper()})"
    return NotebookImage(kind, text), f"{kind} image, {_size(len(text))}"


def image_blocks(images: Sequence[NotebookImage], *, limit: int = MAX_IMAGES) -> list[ImageRef]:
    """At most ``limit`` of ``images`` as ``ImageRef`` parts of a tool result (the last ones: the newest)."""
    return [image.ref() for image in list(images)[-limit:]] if limit > 0 else []
