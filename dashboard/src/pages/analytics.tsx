import { useEffect, useRef, useState } from "preact/hooks";
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import { call } from "../api.js";
import { ErrorNote, Field, fieldError } from "../ui.js";

type Row = Record<string, unknown>;

/** Each range reads the aggregate whose buckets suit it. */
const RANGES = {
  hour: { label: "Last hour", table: "key_verifications_per_minute_v1", interval: "INTERVAL 1 HOUR", seconds: 3_600 },
  day: { label: "Last 24 hours", table: "key_verifications_per_hour_v1", interval: "INTERVAL 1 DAY", seconds: 86_400 },
  month: { label: "Last 30 days", table: "key_verifications_per_day_v1", interval: "INTERVAL 30 DAY", seconds: 2_592_000 },
} as const;
type Range = keyof typeof RANGES;

const OUTCOME_COLOURS: Record<string, string> = {
  VALID: "#2e7d32",
  RATE_LIMITED: "#ef6c00",
  USAGE_EXCEEDED: "#6a1b9a",
  INSUFFICIENT_PERMISSIONS: "#c62828",
  FORBIDDEN: "#ad1457",
  DISABLED: "#546e7a",
  EXPIRED: "#795548",
  NOT_FOUND: "#1565c0",
};

/** Ids chosen or typed by the user go into SQL: only the characters ids have. */
function filterOn(column: string, id: string): string {
  return /^[A-Za-z0-9_]+$/.test(id) ? ` AND ${column} = '${id}'` : "";
}

export function AnalyticsPage() {
  const [range, setRange] = useState<Range>("hour");
  const [keyId, setKeyId] = useState("");
  const [keySpaceId, setKeySpaceId] = useState("");
  const [apis, setApis] = useState<{ id: string; name: string; keySpaceId: string }[]>([]);
  const [series, setSeries] = useState<Row[] | null>(null);
  const [topKeys, setTopKeys] = useState<Row[]>([]);
  const [denials, setDenials] = useState<Row[]>([]);
  const [error, setError] = useState<unknown>(null);

  const refresh = async () => {
    setError(null);
    const { table, interval } = RANGES[range];
    const where = `time >= now() - ${interval}${filterOn("key_space_id", keySpaceId)}${filterOn("key_id", keyId)}`;
    try {
      const [over, top, denied] = await Promise.all([
        call<Row[]>("analytics.getVerifications", {
          query: `SELECT toUnixTimestamp64Milli(toDateTime64(time, 3)) AS t, outcome, SUM(count) AS total FROM ${table} WHERE ${where} GROUP BY t, outcome ORDER BY t`,
        }),
        call<Row[]>("analytics.getVerifications", {
          query: `SELECT key_id, SUM(count) AS total, sumIf(count, outcome = 'VALID') AS valid FROM ${table} WHERE ${where} AND key_id != '' GROUP BY key_id ORDER BY total DESC LIMIT 10`,
        }),
        call<Row[]>("analytics.getVerifications", {
          query: `SELECT outcome, SUM(count) AS total FROM ${table} WHERE ${where} AND outcome != 'VALID' GROUP BY outcome ORDER BY total DESC`,
        }),
      ]);
      setSeries(over);
      setTopKeys(top);
      setDenials(denied);
    } catch (failure) {
      setError(failure);
    }
  };
  useEffect(() => {
    refresh();
  }, [range, keySpaceId]);
  useEffect(() => {
    // Without read_api the API filter is simply not offered; the charts still work.
    call<{ id: string; name: string; keySpaceId: string }[]>("keygate.listApis", {}).then(setApis, () => setApis([]));
  }, []);

  const total = (series ?? []).reduce((sum, row) => sum + Number(row.total), 0);
  return (
    <>
      <h1>Analytics</h1>
      <form
        class="row"
        aria-label="Analytics range"
        onSubmit={(event) => {
          event.preventDefault();
          refresh();
        }}
      >
        <Field label="Time range">
          {(id) => (
            <select id={id} value={range} onChange={(event) => setRange(event.currentTarget.value as Range)}>
              {Object.entries(RANGES).map(([value, { label }]) => (
                <option key={value} value={value}>
                  {label}
                </option>
              ))}
            </select>
          )}
        </Field>
        <Field label="Only API">
          {(id) => (
            <select id={id} value={keySpaceId} onChange={(event) => setKeySpaceId(event.currentTarget.value)}>
              <option value="">every API</option>
              {apis.map((api) => (
                <option key={api.id} value={api.keySpaceId}>
                  {api.name}
                </option>
              ))}
            </select>
          )}
        </Field>
        <Field label="Only key id" hint="Empty: every key">
          {(id, describedBy) => (
            <input id={id} value={keyId} aria-describedby={describedBy} onInput={(event) => setKeyId(event.currentTarget.value)} />
          )}
        </Field>
        <button type="submit">Refresh</button>
      </form>
      <ErrorNote error={error} />
      <section aria-label="Verifications over time">
        <h2>Verifications over time by outcome</h2>
        <p aria-live="polite">{series === null ? "Loading…" : `${total} verifications in range`}</p>
        {series && <OutcomeChart rows={series} seconds={RANGES[range].seconds} />}
      </section>
      <div class="columns">
        <section aria-label="Top keys">
          <h2>Top keys by usage</h2>
          <ResultTable rows={topKeys} label="Top keys" />
        </section>
        <section aria-label="Denials by reason">
          <h2>Denials by reason</h2>
          <ResultTable rows={denials} label="Denials" />
        </section>
      </div>
      <SqlConsole />
    </>
  );
}

