import { useEffect, useState } from "preact/hooks";
import { TableScroll } from "../../ui/shell.js";
import { type Series, TimeChart } from "../../ui/time-chart.js";
import { type Counts, call, callPage, type Point, type PortalKey, type PortalSession } from "./api.js";

const RANGES = {
  hour: { label: "Last hour", ms: 3_600_000 },
  day: { label: "Last 24 hours", ms: 86_400_000 },
  month: { label: "Last 30 days", ms: 30 * 86_400_000 },
} as const;
type Range = keyof typeof RANGES;

/** The chart's lines: each a measure of a bucket, in a colour told apart without its hue (the legend names it). */
const LINES: { label: string; of: (counts: Counts) => number; stroke: string; dash?: number[] }[] = [
  { label: "valid", of: (counts) => counts.valid, stroke: "#15803d" },
  { label: "rate limited", of: (counts) => counts.rateLimited, stroke: "#c2410c", dash: [6, 3] },
  { label: "out of credits", of: (counts) => counts.usageExceeded, stroke: "#7e22ce", dash: [2, 3] },
  {
    label: "other refusals",
    of: (counts) => counts.total - counts.valid - counts.rateLimited - counts.usageExceeded,
    stroke: "#4b5563",
    dash: [10, 4],
  },
];

/** A customer's keys usage is counted for, at most (portal.getVerifications reads as many). */
const KEYS_COUNTED = 1_000;

/** Every key of the customer, page after page, up to KEYS_COUNTED. */
async function everyKey(session: PortalSession): Promise<PortalKey[]> {
  const keys: PortalKey[] = [];
  let cursor: string | undefined;
  do {
    const page = await callPage<PortalKey>(session, "listKeys", { limit: 100, ...(cursor ? { cursor } : {}) });
    keys.push(...page.items);
    cursor = page.cursor;
  } while (cursor !== undefined && keys.length < KEYS_COUNTED);
  return keys;
}

/**
 * The customer's verifications over a range: a chart with a time axis, a count axis and a legend, the totals, and
 * how each key contributed (portal.getVerifications with `byKey`).
 */
export function Usage({ session }: { session: PortalSession }) {
  const [range, setRange] = useState<Range>("day");
  const [points, setPoints] = useState<Point[] | null>(null);
  const [names, setNames] = useState<Map<string, PortalKey>>(new Map());
  const [problem, setProblem] = useState<string | null>(null);
  const load = () => {
    const end = Date.now() + 60_000;
    call<Point[]>(session, "getVerifications", { startTime: end - RANGES[range].ms, endTime: end, byKey: true })
      .then((answer) => {
        setPoints(answer);
        setProblem(null);
      })
      .catch((error: Error) => setProblem(error.message));
    // The keys' names and starts, for the breakdown (without keys:read the ids stand alone).
    if (session.scopes.includes("keys:read"))
      everyKey(session).then(
        (keys) => setNames(new Map(keys.map((key) => [key.keyId, key]))),
        () => {},
      );
  };
  useEffect(load, [range]);

  const total = points?.reduce((sum, point) => sum + point.total, 0) ?? 0;
  const valid = points?.reduce((sum, point) => sum + point.valid, 0) ?? 0;
  const series: Series[] = LINES.map((line) => ({
    label: line.label,
    values: (points ?? []).map((point) => line.of(point)),
    stroke: line.stroke,
    ...(line.dash ? { dash: line.dash } : {}),
  }));
  const perKey = new Map<string, Counts>();
  for (const point of points ?? [])
    for (const counts of point.keys ?? []) {
      const sum = perKey.get(counts.keyId) ?? {
        total: 0,
        valid: 0,
        rateLimited: 0,
        usageExceeded: 0,
        insufficientPermissions: 0,
        forbidden: 0,
        disabled: 0,
        expired: 0,
      };
      for (const field of Object.keys(sum) as (keyof Counts)[]) sum[field] += counts[field];
      perKey.set(counts.keyId, sum);
    }
  const breakdown = [...perKey].filter(([, counts]) => counts.total > 0).sort(([, a], [, b]) => b.total - a.total);

  return (
    <section id="usage" aria-labelledby="usage-heading">
      <h2 id="usage-heading">Usage</h2>
      <form
        class="row"
        aria-label="Usage range"
        onSubmit={(event) => {
          event.preventDefault();
          load();
        }}
      >
        <div class="field">
          <label for="usage-range">Time range</label>
          <select id="usage-range" value={range} onChange={(event) => setRange(event.currentTarget.value as Range)}>
            {Object.entries(RANGES).map(([value, { label }]) => (
              <option key={value} value={value}>
                {label}
              </option>
            ))}
          </select>
        </div>
        <button type="submit" data-testid="refresh-usage">
          Refresh
        </button>
      </form>
      {problem && (
        <p class="error" role="alert">
          {problem}
        </p>
      )}
      <p aria-live="polite">
        <span data-testid="usage-total">{total}</span> verifications, <span data-testid="usage-valid">{valid}</span> valid, in the{" "}
        {RANGES[range].label.toLowerCase()}
      </p>
      {points && (
        <div class="usage">
          <TimeChart
            title="Verifications of your keys"
            times={points.map((point) => point.time)}
            series={series}
            seconds={RANGES[range].ms / 1000}
            unit="verifications"
          />
        </div>
      )}
      <h3>By key</h3>
      <TableScroll label="Usage by key">
        <table data-testid="usage-by-key" aria-label="Usage by key">
          <thead>
            <tr>
              <th scope="col">Key</th>
              <th scope="col">Name</th>
              <th scope="col">Verifications</th>
              <th scope="col">Valid</th>
              <th scope="col">Refused</th>
            </tr>
          </thead>
          <tbody>
            {breakdown.length === 0 && (
              <tr>
                <td class="empty" colSpan={5}>
                  No verifications in this range: requests made with your keys show here.
                </td>
              </tr>
            )}
            {breakdown.map(([keyId, counts]) => (
              <tr key={keyId} data-key-id={keyId}>
                <td>
                  <code class="nowrap">{names.get(keyId)?.start ? `${names.get(keyId)?.start}…` : keyId}</code>
                </td>
                <td>{names.get(keyId)?.name ?? ""}</td>
                <td>{counts.total}</td>
                <td>{counts.valid}</td>
                <td>{counts.total - counts.valid}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </TableScroll>
    </section>
  );
}
