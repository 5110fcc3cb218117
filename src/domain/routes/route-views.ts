import type { RouteRecord } from "../../storage/route-records.js";
import type { CompiledRoute, RouteDefinition } from "./route-compiler.js";

/** A route as the API shows it. Routes of the configuration file have no timestamps and cannot be changed here. */
export interface RouteView extends Omit<RouteDefinition, "workspaceId"> {
  createdAt?: number;
  updatedAt?: number;
  /** The state of each target of a pool, on the process that answered. */
  upstreamHealth?: UpstreamTargetHealth[];
}

/** One upstream target as a process sees it (docs/gateway.md#upstream-pools). */
export interface UpstreamTargetHealth {
  /** Its URL, credentials masked. */
  url: string;
  weight: number;
  /** Whether requests are sent to it: neither ejected (passive) nor down (active probes). */
  healthy: boolean;
  /** Until when it is ejected (unix ms); once past, one request tries it. */
  ejectedUntil?: number;
  /** Failures in a row (passive health). */
  failures: number;
  /** Calls to it in flight. */
  inFlight: number;
  /** The active probes' verdict, when the pool has them. */
  probedHealthy?: boolean;
  /** Times it was ejected since its pool started. */
  ejections: number;
}

export function storedView(route: RouteRecord): RouteView {
  const { workspaceId: _workspaceId, ...view } = route;
  return { ...view, source: "api" };
}

export function configView(route: CompiledRoute): RouteView {
  const { workspaceId: _workspaceId, ...view } = route.definition;
  return view;
}

/** A view with its upstream targets' state on this process, when its upstream is a pool. */
export function withHealth(view: RouteView, health: ((routeId: string) => UpstreamTargetHealth[] | undefined) | undefined): RouteView {
  const targets = health?.(view.id);
  if (targets !== undefined) view.upstreamHealth = targets;
  return view;
}
