"""Thin clients for the providers' Batch APIs: OpenAI Batch and Anthropic Message Batches.

Both do the same four things, so the executor sees one shape (``BatchAPI``): submit many requests
as one job, poll it, read its results (one ``BatchResult`` per request), cancel it.

- **OpenAI** (and compatible hosts): upload the requests as a JSONL file (``POST /files``,
  ``purpose=batch``), create the job (``POST /batches`` with the file id, the endpoint and a
  ``24h`` window), poll ``GET /batches/{id}`` through ``validating``/``in_progress``/``finalizing``
  to ``completed`` (or ``failed``/``expired``/``cancelled``), then download the output file and
  the error file (``GET /files/{id}/content``): one JSON line per request, keyed by ``custom_id``.
- **Anthropic**: ``POST /messages/batches`` with the requests inline, poll
  ``GET /messages/batches/{id}`` until ``processing_status`` is ``ended``, then read the JSONL at
  ``results_url``; each line's ``result.type`` is ``succeeded``, ``errored``, ``canceled`` or ``expired``.

Credentials are the row model's own headers, used in memory only; nothing here stores them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from .._errors import ProviderError
from ..providers.wire import scrub

__all__ = ["AnthropicBatchAPI", "BatchAPI", "BatchResult", "JobStatus", "OpenAIBatchAPI"]

JobState = Literal["running", "ended", "cancelling"]


@dataclass(frozen=True, kw_only=True, slots=True)
class JobStatus:
    """Where a job is: ``running``, ``cancelling`` or ``ended`` (``detail`` is the provider's own word)."""

    state: JobState
    detail: str
    done: int
    failed: int
    total: int


@dataclass(frozen=True, kw_only=True, slots=True)
class BatchResult:
    """One request's outcome: the response body on success, else a short error.

    ``unsent``: the provider never ran it (its job was cancelled or expired first), so the row is
    sent again rather than failed.
    """

    custom_id: str
    body: Mapping[str, Any] | None
    error: str | None
    unsent: bool = False


class BatchAPI(Protocol):
    provider: str

    async def submit(
        self, requests: Sequence[tuple[str, Mapping[str, Any]]], *, metadata: Mapping[str, str]
    ) -> str: ...
    async def status(self, job_id: str) -> JobStatus: ...
    async def results(self, job_id: str) -> list[BatchResult]: ...
    async def cancel(self, job_id: str) -> JobStatus: ...
    async def aclose(self) -> None: ...


class _Client:
    def __init__(self, base_url: str, headers: Mapping[str, str], *, provider: str) -> None:
        import httpx  # lazy, like every HTTP client of the harness

        self.provider = provider
        self._base = base_url.rstrip("/")
        self._headers = dict(headers)
        self._secrets = tuple(v for k, v in headers.items() if k.lower() in ("authorization", "x-api-key", "api-key"))
        self._http = httpx.AsyncClient(timeout=60.0)

    async def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        url = path if path.startswith("http") else self._base + path
        headers = {**self._headers, **kwargs.pop("headers", {})}
        response = await self._http.request(method, url, headers=headers, **kwargs)
        if response.status_code >= 300:
            text = scrub(response.text[:500], self._secrets)
            raise ProviderError(
                f"{self.provider} batch API: {method} {path} answered {response.status_code}: {text}",
                provider=self.provider,
                status=response.status_code,
                retryable=response.status_code in (408, 409, 429) or response.status_code >= 500,
            )
        return response

    async def aclose(self) -> None:
        await self._http.aclose()


def _jsonl(text: str) -> list[Any]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


class OpenAIBatchAPI(_Client):
    """OpenAI's Batch API on ``base_url`` (``.../v1``) for ``/v1/chat/completions`` requests."""

    def __init__(self, base_url: str, headers: Mapping[str, str], *, provider: str = "openai") -> None:
        super().__init__(base_url, {k: v for k, v in headers.items() if k.lower() != "content-type"}, provider=provider)

    async def submit(self, requests: Sequence[tuple[str, Mapping[str, Any]]], *, metadata: Mapping[str, str]) -> str:
        lines = "".join(
            json.dumps({"custom_id": cid, "method": "POST", "url": "/v1/chat/completions", "body": body}) + "\n"
            for cid, body in requests
        )
        files = {"file": ("tinyagents-batch.jsonl", lines.encode(), "application/jsonl")}
        uploaded = (await self._request("POST", "/files", data={"purpose": "batch"}, files=files)).json()
        created = await self._request(
            "POST",
            "/batches",
            json={
                "input_file_id": uploaded["id"],
                "endpoint": "/v1/chat/completions",
                "completion_window": "24h",
                "metadata": dict(metadata),
            },
        )
        return str(created.json()["id"])

    @staticmethod
    def _status(data: Mapping[str, Any]) -> JobStatus:
        detail = str(data.get("status"))
        state: JobState = (
            "ended"
            if detail in ("completed", "failed", "expired", "cancelled")
            else "cancelling"
            if detail == "cancelling"
            else "running"
        )
        counts = data.get("request_counts") or {}
        return JobStatus(
            state=state,
            detail=detail,
            done=int(counts.get("completed") or 0),
            failed=int(counts.get("failed") or 0),
            total=int(counts.get("total") or 0),
        )

    async def status(self, job_id: str) -> JobStatus:
        return self._status((await self._request("GET", f"/batches/{job_id}")).json())

    async def results(self, job_id: str) -> list[BatchResult]:
        data = (await self._request("GET", f"/batches/{job_id}")).json()
        out: list[BatchResult] = []
        for key in ("output_file_id", "error_file_id"):
            file_id = data.get(key)
            if not file_id:
                continue
            text = (await self._request("GET", f"/files/{file_id}/content")).text
            for line in _jsonl(text):
                out.append(self._result(line))
        return out

    def _result(self, line: Mapping[str, Any]) -> BatchResult:
        cid = str(line.get("custom_id"))
        response = line.get("response") or {}
        error = line.get("error")
        body = response.get("body") if isinstance(response, Mapping) else None
        status = response.get("status_code") if isinstance(response, Mapping) else None
        if error is None and status == 200 and isinstance(body, Mapping):
            return BatchResult(custom_id=cid, body=body, error=None)
        if error is None and isinstance(body, Mapping) and isinstance(body.get("error"), Mapping):
            error = body["error"]
        message = error.get("message") if isinstance(error, Mapping) else error
        code = error.get("code") if isinstance(error, Mapping) else None
        text = f"{code}: {message}" if code else str(message or f"status {status}")
        unsent = code in ("batch_cancelled", "batch_expired")
        return BatchResult(custom_id=cid, body=None, error=scrub(text, self._secrets), unsent=unsent)

    async def cancel(self, job_id: str) -> JobStatus:
        return self._status((await self._request("POST", f"/batches/{job_id}/cancel")).json())


class AnthropicBatchAPI(_Client):
    """Anthropic's Message Batches API on ``base_url`` (``.../v1``)."""

    def __init__(self, base_url: str, headers: Mapping[str, str]) -> None:
        super().__init__(base_url, headers, provider="anthropic")

    async def submit(self, requests: Sequence[tuple[str, Mapping[str, Any]]], *, metadata: Mapping[str, str]) -> str:
        del metadata  # Message Batches take no metadata
        payload = {"requests": [{"custom_id": cid, "params": dict(body)} for cid, body in requests]}
        created = await self._request("POST", "/messages/batches", json=payload)
        return str(created.json()["id"])

    @staticmethod
    def _status(data: Mapping[str, Any]) -> JobStatus:
        detail = str(data.get("processing_status"))
        state: JobState = "ended" if detail == "ended" else "cancelling" if detail == "canceling" else "running"
        counts = data.get("request_counts") or {}
        failed = sum(int(counts.get(k) or 0) for k in ("errored", "canceled", "expired"))
        done = int(counts.get("succeeded") or 0)
        return JobStatus(
            state=state,
            detail=detail,
            done=done,
            failed=failed,
            total=done + failed + int(counts.get("processing") or 0),
        )

    async def status(self, job_id: str) -> JobStatus:
        return self._status((await self._request("GET", f"/messages/batches/{job_id}")).json())

    async def results(self, job_id: str) -> list[BatchResult]:
        data = (await self._request("GET", f"/messages/batches/{job_id}")).json()
        url = data.get("results_url") or f"/messages/batches/{job_id}/results"
        text = (await self._request("GET", url)).text
        out: list[BatchResult] = []
        for line in _jsonl(text):
            cid = str(line.get("custom_id"))
            result = line.get("result") or {}
            kind = result.get("type")
            if kind == "succeeded" and isinstance(result.get("message"), Mapping):
                out.append(BatchResult(custom_id=cid, body=result["message"], error=None))
                continue
            error = result.get("error") or {}
            nested = error.get("error") if isinstance(error, Mapping) else None
            inner: Mapping[str, Any] = (
                nested if isinstance(nested, Mapping) else error if isinstance(error, Mapping) else {}
            )
            message = inner.get("message")
            text_ = f"{inner.get('type')}: {message}" if message else f"request {kind}"
            unsent = kind in ("canceled", "expired")
            out.append(BatchResult(custom_id=cid, body=None, error=scrub(text_, self._secrets), unsent=unsent))
        return out

    async def cancel(self, job_id: str) -> JobStatus:
        return self._status((await self._request("POST", f"/messages/batches/{job_id}/cancel")).json())
