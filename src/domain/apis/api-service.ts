import { invalidInput, KeygateError } from "../../errors/keygate-error.js";
import type { Clock } from "../../lib/clock.js";
import { defined } from "../../lib/defined.js";
import { newId } from "../../lib/ids.js";
import { ipEntryProblem } from "../../lib/ip-allowlist.js";
import type { ApiStore } from "../../storage/interfaces.js";
import type { ApiRecord } from "../../storage/records.js";
import { type AuditTrail, changesOf, created, UNAUDITED } from "../audit/audit-trail.js";
import type { Caller } from "../caller.js";
import type { CacheInvalidator } from "../invalidation.js";
import { requireApi } from "../root-keys/permissions.js";

export interface DeclaredApi {
  id: string;
  name: string;
  workspaceId: string;
  deleteProtection: boolean;
  /** When given, replaces the API's allowlist at every start-up ([] removes it); when absent, the API's stays. */
  ipAllowlist?: readonly string[];
}

/** APIs group keys: each has one key space (`ks_…`); keys of one API cannot be used for another. */
export class ApiService {
  private readonly apis: ApiStore;
  private readonly invalidator: CacheInvalidator;
  private readonly clock: Clock;
  private readonly audit: AuditTrail;

  constructor(apis: ApiStore, invalidator: CacheInvalidator, clock: Clock, audit: AuditTrail = UNAUDITED) {
    this.apis = apis;
    this.invalidator = invalidator;
    this.clock = clock;
    this.audit = audit;
  }

  async createApi(caller: Caller, input: { name: string }): Promise<{ apiId: string }> {
    caller.authorize(requireApi("create_api"));
    const now = this.clock.now();
    const api: ApiRecord = {
      id: newId("api", now),
      workspaceId: caller.workspaceId,
      name: input.name,
      keySpaceId: newId("ks", now),
      createdAt: now,
      deleteProtection: false,
    };
    if (!(await this.apis.create(api))) throw new Error("API id collision; try again");
    this.audit.record(caller, {
      action: "api.create",
      description: `Created API ${api.id} (${api.name})`,
      resources: [{ type: "api", id: api.id }],
      changes: created({ name: api.name }),
    });
    return { apiId: api.id };
  }

  async getApi(caller: Caller, input: { apiId: string }): Promise<{ id: string; name: string }> {
    caller.authorize(requireApi("read_api", input.apiId));
    const api = await this.findLive(caller.workspaceId, input.apiId);
    return { id: api.id, name: api.name };
  }

  /** The live APIs of the workspace the caller may read (`api.*.read_api`, or `api.<id>.read_api` for each). */
  async listApis(caller: Caller): Promise<{ id: string; name: string; keySpaceId: string }[]> {
    if (!caller.can(requireApi("read_api")) && caller.namedResourceIds("api").length === 0) caller.authorize(requireApi("read_api"));
    return (await this.apis.list(caller.workspaceId))
      .filter((api) => api.deletedAt === undefined && caller.can(requireApi("read_api", api.id)))
      .map((api) => ({ id: api.id, name: api.name, keySpaceId: api.keySpaceId }));
  }

  async deleteApi(caller: Caller, input: { apiId: string }): Promise<void> {
    caller.authorize(requireApi("delete_api", input.apiId));
    const api = await this.findLive(caller.workspaceId, input.apiId);
    if (api.deleteProtection) {
      throw new KeygateError(
        "err:unkey:application:protected_resource",
        `The API '${api.id}' has delete protection and cannot be deleted.`,
      );
    }
    // A concurrent delete may win the race; the loser reports 404, as a second delete would.
    if (!(await this.apis.markDeleted(caller.workspaceId, api.id, this.clock.now()))) throw apiNotFound(api.id);
    this.audit.record(caller, {
      action: "api.delete",
      description: `Deleted API ${api.id} (${api.name})`,
      resources: [{ type: "api", id: api.id }],
    });
    // Its keys verify as NOT_FOUND from now on, on every instance.
    await this.invalidator.workspaceChanged(caller.workspaceId);
  }

