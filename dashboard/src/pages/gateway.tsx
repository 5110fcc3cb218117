import { useEffect, useState } from "preact/hooks";
import { call } from "../api.js";
import { ConfirmButton, DataTable, ErrorNote, useAction } from "../ui.js";
import { GatewayTraffic } from "./gateway-traffic.js";
import type { RouteView } from "./policy-drafts.js";
import { PolicyEditor } from "./policy-editor.js";
import type { Api } from "./policy-forms.js";
import { describePolicy } from "./policy-summary.js";
import { RouteForm } from "./route-form.js";
import { UpstreamCell } from "./upstream-cell.js";

/**
 * The gateway's routes this workspace may read: its own, created, edited and deleted here, and the configuration
 * file's in front of its APIs, shown read-only (they change in the file).
 */
export function GatewayPage() {
  const [routes, setRoutes] = useState<RouteView[] | null>(null);
  const [apis, setApis] = useState<Api[]>([]);
  const [editing, setEditing] = useState<string | null>(null);
  const { error, run } = useAction();
  const apisRead = useAction();

  const load = async () => setRoutes(await call("keygate.listRoutes", {}));
  useEffect(() => {
    run(load);
    apisRead.run(async () => setApis(await call("keygate.listApis", {})));
  }, []);
  // Called once a save is answered: the list as it is then, not as it was when the save began.
  const replace = (route: RouteView) => setRoutes((current) => (current ?? []).map((each) => (each.id === route.id ? route : each)));
  const created = (route: RouteView) =>
    run(async () => {
      await load();
      setEditing(route.id);
    });
  const remove = (route: RouteView) =>
    run(async () => {
      await call("keygate.deleteRoute", { route: route.id });
      if (editing === route.id) setEditing(null);
      await load();
    });
  const edited = routes?.find((route) => route.id === editing && route.source === "api");

  return (
    <>
      <h1>Gateway routes</h1>
      <ErrorNote error={error} />
      <details>
        <summary>Create a route</summary>
        <RouteForm onSaved={created} />
      </details>
      {routes && (
        <DataTable
          label="Gateway routes"
          columns={["Route", "Source", "Matches", "Policies", "Upstream", "Actions"]}
          empty="No routes yet: create one above (Create a route) to put keygate in front of an API."
          items={routes}
          row={(route) => (
            <tr key={route.id}>
              <td>{route.name}</td>
              <td>{route.source === "config" ? "configuration file" : "API"}</td>
              <td>
                {(route.match.methods ?? ["any method"]).join(", ")} <code>{route.match.prefix}</code>
              </td>
              <td>
                {route.policies.length === 0 ? (
                  "none"
                ) : (
                  <ol class="policies">
                    {route.policies.map((policy) => (
                      <li key={policy.id}>{describePolicy(policy)}</li>
                    ))}
                  </ol>
                )}
              </td>
              <td>
                <UpstreamCell route={route} />
                {route.timeoutMs !== undefined ? ` (timeout ${route.timeoutMs} ms)` : ""}
              </td>
              <td>
                {route.source === "config" ? (
                  <small>Read-only: from the configuration file</small>
                ) : (
                  <div class="actions">
                    <button type="button" aria-label={`Edit ${route.name}`} onClick={() => setEditing(route.id)}>
                      Edit
                    </button>
                    <ConfirmButton
                      label="Delete"
                      name={`Delete ${route.name}`}
                      title={`Delete the route ${route.name}?`}
                      consequence={
                        <p>
                          Requests to <code>{route.match.prefix}</code> are no longer forwarded to its upstream, on every instance within a
                          second; its policies are deleted with it.
                        </p>
                      }
                      confirm={`Confirm deleting ${route.name}`}
                      onConfirm={() => remove(route)}
                    />
                  </div>
                )}
              </td>
            </tr>
          )}
        />
      )}
      {edited && (
        <section class="editor" aria-label={`Route ${edited.name}`} key={edited.id}>
          <h2>Route {edited.name}</h2>
          <RouteForm route={edited} onSaved={replace} onCancel={() => setEditing(null)} />
          <ErrorNote error={apisRead.error} />
          <PolicyEditor route={edited} apis={apis} onSaved={replace} />
        </section>
      )}
      <GatewayTraffic />
    </>
  );
}
