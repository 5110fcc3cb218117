/**
 * Every Redis key keygate uses is built here. Records of a workspace carry the workspace id as the hash tag
 * (`{ws_…}`), so a script or transaction touching several of them stays in one Cluster slot. Root keys and the
 * API→workspace index are looked up before the workspace is known, so they have their own fixed tags.
 */
export type RedisKeys = ReturnType<typeof createRedisKeys>;

export function createRedisKeys(prefix: string) {
  const workspace = (workspaceId: string): string => `${prefix}:{${workspaceId}}`;
  return {
    prefix,
    rootKeyByHash: (hash: string) => `${prefix}:{rootkeys}:hash:${hash}`,
    rootKeyHashById: (id: string) => `${prefix}:{rootkeys}:id:${id}`,
    rootKeyIds: () => `${prefix}:{rootkeys}:ids`,

    /** A dashboard session is looked up by its id alone, one key per operation: its own tag per session. */
    dashboardSession: (id: string) => `${prefix}:{dashboard-session:${id}}`,
    /** Every portal, one value (portals span workspaces: a slug is unique on the instance). */
    portals: () => `${prefix}:{portals}:all`,
    /** A portal code and its redemption marker share the code's tag; a session has its own. */
    portalCode: (hash: string) => `${prefix}:{portal-code:${hash}}`,
    portalCodeRedeemed: (hash: string) => `${prefix}:{portal-code:${hash}}:redeemed`,
    portalSession: (hash: string) => `${prefix}:{portal-session:${hash}}`,

    apiWorkspace: (apiId: string) => `${prefix}:{apis}:ws:${apiId}`,
    api: (workspaceId: string, apiId: string) => `${workspace(workspaceId)}:api:${apiId}`,
    /** Sorted set of the workspace's API ids (every API created since the index exists), written with the record. */
    apiIds: (workspaceId: string) => `${workspace(workspaceId)}:api-ids`,
    /** Set once apiIds holds every API of the workspace, those created before it existed included. */
    apiIdsWhole: (workspaceId: string) => `${workspace(workspaceId)}:api-ids-whole`,

    /**
     * A key in compact form (key-record.ts): its record in the bucket of its hash (a Redis hash: field the key's
     * hash, value the record), and its hash in the bucket of its id (recordBucket, hashBucket).
     */
    keyRecords: (workspaceId: string, bucket: string) => `${workspace(workspaceId)}:kh:${bucket}`,
    keyHashes: (workspaceId: string, bucket: string) => `${workspace(workspaceId)}:ki:${bucket}`,
    /** A key as written before the compact form (a JSON record, and its hash → id): still read, moved when written. */
    key: (workspaceId: string, keyId: string) => `${workspace(workspaceId)}:key:${keyId}`,
    keyCredits: (workspaceId: string, keyId: string) => `${workspace(workspaceId)}:key-credits:${keyId}`,
    /** The earlier form's hash → key id (see `key`). */
    keyIdByHash: (workspaceId: string, hash: string) => `${workspace(workspaceId)}:key-hash:${hash}`,
    liveKeysOfApi: (workspaceId: string, apiId: string) => `${workspace(workspaceId)}:api-keys:${apiId}`,
    liveKeysOfIdentity: (workspaceId: string, apiId: string, identityId: string) =>
      `${workspace(workspaceId)}:api-identity-keys:${apiId}:${identityId}`,

    permission: (workspaceId: string, id: string) => `${workspace(workspaceId)}:permission:${id}`,
    permissionIdBySlug: (workspaceId: string, slug: string) => `${workspace(workspaceId)}:permission-slug:${slug}`,
    permissionIds: (workspaceId: string) => `${workspace(workspaceId)}:permissions`,

    role: (workspaceId: string, id: string) => `${workspace(workspaceId)}:role:${id}`,
    /** Role names are unique regardless of case, so the index holds the lower-cased name. */
    roleIdByName: (workspaceId: string, name: string) => `${workspace(workspaceId)}:role-name:${name.toLowerCase()}`,
    roleIds: (workspaceId: string) => `${workspace(workspaceId)}:roles`,

    identity: (workspaceId: string, id: string) => `${workspace(workspaceId)}:identity:${id}`,
    liveIdentityIdByExternalId: (workspaceId: string, externalId: string) => `${workspace(workspaceId)}:identity-external:${externalId}`,
    liveIdentityIds: (workspaceId: string) => `${workspace(workspaceId)}:identities`,
    /** An identity's credit balance, shared by its keys without one of their own (same tag as keyCredits: one slot). */
    identityCredits: (workspaceId: string, identityId: string) => `${workspace(workspaceId)}:identity-credits:${identityId}`,
    // Rate limit namespaces and overrides. Names, identifiers and buckets may hold any character, so each is the
    // last part of its key, after parts that cannot contain ':'.
    ratelimitNamespace: (workspaceId: string, namespaceId: string) => `${workspace(workspaceId)}:rlns:${namespaceId}`,
    ratelimitNamespaceByName: (workspaceId: string, name: string) => `${workspace(workspaceId)}:rlns-name:${name}`,
    ratelimitNamespaceIds: (workspaceId: string) => `${workspace(workspaceId)}:rlns-ids`,
    ratelimitOverride: (workspaceId: string, namespaceId: string, overrideId: string) =>
      `${workspace(workspaceId)}:rlor:${namespaceId}:${overrideId}`,
    ratelimitOverrideByIdentifier: (workspaceId: string, namespaceId: string, identifier: string) =>
      `${workspace(workspaceId)}:rlor-ident:${namespaceId}:${identifier}`,
    ratelimitOverrideIds: (workspaceId: string, namespaceId: string) => `${workspace(workspaceId)}:rlor-ids:${namespaceId}`,
    /** Changes whenever an override of the namespace is set or deleted (see RatelimitNamespaceStore.namespaceState). */
    ratelimitOverridesVersion: (workspaceId: string, namespaceId: string) => `${workspace(workspaceId)}:rlor-version:${namespaceId}`,
    /** One sliding-window counter (a hash, always with a TTL): see lua/ratelimit.lua. */
    ratelimitWindow: (workspaceId: string, limit: number, durationMs: number, bucket: string) =>
      `${workspace(workspaceId)}:rlw:${limit}:${durationMs}:${bucket}`,
    /** What one rate limit script execution took from credit balances, or that it must not run (lua/ratelimit.lua). */
    creditReceipt: (workspaceId: string, executionId: string) => `${workspace(workspaceId)}:credit-receipt:${executionId}`,
    /** key space id → API id, written with the API record (same hash tag). */
    apiByKeySpace: (workspaceId: string, keySpaceId: string) => `${workspace(workspaceId)}:keyspace:${keySpaceId}`,
    /** The gateway's stored routes (one JSON table), its version and each route's OpenAPI document: one tag, one slot. */
    routeTable: () => `${prefix}:{routes}:table`,
    routeTableVersion: () => `${prefix}:{routes}:version`,
    routeOpenApi: (routeId: string) => `${prefix}:{routes}:openapi:${routeId}`,
    /** Hash of one analytics quota window: fields `queries` and `executionMs`; expires after the window. */
    analyticsQuota: (workspaceId: string, windowStart: number) => `${workspace(workspaceId)}:analytics-quota:${windowStart}`,
    webhook: (workspaceId: string, id: string) => `${workspace(workspaceId)}:webhook:${id}`,
    webhookIds: (workspaceId: string) => `${workspace(workspaceId)}:webhook-ids`,
    webhookDelivery: (workspaceId: string, id: string) => `${workspace(workspaceId)}:webhook-delivery:${id}`,
    /** Sorted set of an endpoint's delivery ids, scored by creation time. */
    webhookLog: (workspaceId: string, endpointId: string) => `${workspace(workspaceId)}:webhook-log:${endpointId}`,
    /** A once-only claim (a rate limit exceeded in a window, a key's expiry announced); the name may hold anything. */
    webhookClaim: (workspaceId: string, name: string) => `${workspace(workspaceId)}:webhook-claim:${name}`,
    /** Set of the workspaces with endpoints, for the expiring-key scan. */
    webhookWorkspaces: () => `${prefix}:{webhooks}:workspaces`,
    /** The outbox: a stream per endpoint, the due queues and their leases share one tag so a script sees them all. */
    webhookQueue: (endpointId: string) => `${prefix}:{webhooks}:queue:${endpointId}`,
    webhookDue: () => `${prefix}:{webhooks}:due`,
    webhookLease: (endpointId: string) => `${prefix}:{webhooks}:lease:${endpointId}`,
    /** The audit outbox: one stream of entries waiting for the analytics engine (storage/redis/audit-outbox.ts). */
    auditOutbox: () => `${prefix}:{audit}:outbox`,
    /** Usage reports: the producer's lease, each endpoint's progress, what each period reported; one tag, one script. */
    usageReportLease: () => `${prefix}:{usage-reports}:lease`,
    usageReportProgress: () => `${prefix}:{usage-reports}:progress`,
    usageReported: (endpointId: string, periodStart: number) => `${prefix}:{usage-reports}:reported:${endpointId}:${periodStart}`,
  };
}
