import type { RouteRecord } from "../../storage/route-records.js";
import type { CompiledRoute, RouteDefinition } from "./route-compiler.js";

/** A route as the API shows it. Routes of the configuration file have no timestamps and cannot be changed here. */
export interface RouteView extends Omit<RouteDefinition, "workspaceId"> {
  createdAt?: number;
  updatedAt?: number;
}

export function storedView(route: RouteRecord): RouteView {
  const { workspaceId: _workspaceId, ...view } = route;
  return { ...view, source: "api" };
}

export function configView(route: CompiledRoute): RouteView {
  const { workspaceId: _workspaceId, ...view } = route.definition;
  return view;
}
