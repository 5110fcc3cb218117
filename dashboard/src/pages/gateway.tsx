import { useEffect, useState } from "preact/hooks";
import { call, type DataOf } from "../api.js";
import { DataTable, ErrorNote } from "../ui.js";
import { GatewayTraffic } from "./gateway-traffic.js";
import { describePolicy } from "./policy-summary.js";

type Route = DataOf<"keygate.listRoutes">[number];

/** The gateway's routes this workspace may read: its own, and the configuration file's in front of its APIs. */
export function GatewayPage() {
  const [routes, setRoutes] = useState<Route[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    call("keygate.listRoutes", {}).then(setRoutes, setError);
  }, []);
  return (
    <>
      <h1>Gateway routes</h1>
      <ErrorNote error={error} />
      {routes && (
        <DataTable
          label="Gateway routes"
          columns={["Route", "Source", "Matches", "Policies", "Upstream"]}
          empty="No routes for this workspace."
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
                <code>{route.upstream}</code>
                {route.timeoutMs !== undefined ? ` (timeout ${route.timeoutMs} ms)` : ""}
              </td>
            </tr>
          )}
        />
      )}
      <GatewayTraffic />
    </>
  );
}
