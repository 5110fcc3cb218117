import { invalidAt } from "../errors/keygate-error.js";
import { newId } from "../lib/ids.js";
import type { RatelimitConfig } from "../storage/records.js";

export interface NamedLimitInput {
  name: string;
  limit: number;
  duration: number;
  autoApply?: boolean;
}

export interface NamedLimitView {
  id: string;
  name: string;
  limit: number;
  duration: number;
  autoApply: boolean;
}

/**
 * The named limits of a key or identity after a full replace keyed by name: names not listed go, listed names
 * keep their `rl_` id. Duplicate names in one request are a 400 at `location[i].name`.
 */
export function replaceNamedLimits(
  current: readonly RatelimitConfig[],
  input: readonly NamedLimitInput[],
  location: string,
  now: number,
): RatelimitConfig[] {
  const seen = new Map<string, number>();
  input.forEach((limit, index) => {
    const earlier = seen.get(limit.name);
    if (earlier !== undefined)
      throw invalidAt(
        `${location}[${index}].name`,
        `repeats the name of ${location.replace(/^body\./, "")}[${earlier}]`,
        "give each limit its own name",
      );
    seen.set(limit.name, index);
  });
  const existing = new Map(current.map((limit) => [limit.name, limit.id]));
  return input.map((limit) => ({
    id: existing.get(limit.name) ?? newId("rl", now),
    name: limit.name,
    limit: limit.limit,
    durationMs: limit.duration,
    autoApply: limit.autoApply ?? false,
  }));
}

export function viewNamedLimits(limits: readonly RatelimitConfig[]): NamedLimitView[] | undefined {
  if (limits.length === 0) return undefined;
  return limits.map((limit) => ({
    id: limit.id,
    name: limit.name,
    limit: limit.limit,
    duration: limit.durationMs,
    autoApply: limit.autoApply,
  }));
}
