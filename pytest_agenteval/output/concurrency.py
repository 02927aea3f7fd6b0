"""`--concurrency auto` in the summary and the terminal: each process reports, per
endpoint, its starting, final and highest allowed limit and every change (when, from,
to, why); the run's summary adds the processes up per endpoint (under xdist each worker
adapts its own share, so an endpoint's limit is the sum of its workers'), keeps each
worker's own figures and the whole history, in time order. The terminal shows each
worker's limit where there are several: their sum is a limit no process ever had."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_agenteval.models.http.aimd import ADDITIVE, SLOW_START


def concurrency_summary(reports: Sequence[Mapping[str, Any]], started: float) -> dict[str, Any] | None:
    """The summary's `concurrency`: None with a fixed --concurrency (no process adapted);
    else `endpoints` (url -> start, final, peak, max, doublings (slow start), increases
    (+1 after it), cuts by cause, workers, per_worker: worker -> start, final, peak) and
    `history` (at_s: seconds since the run started; endpoint, worker, old, new, why:
    "slow_start", "successes" or the overload's cause). `reports`: the processes'
    (`worker` "" for the controller's own)."""
    if not reports:
        return None
    endpoints: dict[str, dict[str, Any]] = {}
    history: list[dict[str, Any]] = []
    for report in reports:
        url = report["endpoint"]
        entry = endpoints.setdefault(
            url,
            {
                "start": 0,
                "final": 0,
                "peak": 0,
                "max": 0,
                "doublings": 0,
                "increases": 0,
                "cuts": {},
                "workers": 0,
                "per_worker": {},
            },
        )
        changes = report["changes"]
        peak = max([report["start"], *(new for _, _, new, _ in changes)])
        entry["start"] += report["start"]
        entry["final"] += report["final"]
        entry["peak"] += peak
        entry["per_worker"][report.get("worker", "")] = {
            "start": report["start"],
            "final": report["final"],
            "peak": peak,
        }
        entry["max"] += report["max"]
        entry["workers"] += 1
        for at, old, new, why in changes:
            if why == SLOW_START:
                entry["doublings"] += 1
            elif why == ADDITIVE:
                entry["increases"] += 1
            else:
                entry["cuts"][why] = entry["cuts"].get(why, 0) + 1
            history.append(
                {
                    "at_s": round(at - started, 3),
                    "endpoint": url,
                    "worker": report.get("worker", ""),
                    "old": old,
                    "new": new,
                    "why": why,
                }
            )
    history.sort(key=lambda change: change["at_s"])
    return {"endpoints": endpoints, "history": history}


def concurrency_lines(summary: Mapping[str, Any] | None) -> list[str]:
    """One terminal line per endpoint:
    `concurrency auto  http://h:8000/v1: 4 -> 12 (found), 3 cuts on 429`, under xdist
    `...: 2 workers, limits 2 -> 3 and 2 -> 3 (found), 53 cuts on 429`."""
    if not summary:
        return []
    return [_line(url, entry) for url, entry in summary["endpoints"].items()]


def _line(url: str, entry: Mapping[str, Any]) -> str:
    cuts: Mapping[str, int] = entry["cuts"]
    if cuts:
        state = "found"
    elif entry["final"] >= entry["max"]:
        state = "at --concurrency-max"
    else:
        state = "no overload seen"
    causes = sorted(cuts.items(), key=lambda item: (-item[1], item[0]))
    if causes:
        (cause, count), *others = causes
        said = [f"{count} cut{'s' if count != 1 else ''} on {cause}"]
        said += [f"{n} on {why}" for why, n in others]
    else:
        said = ["no cuts"]
    workers = entry.get("per_worker") or {}
    if len(workers) > 1:
        each = [f"{w['start']} -> {w['final']}" for _, w in sorted(workers.items())]
        limits = f"{len(workers)} workers, limits {', '.join(each[:-1])} and {each[-1]}"
    else:
        limits = f"{entry['start']} -> {entry['final']}"
    return f"concurrency auto  {url}: {limits} ({state}), {', '.join(said)}"
