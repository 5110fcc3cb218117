import { invalidAt, KeygateError } from "../../errors/keygate-error.js";
import type { Clock } from "../../lib/clock.js";
import { defined } from "../../lib/defined.js";
import { newId } from "../../lib/ids.js";
import type { ApiStore } from "../../storage/interfaces.js";
import type { PortalStore } from "../../storage/portal-interfaces.js";
import type { PortalKeyDefaults, PortalMapping, PortalRecord } from "../../storage/portal-records.js";
import type { RouteStore } from "../../storage/route-interfaces.js";
import { type AuditTrail, changesOf, removed, UNAUDITED } from "../audit/audit-trail.js";
import type { Caller } from "../caller.js";
import { requirePortal } from "../root-keys/permissions.js";

/** A portal as the API shows it. */
export interface PortalView {
  portalId: string;
  slug: string;
  displayName: string;
  mapping: PortalMapping;
  enabled: boolean;
  logoUrl?: string;
  primaryColor?: string;
  keyDefaults?: PortalKeyDefaults;
  createdAt: number;
  updatedAt?: number;
}

export interface CreatePortalInput {
  slug: string;
  displayName: string;
  mapping: PortalMapping;
  enabled: boolean;
  logoUrl?: string;
  primaryColor?: string;
  keyDefaults?: PortalKeyDefaults;
}

/** updatePortal: an omitted field stays, null clears an optional one, a value sets it. */
export interface UpdatePortalInput {
  portal: string;
  slug?: string;
  displayName?: string;
  mapping?: PortalMapping;
  enabled?: boolean;
  logoUrl?: string | null;
  primaryColor?: string | null;
  keyDefaults?: PortalKeyDefaults | null;
}

/**
 * The portal.*Portal procedures: portals as records of a workspace, each serving the keys of one mapping (an API,
 * or the APIs a gateway route's keyauth policies accept). A slug is unique on the instance (the pages live at
 * /portal/<slug>) and a mapping has at most one portal in its workspace. Changing the mapping, or deleting the
 * portal, ends its codes and sessions: they carry the portal's epoch, which moves on.
 */
export class PortalService {
  private readonly store: PortalStore;
  private readonly apis: ApiStore;
  private readonly routes: RouteStore;
  private readonly clock: Clock;

  private readonly audit: AuditTrail;

  constructor(options: { store: PortalStore; apis: ApiStore; routes: RouteStore; clock: Clock; audit?: AuditTrail }) {
    this.store = options.store;
    this.apis = options.apis;
    this.routes = options.routes;
    this.clock = options.clock;
    this.audit = options.audit ?? UNAUDITED;
  }

  async createPortal(caller: Caller, input: CreatePortalInput): Promise<{ portalId: string }> {
    caller.authorize(requirePortal("create_portal"));
    checkWebUrl(input.logoUrl, "body.logoUrl");
    await this.apisOf(caller.workspaceId, input.mapping);
    const now = this.clock.now();
    const record: PortalRecord = {
      id: newId("pc", now),
      workspaceId: caller.workspaceId,
      slug: input.slug,
      displayName: input.displayName,
      mapping: { type: input.mapping.type, id: input.mapping.id },
      enabled: input.enabled,
      ...defined({ logoUrl: input.logoUrl, primaryColor: input.primaryColor, keyDefaults: input.keyDefaults }),
      epoch: 0,
      createdAt: now,
    };
    await this.store.update((portals) => {
      checkUnique(portals, record);
      return { portals: [...portals, record], result: undefined };
    });
    this.audit.record(caller, {
      action: "portal.create",
      description: `Created portal ${record.slug}`,
      resources: [{ type: "portal", id: record.id }],
      changes: changesOf({}, { ...viewPortal(record) }, PORTAL_FIELDS),
    });
    return { portalId: record.id };
  }

  async getPortal(caller: Caller, input: { portal: string }): Promise<PortalView> {
    const portal = await this.find(caller.workspaceId, input.portal);
    caller.authorize(requirePortal("read_portal", portal.id));
    return viewPortal(portal);
  }

  /** The portals the caller may read (keygate's own, for the dashboard). */
  async listPortals(caller: Caller): Promise<PortalView[]> {
    const portals = (await this.store.all()).filter((portal) => portal.workspaceId === caller.workspaceId);
    return portals.filter((portal) => caller.can(requirePortal("read_portal", portal.id))).map(viewPortal);
  }

  async updatePortal(caller: Caller, input: UpdatePortalInput): Promise<PortalView> {
    const found = await this.find(caller.workspaceId, input.portal);
    caller.authorize(requirePortal("update_portal", found.id));
    checkWebUrl(input.logoUrl, "body.logoUrl");
    if (input.mapping) await this.apisOf(caller.workspaceId, input.mapping);
    const now = this.clock.now();
    const updated = await this.store.update((portals) => {
      const index = portals.findIndex((portal) => portal.id === found.id);
      const current = portals[index];
      if (!current) throw portalNotFound(input.portal);
      const next: PortalRecord = { ...current, updatedAt: now };
      if (input.slug !== undefined) next.slug = input.slug;
      if (input.displayName !== undefined) next.displayName = input.displayName;
      if (input.enabled !== undefined) next.enabled = input.enabled;
      if (input.mapping && (input.mapping.type !== current.mapping.type || input.mapping.id !== current.mapping.id)) {
        next.mapping = { type: input.mapping.type, id: input.mapping.id };
        next.epoch = current.epoch + 1;
      }
      setOrClear(next, "logoUrl", input.logoUrl);
      setOrClear(next, "primaryColor", input.primaryColor);
      setOrClear(next, "keyDefaults", input.keyDefaults);
      checkUnique(
        portals.filter((portal) => portal.id !== current.id),
        next,
      );
      portals[index] = next;
      return { portals, result: viewPortal(next) };
    });
    this.audit.record(caller, {
      action: "portal.update",
      description: `Updated portal ${updated.slug}`,
      resources: [{ type: "portal", id: found.id }],
      changes: changesOf({ ...viewPortal(found) }, { ...updated }, PORTAL_FIELDS),
    });
    return updated;
  }

