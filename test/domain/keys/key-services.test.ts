import { randomBytes } from "node:crypto";
import t from "tap";
import type { CreditRefundEvent } from "../../../src/domain/analytics/events.js";
import { ApiService } from "../../../src/domain/apis/api-service.js";
import type { Caller } from "../../../src/domain/caller.js";
import { IdentityService } from "../../../src/domain/identities/identity-service.js";
import type { CacheInvalidator } from "../../../src/domain/invalidation.js";
import { KeyAccessService } from "../../../src/domain/keys/key-access-service.js";
import { generateKey } from "../../../src/domain/keys/key-material.js";
import { KeySecrets } from "../../../src/domain/keys/key-secrets.js";
import { KeyService } from "../../../src/domain/keys/key-service.js";
import { LiveKeys } from "../../../src/domain/keys/live-keys.js";
import { RbacService } from "../../../src/domain/rbac/rbac-service.js";
import { RootKeyService } from "../../../src/domain/root-keys/root-key-service.js";
import { KeygateError } from "../../../src/errors/keygate-error.js";
import { defined } from "../../../src/lib/defined.js";
import { hashKey } from "../../../src/lib/hash.js";
import { Vault } from "../../../src/lib/vault.js";
import { createMemoryStores } from "../../../src/storage/index.js";
import type { KeyStore } from "../../../src/storage/interfaces.js";
import { ManualClock } from "../../helpers/clock.js";

// KeyService and KeyAccessService on memory stores with a clock that moves only when told: no HTTP, no Fastify.

const ROOT_KEY = "root_unit_all_permissions";
const MINUTE = 60_000;

/** The key services of one workspace, the invalidations they announce, and a caller holding `*`. */
async function keyDomain(options: { vault?: boolean; keyStore?: (store: KeyStore) => KeyStore; refunds?: CreditRefundEvent[] } = {}) {
  const clock = new ManualClock();
  const stores = createMemoryStores({ clock });
  const keyStore = options.keyStore ? options.keyStore(stores.keys) : stores.keys;
  const changed: string[] = [];
  const invalidator: CacheInvalidator = {
    keyChanged: async (workspaceId, hash) => void changed.push(`${workspaceId}/${hash}`),
    keysChanged: async (workspaceId, hashes) => void changed.push(...hashes.map((hash) => `${workspaceId}/${hash}`)),
    workspaceChanged: async () => {},
    rootKeyChanged: async () => {},
  };
  const apis = new ApiService(stores.apis, invalidator, clock);
  const rbac = new RbacService(stores.permissions, stores.roles, invalidator, clock);
  const identities = new IdentityService(stores.identities, invalidator, clock);
  const live = new LiveKeys(keyStore, apis);
  const secrets = new KeySecrets(options.vault ? new Vault(randomBytes(32).toString("base64")) : undefined);
  const refunds = options.refunds && { record: (event: CreditRefundEvent) => void options.refunds?.push(event) };
  const keys = new KeyService({
    keys: keyStore,
    live,
    apis,
    rbac,
    identities,
    secrets,
    invalidator,
    clock,
    generateKey,
    ...defined({ refunds }),
  });
  const access = new KeyAccessService({ keys: keyStore, live, rbac, invalidator, clock, identities });
  const rootKeys = new RootKeyService(stores.rootKeys, invalidator, clock, [{ key: ROOT_KEY, workspaceId: "ws_unit", permissions: ["*"] }]);
  const caller: Caller = await rootKeys.authenticate(ROOT_KEY);
  const { apiId } = await apis.createApi(caller, { name: "unit-api" });
  return { clock, keys, access, rbac, caller, apiId, changed };
}

const newKey = { byteLength: 16, enabled: true, recoverable: false };

/** The catalogue code a call fails with. */
async function codeOf(work: Promise<unknown>): Promise<string> {
  try {
    await work;
  } catch (error) {
    if (error instanceof KeygateError) return error.code;
    throw error;
  }
  throw new Error("expected the call to fail");
}

