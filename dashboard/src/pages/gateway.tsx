import { useEffect, useState } from "preact/hooks";
import { call } from "../api.js";
import { ErrorNote } from "../ui.js";

interface Route {
  name: string;
  match: { prefix: string; methods?: string[] };
  upstream: string;
  apiId: string;
  key?: { header?: string; scheme?: string; query?: string };
  permissions?: string;
  ratelimits?: { name: string; cost: number }[];
  credits?: { cost: number };
  namespaceLimits?: { namespace: string; identifier: string; limit: number; duration: number }[];
  timeoutMs?: number;
}

/** The gateway's routes in front of this workspace's APIs, as configured (read-only: routes live in the configuration). */
export function GatewayPage() {
  const [routes, setRoutes] = useState<Route[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    call<Route[]>("keygate.listRoutes", {}).then(setRoutes, setError);
  }, []);
  return (
    <>
      <h1>Gateway routes</h1>
      <p>Read-only: routes are set in keygate's configuration file and reloaded from it.</p>
      <ErrorNote error={error} />
      {routes && (
        <table aria-label="Gateway routes">
          <thead>
            <tr>
              <th scope="col">Route</th>
              <th scope="col">Matches</th>
              <th scope="col">Key from</th>
              <th scope="col">Permission query</th>
              <th scope="col">Limits</th>
              <th scope="col">Credits</th>
              <th scope="col">API</th>
              <th scope="col">Upstream</th>
            </tr>
          </thead>
          <tbody>
            {routes.length === 0 && (
              <tr>
                <td colSpan={8}>No routes in front of this workspace's APIs.</td>
              </tr>
            )}
            {routes.map((route) => (
              <tr key={route.name}>
                <td>{route.name}</td>
                <td>
                  {(route.match.methods ?? ["any method"]).join(", ")} <code>{route.match.prefix}</code>
                </td>
                <td>{keyLocation(route.key)}</td>
                <td>{route.permissions ?? ""}</td>
                <td>
                  {[
                    ...(route.ratelimits ?? []).map((limit) => `${limit.name} (cost ${limit.cost})`),
                    ...(route.namespaceLimits ?? []).map(
                      (limit) => `${limit.namespace}: ${limit.limit} per ${limit.duration} ms by ${limit.identifier}`,
                    ),
                  ].join("; ")}
                </td>
                <td>{route.credits ? route.credits.cost : ""}</td>
                <td>
                  <code>{route.apiId}</code>
                </td>
                <td>
                  <code>{route.upstream}</code>
                  {route.timeoutMs !== undefined ? ` (timeout ${route.timeoutMs} ms)` : ""}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </>
  );
}

function keyLocation(key: Route["key"]): string {
  if (key?.query) return `query parameter ${key.query}`;
  const header = key?.header ?? "Authorization";
  const scheme = key?.header === undefined ? (key?.scheme ?? "Bearer") : key.scheme;
  return scheme ? `${header}: ${scheme} <key>` : `${header}: <key>`;
}
