import type { ComponentChildren } from "preact";
import { type Series, TimeChart } from "../../ui/time-chart.js";
import type { DataOf } from "./api.js";
import { DataTable, Field } from "./ui.js";

export { type Series, TimeChart };

/** One row of an analytics answer. */
export type Row = DataOf<"analytics.getVerifications">[number];

/**
 * The time ranges every analytics chart offers, each with the bucket that suits it: the aggregate table of that
 * granularity (`<base>_per_<granularity>_v1`), or that width of bucket over a raw table.
 */
export const RANGES = {
  hour: { label: "Last hour", seconds: 3_600, bucketSeconds: 60, granularity: "minute", interval: "INTERVAL 1 HOUR" },
  day: { label: "Last 24 hours", seconds: 86_400, bucketSeconds: 3_600, granularity: "hour", interval: "INTERVAL 1 DAY" },
  month: { label: "Last 30 days", seconds: 2_592_000, bucketSeconds: 86_400, granularity: "day", interval: "INTERVAL 30 DAY" },
} as const;
export type Range = keyof typeof RANGES;

/** The range picker of every analytics section. */
export function RangeField(props: { value: Range; onChange: (range: Range) => void }) {
  return (
    <Field label="Time range">
      {(id) => (
        <select id={id} value={props.value} onChange={(event) => props.onChange(event.currentTarget.value as Range)}>
          {Object.entries(RANGES).map(([value, { label }]) => (
            <option key={value} value={value}>
              {label}
            </option>
          ))}
        </select>
      )}
    </Field>
  );
}

/** A range picker (and any further filters, as children) with a Refresh button; submitting refreshes. */
export function RangeForm(props: {
  label: string;
  value: Range;
  onChange: (range: Range) => void;
  onRefresh: () => void;
  children?: ComponentChildren;
}) {
  return (
    <form
      class="row"
      aria-label={props.label}
      onSubmit={(event) => {
        event.preventDefault();
        props.onRefresh();
      }}
    >
      <RangeField value={props.value} onChange={props.onChange} />
      {props.children}
      <button type="submit">Refresh</button>
    </form>
  );
}

/**
 * The buckets of a range in unix ms: `since` is the first one's start, `bucket` groups a raw table's `time` (unix
 * ms) into its bucket, and `fill` (for ORDER BY t) adds the buckets no row falls in, so lines drop to zero there.
 */
export function bucketsOf(range: Range, nowMs = Date.now()): { since: number; bucket: string; fill: string } {
  const width = RANGES[range].bucketSeconds * 1000;
  const since = Math.floor((nowMs - RANGES[range].seconds * 1000) / width) * width;
  const until = Math.floor(nowMs / width) * width + width;
  return { since, bucket: `intDiv(time, ${width}) * ${width}`, fill: `WITH FILL FROM ${since} TO ${until} STEP ${width}` };
}

/** Ids chosen or typed by the user go into SQL: only the characters ids have. */
export function filterOn(column: string, id: string): string {
  return /^[A-Za-z0-9_]+$/.test(id) ? ` AND ${column} = '${id}'` : "";
}

const PALETTE = ["#1565c0", "#2e7d32", "#ef6c00", "#6a1b9a", "#c62828", "#00838f", "#ad1457", "#546e7a"];

/**
 * Rows of `{ t, <group>, … }` (t in unix ms, several rows per bucket) as one series per group and measure, aligned
 * on every bucket the rows name. A bucket without a row for a group is `missing` (0 for counts, null for a gap).
 * Groups named "" are left out: they are the rows WITH FILL adds, which count only for the buckets. A measure's
 * own palette colours its series apart from the other measures' (passed and blocked, say); else a group's colour is
 * the same for each of its measures.
 */
export function seriesOf(
  rows: Row[],
  group: string,
  measures: { column: string; label: (group: string) => string; dash?: number[]; palette?: readonly string[] }[],
  missing: 0 | null,
): { times: number[]; series: Series[] } {
  const times = [...new Set(rows.map((row) => Number(row.t)))].sort((a, b) => a - b);
  const at = new Map(times.map((time, index) => [time, index]));
  const groups = [...new Set(rows.map((row) => String(row[group])))].filter((name) => name !== "").sort();
  const series: Series[] = [];
  groups.forEach((name, index) => {
    for (const measure of measures) {
      const values: (number | null)[] = times.map(() => missing);
      for (const row of rows) {
        if (String(row[group]) === name && row[measure.column] !== null)
          values[at.get(Number(row.t)) as number] = Number(row[measure.column]);
      }
      series.push({
        label: measure.label(name),
        values,
        stroke: (measure.palette ?? PALETTE)[index % (measure.palette ?? PALETTE).length] as string,
        ...(measure.dash ? { dash: measure.dash } : {}),
      });
    }
  });
  return { times, series };
}

/** Rows as a table; `empty` says what no rows means (by default: nothing recorded in the range yet). */
export function ResultTable(props: { rows: Row[]; label: string; empty?: string }) {
  if (props.rows.length === 0)
    return <p class="muted">{props.empty ?? "Nothing in this range yet: it shows once requests are recorded (Refresh)."}</p>;
  const columns = Object.keys(props.rows[0] as Row);
  return (
    <DataTable
      label={props.label}
      columns={columns}
      items={props.rows}
      row={(row) => (
        <tr>
          {columns.map((column) => (
            <td key={column}>{typeof row[column] === "object" ? JSON.stringify(row[column]) : String(row[column])}</td>
          ))}
        </tr>
      )}
    />
  );
}
