import { useEffect, useState } from "preact/hooks";
import { call, type DataOf } from "../api.js";
import { filterOn, RANGES, type Range, RangeForm, ResultTable, type Row, seriesOf, TimeChart } from "../charts.js";
import { ErrorNote, Field, fieldError, TextField, useAction } from "../ui.js";

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

export function AnalyticsPage() {
  const [range, setRange] = useState<Range>("hour");
  const [keyId, setKeyId] = useState("");
  const [keySpaceId, setKeySpaceId] = useState("");
  const [apis, setApis] = useState<DataOf<"keygate.listApis">>([]);
  const [over, setOver] = useState<{ total: number; chart: ReturnType<typeof seriesOf> } | null>(null);
  const [topKeys, setTopKeys] = useState<Row[]>([]);
  const [denials, setDenials] = useState<Row[]>([]);
  const { error, run } = useAction();

  const refresh = () =>
    run(async () => {
      const { interval } = RANGES[range];
      const table = `key_verifications_per_${RANGES[range].granularity}_v1`;
      const where = `time >= now() - ${interval}${filterOn("key_space_id", keySpaceId)}${filterOn("key_id", keyId)}`;
      const [byOutcome, top, denied] = await Promise.all([
        call("analytics.getVerifications", {
          query: `SELECT toUnixTimestamp64Milli(toDateTime64(time, 3)) AS t, outcome, SUM(count) AS total FROM ${table} WHERE ${where} GROUP BY t, outcome ORDER BY t`,
        }),
        call("analytics.getVerifications", {
          query: `SELECT key_id, SUM(count) AS total, sumIf(count, outcome = 'VALID') AS valid FROM ${table} WHERE ${where} AND key_id != '' GROUP BY key_id ORDER BY total DESC LIMIT 10`,
        }),
        call("analytics.getVerifications", {
          query: `SELECT outcome, SUM(count) AS total FROM ${table} WHERE ${where} AND outcome != 'VALID' GROUP BY outcome ORDER BY total DESC`,
        }),
      ]);
      const chart = seriesOf(byOutcome, "outcome", [{ column: "total", label: (outcome) => outcome }], 0);
      for (const line of chart.series) line.stroke = OUTCOME_COLOURS[line.label] ?? "#333";
      setOver({ total: byOutcome.reduce((sum, row) => sum + Number(row.total), 0), chart });
      setTopKeys(top);
      setDenials(denied);
    });
  useEffect(() => {
    refresh();
  }, [range, keySpaceId]);
  useEffect(() => {
    // Without read_api the API filter is simply not offered; the charts still work.
    call("keygate.listApis", {}).then(setApis, () => setApis([]));
  }, []);

  return (
    <>
      <h1>Analytics</h1>
      <RangeForm label="Analytics range" value={range} onChange={setRange} onRefresh={refresh}>
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
        <TextField label="Only key id" hint="Empty: every key" value={keyId} onValue={setKeyId} />
      </RangeForm>
      <ErrorNote error={error} />
      <section aria-label="Verifications over time">
        <h2>Verifications over time by outcome</h2>
        <p aria-live="polite">{over === null ? "Loading…" : `${over.total} verifications in range`}</p>
        {over && <TimeChart title="Verifications by outcome" {...over.chart} seconds={RANGES[range].seconds} unit="verifications" />}
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

function SqlConsole() {
  const [query, setQuery] = useState(
    "SELECT outcome, SUM(count) AS total FROM key_verifications_per_day_v1 GROUP BY outcome ORDER BY total DESC",
  );
  const [rows, setRows] = useState<Row[] | null>(null);
  const { error, run } = useAction();
  const submit = (event: Event) => {
    event.preventDefault();
    setRows(null);
    run(async () => setRows(await call("analytics.getVerifications", { query })));
  };
  const queryError = fieldError(error, "body.query");
  return (
    <section aria-label="SQL console">
      <h2>SQL console</h2>
      <form onSubmit={submit}>
        <TextField label="SQL query" rows={4} class="sql" value={query} onValue={setQuery} error={queryError} />
        <button type="submit">Run query</button>
      </form>
      {!queryError && <ErrorNote error={error} />}
      {rows && <ResultTable rows={rows} label="Query result" empty="The query returned no rows." />}
    </section>
  );
}