/** One line per outcome over the time buckets, drawn by uPlot. */
function OutcomeChart(props: { rows: Row[]; seconds: number }) {
  const container = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const element = container.current;
    if (!element) return;
    const times = [...new Set(props.rows.map((row) => Number(row.t)))].sort((a, b) => a - b);
    const outcomes = [...new Set(props.rows.map((row) => String(row.outcome)))].sort();
    const at = new Map(times.map((time, index) => [time, index]));
    const data: number[][] = [times.map((time) => time / 1000)];
    for (const outcome of outcomes) {
      const values = times.map(() => 0);
      for (const row of props.rows) if (row.outcome === outcome) values[at.get(Number(row.t)) as number] = Number(row.total);
      data.push(values);
    }
    const chart = new uPlot(
      {
        width: Math.max(320, element.clientWidth),
        height: 260,
        // The whole range the query covered, not just the buckets that have rows.
        scales: { x: { time: true, range: (): uPlot.Range.MinMax => [Date.now() / 1000 - props.seconds, Date.now() / 1000] } },
        series: [
          {},
          ...outcomes.map((outcome) => ({ label: outcome, stroke: OUTCOME_COLOURS[outcome] ?? "#333", width: 2, points: { show: true } })),
        ],
        axes: [{}, { label: "verifications" }],
      },
      data as uPlot.AlignedData,
      element,
    );
    return () => chart.destroy();
  }, [props.rows, props.seconds]);
  return <div ref={container} role="img" aria-label={`Chart of ${props.rows.length} data points`} class="chart" />;
}

function ResultTable(props: { rows: Row[]; label: string }) {
  if (props.rows.length === 0) return <p>No rows.</p>;
  const columns = Object.keys(props.rows[0] as Row);
  return (
    <table aria-label={props.label}>
      <thead>
        <tr>
          {columns.map((column) => (
            <th scope="col" key={column}>
              {column}
            </th>
          ))}
        </tr>
      </thead>
      <tbody>
        {props.rows.map((row, index) => (
          <tr key={index}>
            {columns.map((column) => (
              <td key={column}>{typeof row[column] === "object" ? JSON.stringify(row[column]) : String(row[column])}</td>
            ))}
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function SqlConsole() {
  const [query, setQuery] = useState(
    "SELECT outcome, SUM(count) AS total FROM key_verifications_per_day_v1 GROUP BY outcome ORDER BY total DESC",
  );
  const [rows, setRows] = useState<Row[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  const run = async (event: Event) => {
    event.preventDefault();
    setError(null);
    try {
      setRows(await call<Row[]>("analytics.getVerifications", { query }));
    } catch (failure) {
      setRows(null);
      setError(failure);
    }
  };
  const queryError = fieldError(error, "body.query");
  return (
    <section aria-label="SQL console">
      <h2>SQL console</h2>
      <form onSubmit={run}>
        <Field label="SQL query" error={queryError}>
          {(id, describedBy) => (
            <textarea
              id={id}
              rows={4}
              class="sql"
              value={query}
              aria-describedby={describedBy}
              onInput={(event) => setQuery(event.currentTarget.value)}
            />
          )}
        </Field>
        <button type="submit">Run query</button>
      </form>
      {!queryError && <ErrorNote error={error} />}
      {rows && <ResultTable rows={rows} label="Query result" />}
    </section>
  );
}