  async deletePortal(caller: Caller, input: { portal: string }): Promise<void> {
    const found = await this.find(caller.workspaceId, input.portal);
    caller.authorize(requirePortal("delete_portal", found.id));
    await this.store.update((portals) => ({ portals: portals.filter((portal) => portal.id !== found.id), result: undefined }));
    this.audit.record(caller, {
      action: "portal.delete",
      description: `Deleted portal ${found.slug}`,
      resources: [{ type: "portal", id: found.id }],
      changes: removed({ slug: found.slug, mapping: found.mapping }),
    });
  }

  /** The workspace's portal with this id or slug (404 otherwise). */
  async find(workspaceId: string, portal: string): Promise<PortalRecord> {
    const found = (await this.store.all()).find(
      (candidate) => candidate.workspaceId === workspaceId && (candidate.id === portal || candidate.slug === portal),
    );
    if (!found) throw portalNotFound(portal);
    return found;
  }

  /** The portal at /portal/<slug>, whatever its workspace; null when there is none. */
  async bySlug(slug: string): Promise<PortalRecord | null> {
    return (await this.store.all()).find((portal) => portal.slug === slug) ?? null;
  }

  /** The portal with this id, as it is now; null once deleted. */
  async current(workspaceId: string, portalId: string): Promise<PortalRecord | null> {
    return (await this.store.all()).find((portal) => portal.workspaceId === workspaceId && portal.id === portalId) ?? null;
  }

  /**
   * The live APIs a mapping stands for: the API itself, or those the route's keyauth policies accept (by API id or
   * key space id). 404 for an API or route that does not exist in the workspace.
   */
  async apisOf(workspaceId: string, mapping: PortalMapping): Promise<string[]> {
    if (mapping.type === "keyspace") {
      const api = await this.apis.get(workspaceId, mapping.id);
      if (!api || api.deletedAt !== undefined)
        throw new KeygateError("err:unkey:data:api_not_found", `The API '${mapping.id}' does not exist.`);
      return [api.id];
    }
    const route = (await this.routes.table()).routes.find(
      (candidate) => candidate.workspaceId === workspaceId && (candidate.id === mapping.id || candidate.name === mapping.id),
    );
    if (!route) throw new KeygateError("err:keygate:data:route_not_found", `The route '${mapping.id}' does not exist.`);
    const apiIds = new Set<string>();
    for (const keyspace of route.policies.flatMap((policy) => policy.keyauth?.keyspaces ?? [])) {
      const api = keyspace.startsWith("ks_")
        ? await this.apis.findByKeySpace(workspaceId, keyspace)
        : await this.apis.get(workspaceId, keyspace);
      if (api && api.deletedAt === undefined) apiIds.add(api.id);
    }
    return [...apiIds];
  }
}

/** A portal's fields as the audit log records their changes. */
const PORTAL_FIELDS = ["slug", "displayName", "mapping", "enabled", "logoUrl", "primaryColor", "keyDefaults"];

export function viewPortal(portal: PortalRecord): PortalView {
  return {
    portalId: portal.id,
    slug: portal.slug,
    displayName: portal.displayName,
    mapping: portal.mapping,
    enabled: portal.enabled,
    ...defined({ logoUrl: portal.logoUrl, primaryColor: portal.primaryColor, keyDefaults: portal.keyDefaults }),
    createdAt: portal.createdAt,
    ...defined({ updatedAt: portal.updatedAt }),
  };
}

export function portalNotFound(portal: string): KeygateError {
  return new KeygateError("err:unkey:data:portal_not_found", `The portal '${portal}' does not exist.`);
}

/** 409 when another portal has the slug, or serves the same mapping in the workspace. */
function checkUnique(others: readonly PortalRecord[], portal: PortalRecord): void {
  if (others.some((other) => other.slug === portal.slug))
    throw new KeygateError("err:keygate:data:portal_conflict", `Another portal has the slug '${portal.slug}'.`);
  const same = others.find(
    (other) =>
      other.workspaceId === portal.workspaceId && other.mapping.type === portal.mapping.type && other.mapping.id === portal.mapping.id,
  );
  if (same)
    throw new KeygateError(
      "err:keygate:data:portal_conflict",
      `The portal '${same.slug}' already serves ${portal.mapping.type} '${portal.mapping.id}'; one portal per mapping.`,
    );
}

function setOrClear<K extends "logoUrl" | "primaryColor" | "keyDefaults">(
  record: PortalRecord,
  field: K,
  value: PortalRecord[K] | null | undefined,
): void {
  if (value === null) delete record[field];
  else if (value !== undefined) record[field] = value;
}

/** 400 unless `url` is an absolute http(s) URL (a logo, a link back): nothing else may reach a portal's page. */
export function checkWebUrl(url: string | null | undefined, location: string): void {
  if (url === null || url === undefined) return;
  let parsed: URL | undefined;
  try {
    parsed = new URL(url);
  } catch {
    parsed = undefined;
  }
  if (!parsed || (parsed.protocol !== "https:" && parsed.protocol !== "http:") || /[\s"'<>]/.test(url))
    throw invalidAt(location, "must be an absolute http(s) URL");
}
