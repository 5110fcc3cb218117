import { useEffect, useState } from "preact/hooks";
import { type BodyOf, call, type DataOf } from "../api.js";
import { DataTable, ErrorNote, Field, useAction } from "../ui.js";

type Granularity = BodyOf<"keygate.getUsage">["granularity"];
type Usage = DataOf<"keygate.getUsage">;

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

/** What each choice shows: the last 24 hours, the last 30 days, this month and the one before (within retention). */
const VIEWS: Record<Granularity, { label: string; start: (now: number) => number; format: (ms: number) => string }> = {
  hourly: {
    label: "Last 24 hours, by hour",
    start: (now) => now - 23 * HOUR,
    format: (ms) => new Date(ms).toISOString().slice(0, 16).replace("T", " "),
  },
  daily: { label: "Last 30 days, by day", start: (now) => now - 29 * DAY, format: (ms) => new Date(ms).toISOString().slice(0, 10) },
  monthly: {
    label: "This month and the last, by month",
    start: (now) => Date.UTC(new Date(now).getUTCFullYear(), new Date(now).getUTCMonth() - 1, 1),
    format: (ms) => new Date(ms).toISOString().slice(0, 7),
  },
};

/**
 * An identity's or a key's usage from keygate.getUsage (exact, UTC buckets): verifications by the outcomes that
 * matter for billing and the credits by paying balance, bucket by bucket, with the range's totals.
 */
export function UsagePanel(props: { scope: { identity: string } | { keyId: string }; label: string }) {
  const [granularity, setGranularity] = useState<Granularity>("daily");
  const [usage, setUsage] = useState<Usage | null>(null);
  const { error, run } = useAction();
  const scopeKey = JSON.stringify(props.scope);
  useEffect(() => {
    setUsage(null);
    run(async () => setUsage(await call("keygate.getUsage", { ...props.scope, granularity, start: VIEWS[granularity].start(Date.now()) })));
  }, [scopeKey, granularity]);

  const { format } = VIEWS[granularity];
  const rows = usage ? [...usage.buckets.filter((bucket) => bucket.requests > 0).reverse(), { ...usage.totals, start: -1, end: -1 }] : [];
  return (
    <section aria-label={props.label} class="usage">
      <h3>{props.label}</h3>
      <Field label="Usage period">
        {(id) => (
          <select id={id} value={granularity} onChange={(event) => setGranularity(event.currentTarget.value as Granularity)}>
            {Object.entries(VIEWS).map(([value, view]) => (
              <option key={value} value={value}>
                {view.label}
              </option>
            ))}
          </select>
        )}
      </Field>
      <ErrorNote error={error} />
      {usage && (
        <DataTable
          label={`${props.label} by ${granularity === "hourly" ? "hour" : granularity === "daily" ? "day" : "month"}`}
          columns={["Period (UTC)", "Requests", "Valid", "Rate limited", "Usage exceeded", "Credits (key)", "Credits (identity)"]}
          items={rows}
          row={(row) => (
            <tr key={row.start}>
              <th scope="row">{row.start === -1 ? "Total" : format(row.start)}</th>
              <td>{row.requests}</td>
              <td>{row.outcomes.VALID}</td>
              <td>{row.outcomes.RATE_LIMITED}</td>
              <td>{row.outcomes.USAGE_EXCEEDED}</td>
              <td>{row.credits.key}</td>
              <td>{row.credits.identity}</td>
            </tr>
          )}
        />
      )}
    </section>
  );
}
