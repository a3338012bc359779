"""The supplier risk brief: five FunctionAgents over small local data files.

The seed's worked example, runnable without a model: `fetch_filings` and `fetch_news`
read `conf/examples/supplier_risk/*.json` (or `$PHLOEM_SUPPLIER_DATA`), and the
analysis, risk assessment and brief are deterministic functions. `conf/phloem.toml`
wires them as a goal-oriented PlannerAgent (`supplierBrief`, goal `brief`), so
`phloem agent plan supplierBrief --state company=...` shows the four groups and
`phloem agent run supplierBrief --state company=...` prints the brief.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

DATA_ENV = "PHLOEM_SUPPLIER_DATA"
MAX_DATA_BYTES = 1024 * 1024


def data_dir() -> Path:
    env = os.environ.get(DATA_ENV)
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / "conf" / "examples" / "supplier_risk"


def _load(name: str) -> dict[str, Any]:
    path = data_dir() / name
    if path.stat().st_size > MAX_DATA_BYTES:
        raise ValueError(f"{path} is larger than {MAX_DATA_BYTES} bytes")
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def fetch_filings(company: str) -> dict[str, Any]:
    """The latest annual figures of `company` (millions)."""
    filings = _load("filings.json")
    if company not in filings:
        raise LookupError(f"no filings for {company!r}")
    return {"company": company, **filings[company]}


def fetch_news(company: str) -> list[dict[str, Any]]:
    """Recent headlines about `company`, newest first, with a sentiment in [-1, 1]."""
    items: list[dict[str, Any]] = _load("news.json").get(company, [])
    return sorted(items, key=lambda item: item["date"], reverse=True)


def analyze_financials(filings: dict[str, Any]) -> dict[str, Any]:
    """Liquidity, leverage, profitability and growth from the filings."""
    revenue, prior = filings["revenue"], filings["revenue_prior"]
    return {
        "period": filings["period"],
        "current_ratio": round(filings["current_assets"] / filings["current_liabilities"], 2),
        "debt_to_equity": round(filings["total_debt"] / filings["equity"], 2),
        "net_margin": round(filings["net_income"] / revenue, 3),
        "revenue_growth": round((revenue - prior) / prior, 3),
        "going_concern": "going-concern" in filings["auditor_opinion"],
    }


def assess_risk(financials: dict[str, Any], news: list[dict[str, Any]]) -> dict[str, Any]:
    """A 0-100 risk score with its factors; level low / medium / high."""
    factors: list[str] = []
    score = 0
    if financials["current_ratio"] < 1.0:
        score += 25
        factors.append(f"current ratio {financials['current_ratio']} below 1")
    if financials["debt_to_equity"] > 1.5:
        score += 20
        factors.append(f"debt/equity {financials['debt_to_equity']}")
    if financials["net_margin"] < 0:
        score += 15
        factors.append(f"net margin {financials['net_margin']:.1%}")
    if financials["revenue_growth"] < 0:
        score += 10
        factors.append(f"revenue {financials['revenue_growth']:.1%} year on year")
    if financials["going_concern"]:
        score += 20
        factors.append("auditor going-concern emphasis")
    negative = [n for n in news if n["sentiment"] <= -0.5]
    if negative:
        score += min(10 * len(negative), 20)
        factors.extend(f"news: {n['headline']}" for n in negative)
    score = min(score, 100)
    level = "high" if score >= 60 else "medium" if score >= 30 else "low"
    return {"score": score, "level": level, "factors": factors}


def write_brief(company: str, risk: dict[str, Any]) -> str:
    """A one-page supplier risk brief."""
    lines = [
        f"Supplier risk brief: {company}",
        f"Risk level: {risk['level'].upper()} (score {risk['score']}/100)",
        "",
        "Key factors:" if risk["factors"] else "No material risk factors found.",
    ]
    lines += [f"  - {factor}" for factor in risk["factors"]]
    action = {
        "high": "Qualify an alternative supplier now and cap open orders.",
        "medium": "Review at the next quarterly supplier meeting.",
        "low": "No action needed; keep the annual review.",
    }[risk["level"]]
    lines += ["", f"Recommendation: {action}"]
    return "\n".join(lines)


def run_example(client: Any, company: str = "ACME Components") -> str:
    """The `make run` step: run `supplierBrief` through the daemon; the brief text.

    `client` is a `phloem.Client` (or `tree.client()`); raises `PhloemError` with the
    outcome's status as its kind when the run does not end `done`.
    """
    from phloem.protocols.errors import PhloemError

    run = client.run_agent("supplierBrief", state={"company": company})
    if not run.outcome.ok:
        raise PhloemError(run.outcome.status.value, run.outcome.message)
    brief: str = run.state["brief"]
    return brief


def _plan_step(client: Any) -> str:
    groups = client.plan_agent("supplierBrief", {"company": "ACME Components"})
    return "\n".join(f"{i}. {', '.join(group)}" for i, group in enumerate(groups, 1))


def steps() -> list[Any]:
    """The `make run` steps (`phloem.examples.run_all.EXAMPLE_MODULES`)."""
    from phloem.examples.run_all import Step

    return [
        Step("agents: supplierBrief plan (GOAP groups)", _plan_step),
        Step("agents: supplier risk brief, run through the daemon", run_example),
    ]
