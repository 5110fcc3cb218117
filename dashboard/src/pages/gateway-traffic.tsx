import { useEffect, useState } from "preact/hooks";
import { call } from "../api.js";
import { bucketsOf, RANGES, type Range, RangeForm, ResultTable, type Row, seriesOf, TimeChart } from "../charts.js";
import { ErrorNote, useAction } from "../ui.js";

const REFUSED = "response_status >= 400 AND response_status < 500";

/**
 * The requests the gateway answered (gateway_requests_v1, one row each), per route: counts, server errors and
 * refusals, and latency, total and keygate's own (gateway_latency: total minus the upstream's time).
 */
export function GatewayTraffic() {
  const [range, setRange] = useState<Range>("hour");
  const [charts, setCharts] = useState<Record<
    "requests" | "errors" | "refusals" | "latency" | "keygate",
    ReturnType<typeof seriesOf>
  > | null>(null);
  const [routes, setRoutes] = useState<Row[]>([]);
  const { error, run } = useAction();

  const refresh = () =>
    run(async () => {
      const { since, bucket, fill } = bucketsOf(range);
      const from = `FROM gateway_requests_v1 WHERE time >= ${since}`;
      const [overTime, perRoute] = await Promise.all([
        call("analytics.getGatewayRequests", {
          query: `SELECT ${bucket} AS t, app_id AS route, count() AS requests, countIf(response_status >= 500) AS errors, countIf(${REFUSED}) AS refusals, quantile(0.5)(total_latency) AS p50, quantile(0.99)(total_latency) AS p99, quantile(0.5)(gateway_latency) AS keygate_p50, quantile(0.99)(gateway_latency) AS keygate_p99 ${from} GROUP BY t, route ORDER BY t ${fill}`,
        }),
        call("analytics.getGatewayRequests", {
          query: `SELECT app_id AS route, count() AS requests, countIf(response_status >= 500) AS errors_5xx, countIf(${REFUSED}) AS refusals_4xx, round(quantile(0.5)(total_latency), 1) AS p50_ms, round(quantile(0.99)(total_latency), 1) AS p99_ms, round(quantile(0.5)(gateway_latency), 2) AS keygate_p50_ms, round(quantile(0.99)(gateway_latency), 2) AS keygate_p99_ms ${from} GROUP BY route ORDER BY requests DESC`,
        }),
      ]);
      const count = (column: string) => seriesOf(overTime, "route", [{ column, label: (route) => route }], 0);
      const quantiles = (prefix: string) =>
        seriesOf(
          overTime,
          "route",
          [
            { column: `${prefix}p50`, label: (route) => `${route} p50` },
            { column: `${prefix}p99`, label: (route) => `${route} p99`, dash: [6, 4] },
          ],
          null,
        );
      setCharts({
        requests: count("requests"),
        errors: count("errors"),
        refusals: count("refusals"),
        latency: quantiles(""),
        keygate: quantiles("keygate_"),
      });
      setRoutes(perRoute);
    });
  useEffect(() => {
    refresh();
  }, [range]);

  const { seconds } = RANGES[range];
  return (
    <section aria-label="Gateway traffic">
      <h2>Traffic</h2>
      <RangeForm label="Traffic range" value={range} onChange={setRange} onRefresh={refresh} />
      <ErrorNote error={error} />
      <h3>Requests by route</h3>
      <ResultTable rows={routes} label="Requests by route" />
      {charts && (
        <>
          <TimeChart title="Requests per route" {...charts.requests} seconds={seconds} unit="requests" />
          <div class="columns">
            <TimeChart title="Server errors (5xx) per route" {...charts.errors} seconds={seconds} unit="answers ≥ 500" />
            <TimeChart title="Refusals (4xx) per route" {...charts.refusals} seconds={seconds} unit="answers 400–499" />
          </div>
          <div class="columns">
            <TimeChart title="Latency per route" {...charts.latency} seconds={seconds} unit="total ms" />
            <TimeChart title="keygate's own latency per route" {...charts.keygate} seconds={seconds} unit="gateway ms" />
          </div>
        </>
      )}
    </section>
  );
}
