"""Build the resolver's Grafana dashboard with grafana-foundation-sdk (Grafana's own builders).

Every panel reads the resolver's real metric names (resolver/telemetry/metrics.py,
api_metrics.py) per installation: the `namespace` and `release` template variables select
one or more installations, and every query keeps those labels so several releases side by
side stay apart. The JSON is written twice, for Grafana's import and for the chart's
ConfigMap (dashboard.enabled); tests/deploy/test_dashboard.py checks both are this build and
runs every query against a real Prometheus.

    python deploy/grafana/build_dashboard.py            # rewrite both JSON files
    python deploy/grafana/build_dashboard.py --check    # exit 1 when either is stale
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from grafana_foundation_sdk.builders import dashboard, prometheus, stat, timeseries
from grafana_foundation_sdk.cog import builder as cogbuilder
from grafana_foundation_sdk.cog import variants as cogvariants
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.dashboard import (
    DashboardCursorSync,
    DataSourceRef,
    VariableRefresh,
    VariableSort,
)

ROOT = Path(__file__).resolve().parents[2]
OUTPUTS = (
    ROOT / "deploy" / "grafana" / "approved-action-resolver.json",
    ROOT / "helm" / "approved-action-resolver" / "files" / "grafana-dashboard.json",
)
UID = "approved-action-resolver"
DATASOURCE = DataSourceRef(type_val="prometheus", uid="${datasource}")
# Every query selects the chosen installations; `by` keeps them apart.
SEL = 'namespace=~"$namespace", release=~"$release"'
BY = "namespace, release"
RATE = "$__rate_interval"


@dataclass(frozen=True)
class Query:
    expr: str
    legend: str


def q(expr: str, legend: str) -> Query:
    return Query(expr, legend)


def rates(metric: str, labels: str) -> str:
    """Per-second rate of a counter per installation and `labels`."""
    return f"sum by ({BY}, {labels}) (rate({metric}{{{SEL}}}[{RATE}]))"


def quantiles(metric: str, extra_by: str = "") -> list[Query]:
    """p50 and p99 of a histogram per installation (and `extra_by`)."""
    by = f"{BY}, {extra_by}" if extra_by else BY
    suffix = f" {{{{{extra_by}}}}}" if extra_by else ""
    return [
        q(
            f"histogram_quantile({p}, sum by ({by}, le) (rate({metric}_bucket{{{SEL}}}[{RATE}])))",
            f"{{{{release}}}}{suffix} p{int(p * 100)}",
        )
        for p in (0.5, 0.99)
    ]


def targets(queries: Sequence[Query]) -> list[cogbuilder.Builder[cogvariants.Dataquery]]:
    return [
        prometheus.Dataquery().expr(query.expr).legend_format(query.legend).ref_id(chr(65 + i))
        for i, query in enumerate(queries)
    ]


def series(title: str, description: str, unit: str, *queries: Query) -> timeseries.Panel:
    return (
        timeseries.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .unit(unit)
        .min(0)
        .span(12)
        .height(8)
        .targets(targets(queries))
    )


def single(title: str, description: str, unit: str, query: Query) -> stat.Panel:
    return (
        stat.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .unit(unit)
        .span(6)
        .height(5)
        .targets(targets([query]))
    )


def variable(name: str, query: str) -> dashboard.QueryVariable:
    return (
        dashboard.QueryVariable(name)
        .label(name)
        .datasource(DATASOURCE)
        .query({"query": query, "refId": f"{name}-values"})
        .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(VariableSort.ALPHABETICAL_ASC)
        .multi(True)
        .include_all(True)
        .all_value(".*")
    )


def build() -> dashboard.Dashboard:
    worker_info = "resolver_build_info"
    return (
        dashboard.Dashboard("Approved-action recovery resolver")
        .uid(UID)
        .description("Recovery backlog, outcomes, providers, database latency and the API.")
        .tags(["approved-action-resolver"])
        .time("now-6h", "now")
        .refresh("30s")
        .tooltip(DashboardCursorSync.CROSSHAIR)
        .with_variable(
            dashboard.DatasourceVariable("datasource").label("Data source").type("prometheus")
        )
        .with_variable(variable("namespace", f"label_values({worker_info}, namespace)"))
        .with_variable(
            variable("release", f'label_values({worker_info}{{namespace=~"$namespace"}}, release)')
        )
        # -- at a glance ----------------------------------------------------------------
        .with_row(dashboard.Row("Overview"))
        .with_panel(
            single(
                "Oldest claimable",
                "How long the oldest due, unleased control has waited (pages above 5 min).",
                "s",
                q(f"max by ({BY}) (resolver_oldest_claimable_age_seconds{{{SEL}}})", "{{release}}"),
            )
        )
        .with_panel(
            single(
                "Oldest manual",
                "How long the oldest manual-queue item has waited for an operator.",
                "s",
                q(f"max by ({BY}) (resolver_oldest_manual_age_seconds{{{SEL}}})", "{{release}}"),
            )
        )
        .with_panel(
            single(
                "Worker replicas up",
                "Worker replicas answering scrapes (resolver_build_info).",
                "short",
                q(f"count by ({BY}) (resolver_build_info{{{SEL}}})", "{{release}}"),
            )
        )
        .with_panel(
            single(
                "API replicas up",
                "Manual-resolution API replicas answering scrapes (resolver_api_build_info).",
                "short",
                q(f"count by ({BY}) (resolver_api_build_info{{{SEL}}})", "{{release}}"),
            )
        )
        # -- backlog ------------------------------------------------------------------------
        .with_row(dashboard.Row("Backlog"))
        .with_panel(
            series(
                "Backlog by queue",
                "Open recovery controls: due (claimable now), waiting (backing off), manual.",
                "short",
                q(
                    f"max by ({BY}, queue) (resolver_backlog_dispatches{{{SEL}}})",
                    "{{release}} {{queue}}",
                ),
            )
        )
        .with_panel(
            series(
                "Backlog by action type",
                "Open recovery controls by queue and action type.",
                "short",
                q(
                    f"max by ({BY}, queue, action_type) "
                    f"(resolver_backlog_action_type_dispatches{{{SEL}}})",
                    "{{release}} {{queue}} {{action_type}}",
                ),
            )
        )
        .with_panel(
            series(
                "Oldest claimable and oldest manual age",
                "Database-wide ages; every replica exports the same figure (max, not sum).",
                "s",
                q(
                    f"max by ({BY}) (resolver_oldest_claimable_age_seconds{{{SEL}}})",
                    "{{release}} claimable",
                ),
                q(
                    f"max by ({BY}) (resolver_oldest_manual_age_seconds{{{SEL}}})",
                    "{{release}} manual",
                ),
            )
        )
        # -- outcomes -------------------------------------------------------------------
        .with_row(dashboard.Row("Recovery"))
        .with_panel(
            series(
                "Resolutions by outcome and source",
                "Committed resolutions per second: automatic (workers) and manual (API).",
                "ops",
                q(
                    rates("resolver_resolutions_total", "source, outcome"),
                    "{{release}} {{source}} {{outcome}}",
                ),
            )
        )
        .with_panel(
            series(
                "Findings by provider",
                "Findings of inspected dispatches per second, by provider and finding.",
                "ops",
                q(
                    rates("resolver_findings_total", "provider, finding"),
                    "{{release}} {{provider}} {{finding}}",
                ),
            )
        )
        .with_panel(
            series(
                "Fence rejections",
                "Fenced writes refused because the claim went stale, by stage.",
                "ops",
                q(
                    rates("resolver_fence_rejections_total", "stage"),
                    "{{release}} {{stage}}",
                ),
            )
        )
        .with_panel(
            series(
                "Cycles by result",
                "Reconciler cycles per second: completed, storage_unavailable, error.",
                "ops",
                q(
                    f"sum by ({BY}, result) (rate(resolver_cycles_total{{{SEL}}}[{RATE}]))",
                    "{{release}} {{result}}",
                ),
            )
        )
        # -- providers and database -------------------------------------------------------
        .with_row(dashboard.Row("Providers and database"))
        .with_panel(
            series(
                "Provider errors",
                "Provider calls that could not answer, by provider and kind: outage and timeout "
                "heal by themselves, configuration and error need a human.",
                "ops",
                q(
                    f"sum by ({BY}, provider, kind) "
                    f"(rate(resolver_provider_errors_total{{{SEL}}}[{RATE}]))",
                    "{{release}} {{provider}} {{kind}}",
                ),
            )
        )
        .with_panel(
            series(
                "Provider latency",
                "Time of one provider call, p50 and p99 by provider.",
                "s",
                *quantiles("resolver_inspect_duration_seconds", "provider"),
            )
        )
        .with_panel(
            series(
                "Claim latency",
                "Time to claim one page, p50 and p99.",
                "s",
                *quantiles("resolver_claim_duration_seconds"),
            )
        )
        .with_panel(
            series(
                "Commit latency",
                "Time to commit one page of outcomes, p50 and p99.",
                "s",
                *quantiles("resolver_commit_duration_seconds"),
            )
        )
        # -- replicas ---------------------------------------------------------------------
        .with_row(dashboard.Row("Replicas"))
        .with_panel(
            series(
                "Replicas up",
                "Worker and API replicas answering scrapes.",
                "short",
                q(f"count by ({BY}) (resolver_build_info{{{SEL}}})", "{{release}} workers"),
                q(f"count by ({BY}) (resolver_api_build_info{{{SEL}}})", "{{release}} API"),
            )
        )
        .with_panel(
            series(
                "Time since the last completed cycle",
                "Per replica, against half its liveness bound (ResolverLoopStalled fires above).",
                "s",
                q(
                    f"time() - resolver_last_cycle_timestamp_seconds{{{SEL}}}",
                    "{{release}} {{instance}}",
                ),
                q(
                    f"max by ({BY}) (resolver_liveness_bound_seconds{{{SEL}}}) / 2",
                    "{{release}} stall threshold",
                ),
            )
        )
        # -- API ------------------------------------------------------------------------------
        .with_row(dashboard.Row("Manual-resolution API"))
        .with_panel(
            series(
                "API requests by status class",
                "Requests per second by status class (5xx: ResolverApiErrors).",
                "reqps",
                q(
                    f"sum by ({BY}, status_class) "
                    f"(rate(resolver_api_requests_total{{{SEL}}}[{RATE}]))",
                    "{{release}} {{status_class}}",
                ),
            )
        )
        .with_panel(
            series(
                "API latency",
                "Request time p50 and p99 by route.",
                "s",
                *quantiles("resolver_api_request_duration_seconds", "route"),
            )
        )
        .with_panel(
            series(
                "Manual decisions",
                "Committed manual decisions and idempotent replays per second, by outcome.",
                "ops",
                q(
                    f'sum by ({BY}, outcome) (rate(resolver_resolutions_total{{source="manual", '
                    f"{SEL}}}[{RATE}]))",
                    "{{release}} committed {{outcome}}",
                ),
                q(
                    f"sum by ({BY}, outcome) "
                    f"(rate(resolver_manual_decision_replays_total{{{SEL}}}[{RATE}]))",
                    "{{release}} replayed {{outcome}}",
                ),
            )
        )
        .with_panel(
            series(
                "API rejections",
                "Bearer tokens refused by reason (unknown_key after a key rotation: "
                "ResolverApiTokensRejected) and decisions needing step-up authentication.",
                "ops",
                q(
                    f"sum by ({BY}, reason) "
                    f"(rate(resolver_api_token_rejections_total{{{SEL}}}[{RATE}]))",
                    "{{release}} token {{reason}}",
                ),
                q(
                    f"sum by ({BY}) (rate(resolver_api_step_up_required_total{{{SEL}}}[{RATE}]))",
                    "{{release}} step-up required",
                ),
            )
        )
    )


def render() -> str:
    model = build().build()
    for number, panel in enumerate(model.panels or [], start=1):
        panel.id_val = number  # stable ids: Grafana links and alerts refer to panels by id
    return json.dumps(model, cls=JSONEncoder, indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="fail when a JSON file is stale")
    args = parser.parse_args(argv)
    text = render()
    stale = [path for path in OUTPUTS if not path.exists() or path.read_text() != text]
    if args.check:
        for path in stale:
            print(f"{path.relative_to(ROOT)} is stale: run {Path(__file__).name}", file=sys.stderr)
        return 1 if stale else 0
    for path in stale:
        path.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