t.test("createKey stores the key with its settings at the clock's time, announces it, and getKey shows it", async (t) => {
  const { keys, caller, apiId, clock, changed } = await keyDomain();
  const created = await keys.createKey(caller, {
    ...newKey,
    apiId,
    prefix: "unit",
    name: "first",
    meta: { plan: "pro" },
    credits: { remaining: 10 },
  });
  t.match(created.key, /^unit_/);
  t.same(changed, [`ws_unit/${hashKey(created.key)}`], "the new key's hash is announced to the caches");
  const details = await keys.getKey(caller, { keyId: created.keyId, decrypt: false });
  t.equal(details.createdAt, clock.now());
  t.equal(details.name, "first");
  t.same(details.meta, { plan: "pro" });
  t.same(details.credits, { remaining: 10 });
  t.equal(details.plaintext, undefined);
  t.same((await keys.whoami(caller, { key: created.key })).keyId, created.keyId);
});

t.test("updateKey: null clears a field, a value sets it, an omitted field stays; the time is the clock's", async (t) => {
  const { keys, caller, apiId, clock } = await keyDomain();
  const { keyId } = await keys.createKey(caller, { ...newKey, apiId, name: "before", meta: { a: 1 }, expires: clock.now() + 10 * MINUTE });
  clock.advance(5_000);
  await keys.updateKey(caller, { keyId, name: null, enabled: false });
  const details = await keys.getKey(caller, { keyId, decrypt: false });
  t.equal(details.name, undefined);
  t.equal(details.enabled, false);
  t.same(details.meta, { a: 1 });
  t.equal(details.updatedAt, clock.now());
});

t.test("rerollKey: a new key with the old one's settings; the old one expires at the next whole minute after the grace", async (t) => {
  const { keys, caller, apiId, clock } = await keyDomain();
  const old = await keys.createKey(caller, { ...newKey, apiId, name: "rolled", credits: { remaining: 7 } });
  clock.advance(1_000);
  const rolled = await keys.rerollKey(caller, { keyId: old.keyId, expiration: 90_000 });
  t.not(rolled.key, old.key);
  const fresh = await keys.getKey(caller, { keyId: rolled.keyId, decrypt: false });
  t.equal(fresh.name, "rolled");
  t.same(fresh.credits, { remaining: 7 });
  const expires = (await keys.getKey(caller, { keyId: old.keyId, decrypt: false })).expires as number;
  t.equal(expires, Math.ceil((clock.now() + 90_000) / MINUTE) * MINUTE);
  t.equal(expires % MINUTE, 0);
});

t.test("deleteKey: a soft-deleted key is gone for the API; a permanent delete removes it for good", async (t) => {
  const { keys, caller, apiId } = await keyDomain();
  const soft = await keys.createKey(caller, { ...newKey, apiId });
  await keys.deleteKey(caller, { keyId: soft.keyId, permanent: false });
  t.equal(await codeOf(keys.getKey(caller, { keyId: soft.keyId, decrypt: false })), "err:unkey:data:key_not_found");
  t.equal(
    await codeOf(keys.deleteKey(caller, { keyId: soft.keyId, permanent: false })),
    "err:unkey:data:key_not_found",
    "deleting twice is a 404",
  );
  const hard = await keys.createKey(caller, { ...newKey, apiId });
  await keys.deleteKey(caller, { keyId: hard.keyId, permanent: true });
  t.equal(await codeOf(keys.whoami(caller, { key: hard.key })), "err:unkey:data:key_not_found");
});

