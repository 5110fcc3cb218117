import { useEffect, useMemo, useState } from "preact/hooks";
import { call, type DataOf } from "../api.js";
import { bucketsOf, RANGES, type Range, RangeForm, ResultTable, type Row, seriesOf, TimeChart } from "../charts.js";
import { ConfirmButton, DataTable, ErrorNote, Field, FormError, fieldError, TextField, useAction } from "../ui.js";

type Override = DataOf<"ratelimit.listOverrides">["overrides"][number];
type Namespace = DataOf<"keygate.listRatelimitNamespaces">[number];

// Passed in greens and blues, blocked in reds and oranges: the two read apart whatever the number of namespaces.
const PASSED = ["#2e7d32", "#1565c0", "#00838f", "#546e7a"];
const BLOCKED = ["#c62828", "#ef6c00", "#ad1457", "#6a1b9a"];

/**
 * Rate limit decisions over time, then the overrides of a namespace. Namespaces are shown by name: analytics rows
 * name them by id. `null` while the list is loading, or when the root key may not read it (ids are shown then, and
 * the overrides' namespace is typed).
 */
export function RatelimitsPage() {
  const [namespaces, setNamespaces] = useState<Namespace[] | null>(null);
  useEffect(() => {
    call("keygate.listRatelimitNamespaces", {}).then(setNamespaces, () => setNamespaces(null));
  }, []);
  const names = useMemo(() => new Map((namespaces ?? []).map((namespace) => [namespace.id, namespace.name])), [namespaces]);
  return (
    <>
      <h1>Rate limits</h1>
      <RatelimitDecisions names={names} />
      <Overrides namespaces={namespaces} />
    </>
  );
}

/** Rows with a `namespace_id` column, that column replaced by `namespace`: the name where it is known. */
function byName(rows: Row[], names: ReadonlyMap<string, string>): Row[] {
  return rows.map(({ namespace_id, ...rest }) => ({ namespace: names.get(String(namespace_id)) ?? namespace_id, ...rest }));
}

/**
 * Passed and blocked decisions per namespace over time, from the aggregate of the range's granularity
 * (ratelimits_per_<granularity>_v1, where `passed` and `total` are counts), and the identifiers blocked most.
 */
function RatelimitDecisions(props: { names: ReadonlyMap<string, string> }) {
  const [range, setRange] = useState<Range>("hour");
  const [rows, setRows] = useState<{ overTime: Row[]; perNamespace: Row[]; topBlocked: Row[] } | null>(null);
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
      setRows({ overTime, perNamespace, topBlocked });
    });
  useEffect(() => {
    refresh();
  }, [range]);
  // Named when drawn, so names that arrive after the rows still apply.
  const chart = useMemo(
    () =>
      rows &&
      seriesOf(
        byName(rows.overTime, props.names),
        "namespace",
        [
          { column: "total_passed", label: (namespace) => `${namespace} passed`, palette: PASSED },
          { column: "total_blocked", label: (namespace) => `${namespace} blocked`, dash: [6, 4], palette: BLOCKED },
        ],
        0,
      ),
    [rows, props.names],
  );

  return (
    <section aria-label="Rate limit decisions">
      <h2>Decisions</h2>
      <RangeForm label="Decisions range" value={range} onChange={setRange} onRefresh={refresh} />
      <ErrorNote error={error} />
      {chart && <TimeChart title="Passed and blocked per namespace" {...chart} seconds={RANGES[range].seconds} unit="decisions" />}
      <div class="columns">
        <section aria-label="Decisions by namespace">
          <h3>By namespace</h3>
          <ResultTable rows={byName(rows?.perNamespace ?? [], props.names)} label="Decisions by namespace" />
        </section>
        <section aria-label="Top blocked identifiers">
          <h3>Top blocked identifiers</h3>
          <ResultTable rows={byName(rows?.topBlocked ?? [], props.names)} label="Top blocked identifiers" />
        </section>
      </div>
    </section>
  );
}

/**
 * The overrides of a rate limit namespace: list, set (create or change), delete. The namespace is picked from the
 * workspace's (they come into being with their first use), or typed when the root key may not list them.
 */
function Overrides(props: { namespaces: Namespace[] | null }) {
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
        {props.namespaces === null ? (
          <TextField label="Namespace" required value={namespace} onValue={setNamespace} error={fieldError(error, "body.namespace")} />
        ) : (
          <Field label="Namespace" error={fieldError(error, "body.namespace")}>
            {(id, describedBy) => (
              <select
                id={id}
                required
                value={namespace}
                aria-describedby={describedBy}
                onChange={(event) => setNamespace(event.currentTarget.value)}
              >
                <option value="">{props.namespaces?.length ? "Choose a namespace" : "No namespace yet"}</option>
                {props.namespaces?.map((listed) => (
                  <option key={listed.id} value={listed.name}>
                    {listed.name}
                  </option>
                ))}
              </select>
            )}
          </Field>
        )}
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
                  <ConfirmButton
                    label="Delete"
                    name={`Delete override ${override.identifier}`}
                    title={`Delete the override for ${override.identifier}?`}
                    consequence={
                      <p>Requests by {override.identifier} fall back to the limit each call asks for, on every instance within a second.</p>
                    }
                    confirm={`Confirm deleting the override for ${override.identifier}`}
                    onConfirm={() => remove(override)}
                  />
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
