import { KeygateError } from "../../errors/keygate-error.js";
import type { Clock } from "../../lib/clock.js";
import { newId } from "../../lib/ids.js";
import type { RatelimitNamespaceStore } from "../../storage/interfaces.js";
import { namespaceBucket } from "./buckets.js";
import type { NamespaceLimitCheck } from "./limit-decision.js";
import type { NamespaceDirectory, ResolvedNamespace } from "./namespace-directory.js";

/** One check of ratelimit.limit / multiLimit, or of a gateway route's namespace limit. */
export interface LimitRequest {
  /** Namespace name, or its `rlns_` id. */
  namespace: string;
  identifier: string;
  limit: number;
  durationMs: number;
  /** Units to take; 1 when absent, 0 checks without consuming. */
  cost?: number;
}

/**
 * Finds the namespaces limit requests name, through the directory (the hot path), and creates the missing ones
 * when the caller may: each distinct namespace once per call.
 */
export class NamespaceResolver {
  private readonly namespaces: RatelimitNamespaceStore;
  private readonly directory: NamespaceDirectory;
  private readonly clock: Clock;

  constructor(namespaces: RatelimitNamespaceStore, directory: NamespaceDirectory, clock: Clock) {
    this.namespaces = namespaces;
    this.directory = directory;
    this.clock = clock;
  }

  /** Each distinct namespace the requests name, or null when it does not exist. */
  async findAll(workspaceId: string, requests: readonly LimitRequest[]): Promise<Map<string, ResolvedNamespace | null>> {
    const resolved = new Map<string, ResolvedNamespace | null>();
    for (const request of requests) resolved.set(request.namespace, null);
    // ratelimit.limit and most multiLimit calls name one namespace: no need to gather several lookups then.
    if (resolved.size === 1) {
      const name = requests[0]?.namespace as string;
      resolved.set(name, await this.directory.find(workspaceId, name));
      return resolved;
    }
    const names = [...resolved.keys()];
    const found = await Promise.all(names.map((name) => this.directory.find(workspaceId, name)));
    for (const [index, name] of names.entries()) resolved.set(name, found[index] ?? null);
    return resolved;
  }

  /** Creates the missing namespaces; one created meanwhile by another caller (or instance) is used instead. */
  async createAll(workspaceId: string, names: string[], resolved: Map<string, ResolvedNamespace | null>): Promise<void> {
    await Promise.all(
      names.map(async (name) => {
        const now = this.clock.now();
        const id = newId("rlns", now);
        await this.namespaces.createNamespace({ id, workspaceId, name, createdAt: now });
        this.directory.forget(workspaceId, id, name);
        const namespace = await this.directory.find(workspaceId, name);
        if (!namespace) throw new Error(`the rate limit namespace '${name}' was created but cannot be read back`);
        resolved.set(name, namespace);
      }),
    );
  }
}

/**
 * The names of namespaces to create. An `rlns_` id that matches nothing is 404, never a new namespace of that
 * name: ids are made by keygate, and another workspace's id must not quietly become a namespace here.
 */
export function missingNames(resolved: Map<string, ResolvedNamespace | null>): string[] {
  const missing: string[] = [];
  for (const [name, namespace] of resolved) if (namespace === null) missing.push(name);
  const unknownId = missing.find((name) => name.startsWith("rlns_"));
  if (unknownId !== undefined) throw namespaceNotFound(unknownId);
  return missing;
}

/** Each request with its namespace's override applied (the override replaces limit and duration); 410 for deleted namespaces. */
export function applyOverrides(requests: readonly LimitRequest[], resolved: Map<string, ResolvedNamespace>): NamespaceLimitCheck[] {
  return requests.map((request): NamespaceLimitCheck => {
    const { namespace, overrides } = resolved.get(request.namespace) as ResolvedNamespace;
    if (namespace.deletedAt !== undefined) {
      throw new KeygateError(
        "err:unkey:data:ratelimit_namespace_gone",
        `The rate limit namespace '${request.namespace}' has been deleted.`,
      );
    }
    const override = overrides.match(request.identifier);
    const limit: NamespaceLimitCheck = {
      kind: "namespace",
      name: request.namespace,
      namespaceId: namespace.id,
      identifier: request.identifier,
      check: {
        bucket: namespaceBucket(namespace.id, request.identifier),
        limit: override ? override.limit : request.limit,
        durationMs: override ? override.durationMs : request.durationMs,
        cost: request.cost ?? 1,
      },
    };
    if (override) limit.overrideId = override.id;
    return limit;
  });
}

export function namespaceNotFound(nameOrId: string): KeygateError {
  return new KeygateError("err:unkey:data:ratelimit_namespace_not_found", `The rate limit namespace '${nameOrId}' does not exist.`);
}
