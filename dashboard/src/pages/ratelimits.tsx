import { useEffect, useState } from "preact/hooks";
import { call, type DataOf } from "../api.js";
import { bucketsOf, RANGES, type Range, RangeForm, ResultTable, type Row, seriesOf, TimeChart } from "../charts.js";
import { DataTable, ErrorNote, FormError, fieldError, TextField, useAction } from "../ui.js";

type Override = DataOf<"ratelimit.listOverrides">["overrides"][number];

/** Rate limit decisions over time, then the overrides of a namespace. */
export function RatelimitsPage() {
  return (
    <>
      <h1>Rate limits</h1>
      <RatelimitDecisions />
      <Overrides />
    </>
  );
}

/**
 * Passed and blocked decisions per namespace over time, from the aggregate of the range's granularity
 * (ratelimits_per_<granularity>_v1, where `passed` and `total` are counts), and the identifiers blocked most.
 */
function RatelimitDecisions() {
  const [range, setRange] = useState<Range>("hour");
  const [chart, setChart] = useState<ReturnType<typeof seriesOf> | null>(null);
  const [namespaces, setNamespaces] = useState<Row[]>([]);
  const [blocked, setBlocked] = useState<Row[]>([]);
  const { error, run } = useAction();

  const refresh = () =>
    run(async () => {
      const { fill } = bucketsOf(range);
      const from = `FROM ratelimits_per_${RANGES[range].granularity}_v1 WHERE time >= now() - ${RANGES[range].interval}`;
      // Aliases differ from the columns: an alias `passed` would stand for sum(passed) inside sum(passed) too.
      const decided = "sum(passed) AS total_passed, sum(total) - sum(passed) AS total_blocked";
      const [overTime, perNamespace, topBlocked] = await Promise.all([
        call("analytics.getRatelimits", {
          query: `SELECT toUnixTimestamp64Milli(toDateTime64(time, 3)) AS t, namespace_id, ${decided} ${from} GROUP BY t, namespace_id ORDER BY t ${fill}`,
        }),
        call("analytics.getRatelimits", {
          query: `SELECT namespace_id, ${decided} ${from} GROUP BY namespace_id ORDER BY total_blocked DESC, total_passed DESC`,
        }),
        call("analytics.getRatelimits", {
          query: `SELECT namespace_id, identifier, sum(total) - sum(passed) AS blocked, sum(total) AS decisions ${from} GROUP BY namespace_id, identifier HAVING blocked > 0 ORDER BY blocked DESC LIMIT 10`,
        }),
      ]);
      setChart(
        seriesOf(
          overTime,
          "namespace_id",
          [
            { column: "total_passed", label: (namespace) => `${namespace} passed` },
            { column: "total_blocked", label: (namespace) => `${namespace} blocked`, dash: [6, 4] },
          ],
          0,
        ),
      );
      setNamespaces(perNamespace);
      setBlocked(topBlocked);
    });
  useEffect(() => {
    refresh();
  }, [range]);

  return (
    <section aria-label="Rate limit decisions">
      <h2>Decisions</h2>
      <RangeForm label="Decisions range" value={range} onChange={setRange} onRefresh={refresh} />
      <ErrorNote error={error} />
      {chart && <TimeChart title="Passed and blocked per namespace" {...chart} seconds={RANGES[range].seconds} unit="decisions" />}
      <div class="columns">
        <section aria-label="Decisions by namespace">
          <h3>By namespace</h3>
          <ResultTable rows={namespaces} label="Decisions by namespace" />
        </section>
        <section aria-label="Top blocked identifiers">
          <h3>Top blocked identifiers</h3>
          <ResultTable rows={blocked} label="Top blocked identifiers" />
        </section>
      </div>
    </section>
  );
}

/**
 * The overrides of a rate limit namespace, by its name: list, set (create or change), delete. Namespaces come into
 * being with their first use or override; the API has no list of them.
 */
function Overrides() {
  const [namespace, setNamespace] = useState("");
  const [shown, setShown] = useState<string | null>(null);
  const [overrides, setOverrides] = useState<Override[]>([]);
  const [identifier, setIdentifier] = useState("");
  const [limit, setLimit] = useState("");
  const [duration, setDuration] = useState("60000");
  const { error, run } = useAction();
  const setting = useAction();

  const load = async (name: string) => {
    const { overrides: listed } = await call("ratelimit.listOverrides", { namespace: name, limit: 100 });
    setOverrides(listed);
    setShown(name);
  };
  const submit = (event: Event) => {
    event.preventDefault();
    if (shown === null) return;
    setting.run(async () => {
      await call("ratelimit.setOverride", { namespace: shown, identifier, limit: Number(limit), duration: Number(duration) });
      setIdentifier("");
      setLimit("");
      await load(shown);
    });
  };
  const remove = (override: Override) => {
    if (shown === null) return;
    run(async () => {
      await call("ratelimit.deleteOverride", { namespace: shown, identifier: override.identifier });
      await load(shown);
    });
  };

  return (
    <section aria-label="Overrides">
      <h2>Overrides</h2>
      <form
        class="row"
        aria-label="Choose a namespace"
        onSubmit={(event) => {
          event.preventDefault();
          setShown(null);
          run(() => load(namespace));
        }}
      >
        <TextField label="Namespace" required value={namespace} onValue={setNamespace} error={fieldError(error, "body.namespace")} />
        <button type="submit">Show overrides</button>
      </form>
      {!fieldError(error, "body.namespace") && <ErrorNote error={error} />}
      {shown !== null && (
        <>
          <DataTable
            label="Overrides"
            columns={["Identifier", "Limit", "Per milliseconds", "Actions"]}
            empty={<>No overrides in {shown}.</>}
            items={overrides}
            row={(override) => (
              <tr key={override.overrideId}>
                <td>
                  <code>{override.identifier}</code>
                </td>
                <td>{override.limit}</td>
                <td>{override.duration}</td>
                <td>
                  <button type="button" aria-label={`Delete override ${override.identifier}`} onClick={() => remove(override)}>
                    Delete
                  </button>
                </td>
              </tr>
            )}
          />
          <form onSubmit={submit} aria-label="Set an override">
            <h3>Set an override in {shown}</h3>
            <div class="row">
              <TextField
                label="Identifier"
                hint="Exact, or a pattern with *"
                required
                value={identifier}
                onValue={setIdentifier}
                error={fieldError(setting.error, "body.identifier")}
              />
              <TextField
                label="Limit"
                hint="0 blocks"
                type="number"
                required
                value={limit}
                onValue={setLimit}
                error={fieldError(setting.error, "body.limit")}
              />
              <TextField
                label="Duration (ms)"
                type="number"
                required
                value={duration}
                onValue={setDuration}
                error={fieldError(setting.error, "body.duration")}
              />
              <button type="submit">Set override</button>
            </div>
            <FormError error={setting.error} />
          </form>
        </>
      )}
    </section>
  );
}