t.test("recoverable keys need a vault: refused with precondition_failed without one, decrypted with one", async (t) => {
  const without = await keyDomain();
  t.equal(
    await codeOf(without.keys.createKey(without.caller, { ...newKey, apiId: without.apiId, recoverable: true })),
    "err:unkey:application:precondition_failed",
  );
  const withVault = await keyDomain({ vault: true });
  const { keyId, key } = await withVault.keys.createKey(withVault.caller, { ...newKey, apiId: withVault.apiId, recoverable: true });
  t.equal((await withVault.keys.getKey(withVault.caller, { keyId, decrypt: true })).plaintext, key);
  t.equal((await withVault.keys.getKey(withVault.caller, { keyId, decrypt: false })).plaintext, undefined);
});

t.test("an id collision in the store fails with a catalogue code, never a plain Error", async (t) => {
  const collides = (store: KeyStore): KeyStore =>
    new Proxy(store, { get: (target, name, receiver) => (name === "create" ? async () => false : Reflect.get(target, name, receiver)) });
  const { keys, caller, apiId } = await keyDomain({ keyStore: collides });
  t.equal(await codeOf(keys.createKey(caller, { ...newKey, apiId })), "err:unkey:application:unexpected_error");
});

t.test("KeyAccessService: permissions and roles are added, removed and set, each change announced", async (t) => {
  const { keys, access, rbac, caller, apiId, changed } = await keyDomain();
  const { keyId } = await keys.createKey(caller, { ...newKey, apiId });
  await rbac.createPermission(caller, { name: "read", slug: "docs.read" });
  await rbac.createPermission(caller, { name: "write", slug: "docs.write" });
  await rbac.createRole(caller, { name: "editor", permissions: ["docs.write"] });
  const before = changed.length;

  t.same((await access.addPermissions(caller, { keyId, permissions: ["docs.read", "docs.write"] })).map((p) => p.slug).sort(), [
    "docs.read",
    "docs.write",
  ]);
  t.same(
    (await access.removePermissions(caller, { keyId, permissions: ["docs.write"] })).map((p) => p.slug),
    ["docs.read"],
  );
  t.same(
    (await access.setPermissions(caller, { keyId, permissions: [] })).map((p) => p.slug),
    [],
  );
  t.same(
    (await access.addRoles(caller, { keyId, roles: ["editor"] })).map((r) => r.name),
    ["editor"],
  );
  t.same(
    (await access.setRoles(caller, { keyId, roles: [] })).map((r) => r.name),
    [],
  );
  t.equal(changed.length - before, 5, "every change invalidates the key");
  t.equal(await codeOf(access.addRoles(caller, { keyId, roles: ["no-such-role"] })), "err:unkey:data:role_not_found");
  t.equal(await codeOf(access.addRoles(caller, { keyId: "key_absent", roles: ["editor"] })), "err:unkey:data:key_not_found");
});

t.test("refundCredits gives the credits back and records the refund; a key without a balance gets nothing, and no record", async (t) => {
  const refunds: CreditRefundEvent[] = [];
  const { keys, caller, apiId, clock } = await keyDomain({ refunds });
  const metered = await keys.createKey(caller, { ...newKey, apiId, credits: { remaining: 10 } });
  const unlimited = await keys.createKey(caller, { ...newKey, apiId });
  const removed = await keys.createKey(caller, { ...newKey, apiId, credits: { remaining: 10 } });
  await keys.deleteKey(caller, { keyId: removed.keyId, permanent: true });
  const refund = (keyId: string) => ({
    requestId: `req_${keyId}`,
    time: clock.now(),
    workspaceId: "ws_unit",
    keySpaceId: "ks_unit",
    keyId,
    identityId: "",
    externalId: "",
    credits: 3,
    creditsSource: "key" as const,
  });
  clock.advance(MINUTE);
  for (const { keyId } of [metered, unlimited, removed]) await keys.refundCredits(refund(keyId));
  t.same((await keys.getKey(caller, { keyId: metered.keyId, decrypt: false })).credits, { remaining: 13 }, "the balance got them back");
  t.same(refunds, [{ ...refund(metered.keyId), refundedAt: clock.now() }], "only the refund given back is recorded, with when");
});