  /**
   * keygate.setApiIpAllowlist: the addresses and CIDR ranges keys of the API may be verified from; an empty list
   * lifts the restriction. Cached key views of the workspace are dropped, on every instance, so it applies at once.
   */
  async setIpAllowlist(caller: Caller, input: { apiId: string; ipAllowlist: string[] }): Promise<{ apiId: string; ipAllowlist: string[] }> {
    caller.authorize(requireApi("update_api", input.apiId));
    const problems = input.ipAllowlist.flatMap((entry, index) => {
      const problem = ipEntryProblem(entry);
      return problem === undefined ? [] : [{ location: `body.ipAllowlist[${index}]`, message: problem }];
    });
    if (problems.length > 0) throw invalidInput(problems);
    const before = await this.findLive(caller.workspaceId, input.apiId);
    const stored = await this.apis.setIpAllowlist(caller.workspaceId, input.apiId, normalisedAllowlist(input.ipAllowlist));
    if (!stored) throw apiNotFound(input.apiId);
    this.audit.record(caller, {
      action: "api.update",
      description: `Set the IP allowlist of API ${stored.id}`,
      resources: [{ type: "api", id: stored.id }],
      changes: changesOf({ ipAllowlist: before.ipAllowlist ?? [] }, { ipAllowlist: stored.ipAllowlist ?? [] }, ["ipAllowlist"]),
    });
    await this.invalidator.workspaceChanged(caller.workspaceId);
    return { apiId: stored.id, ipAllowlist: stored.ipAllowlist ?? [] };
  }

  /** keygate.getApiIpAllowlist: empty when keys of the API may be verified from anywhere. */
  async getIpAllowlist(caller: Caller, input: { apiId: string }): Promise<{ apiId: string; ipAllowlist: string[] }> {
    caller.authorize(requireApi("read_api", input.apiId));
    const api = await this.findLive(caller.workspaceId, input.apiId);
    return { apiId: api.id, ipAllowlist: api.ipAllowlist ?? [] };
  }

  /** The live API with this id in the workspace; null when absent, deleted or another workspace's. */
  async liveRecord(workspaceId: string, apiId: string): Promise<ApiRecord | null> {
    const api = await this.apis.get(workspaceId, apiId);
    return api && api.deletedAt === undefined ? api : null;
  }

  /**
   * The live API with this id in the workspace. Absent, deleted and other-workspace APIs are all 404, so a
   * caller cannot learn what exists elsewhere.
   */
  async findLive(workspaceId: string, apiId: string): Promise<ApiRecord> {
    const api = await this.apis.get(workspaceId, apiId);
    if (!api || api.deletedAt !== undefined) throw apiNotFound(apiId);
    return api;
  }

  /** Which workspace owns an API id, or null when no API has it (the gateway knows only the id). */
  workspaceOf(apiId: string): Promise<string | null> {
    return this.apis.workspaceOf(apiId);
  }

  /** Whether the API exists in the workspace and is not deleted (its keys are gone with it). */
  async isLive(workspaceId: string, apiId: string): Promise<boolean> {
    const api = await this.apis.get(workspaceId, apiId);
    return api !== null && api.deletedAt === undefined;
  }

  /** Whether a live API of the workspace has this id, or this key space id (`ks_…`). */
  async isLiveApiOrKeySpace(workspaceId: string, id: string): Promise<boolean> {
    if (!id.startsWith("ks_")) return this.isLive(workspaceId, id);
    const api = await this.apis.findByKeySpace(workspaceId, id);
    return api !== null && api.deletedAt === undefined;
  }

  /**
   * Creates an API declared in the configuration unless it exists. Idempotent across restarts and instances;
   * an id taken by another workspace is a configuration error.
   */
  async declare(declared: DeclaredApi): Promise<"created" | "exists"> {
    const owner = await this.apis.workspaceOf(declared.id);
    if (owner !== null && owner !== declared.workspaceId) {
      throw new Error(`apis: '${declared.id}' already belongs to workspace '${owner}', not '${declared.workspaceId}'`);
    }
    const allowlist = declared.ipAllowlist === undefined ? undefined : normalisedAllowlist(declared.ipAllowlist);
    if (owner !== null && (await this.apis.get(declared.workspaceId, declared.id))) {
      // The configuration is the operator's word: its allowlist replaces one set through the API meanwhile.
      if (allowlist !== undefined && (await this.apis.setIpAllowlist(declared.workspaceId, declared.id, allowlist))) {
        await this.invalidator.workspaceChanged(declared.workspaceId);
      }
      return "exists";
    }
    const now = this.clock.now();
    const created = await this.apis.create({
      id: declared.id,
      workspaceId: declared.workspaceId,
      name: declared.name,
      keySpaceId: newId("ks", now),
      createdAt: now,
      deleteProtection: declared.deleteProtection,
      ...defined({ ipAllowlist: allowlist ?? undefined }),
    });
    return created ? "created" : "exists";
  }
}

/** Entries without repeats, in the order given; null for an empty list (no restriction). */
function normalisedAllowlist(entries: readonly string[]): string[] | null {
  return entries.length === 0 ? null : [...new Set(entries)];
}

function apiNotFound(apiId: string): KeygateError {
  return new KeygateError("err:unkey:data:api_not_found", `The API '${apiId}' does not exist or has been deleted.`);
}
