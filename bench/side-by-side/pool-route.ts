import { callKeygate } from "./keygate.js";
import { choiceOption } from "./options.js";

/** gateway: `--pool on` adds a route managed through the API whose upstream is a pool of two targets, on the same keygate. */
export function poolOption(): boolean {
  return choiceOption("pool", ["off", "on"]) === "on";
}

/**
 * A route managed through the API at /pool whose upstream is a pool of `targets` (round-robin, passive health, a
 * retry on 502/503), with the checks of the benchmark's configured route as a keyauth policy. Returns the prefix to
 * send requests to.
 */
export async function createPoolRoute(keygate: string, apiId: string, targets: string[]): Promise<string> {
  await callKeygate(keygate, "keygate.createRoute", {
    name: "orders-pool",
    match: { prefix: "/pool" },
    upstream: { targets: targets.map((url) => ({ url })), retry: { statuses: [502, 503] } },
    policies: [
      {
        name: "api keys",
        enabled: true,
        keyauth: { keyspaces: [apiId], permissionQuery: "orders.read OR admin", ratelimits: [{ name: "requests", cost: 1 }] },
      },
    ],
  });
  return `${keygate}/pool`;
}
