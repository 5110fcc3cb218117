import { createHash } from "node:crypto";
import t from "tap";
import { ApiService } from "../../../src/domain/apis/api-service.js";
import { IdentityService } from "../../../src/domain/identities/identity-service.js";
import type { CacheInvalidator } from "../../../src/domain/invalidation.js";
import { KeyMigrationService } from "../../../src/domain/keys/key-migrations.js";
import { RbacService } from "../../../src/domain/rbac/rbac-service.js";
import { RootKeyService } from "../../../src/domain/root-keys/root-key-service.js";
import { hashKey } from "../../../src/lib/hash.js";
import { createMemoryStores } from "../../../src/storage/index.js";
import { ManualClock } from "../../helpers/clock.js";

// KeyMigrationService on memory stores with a clock that moves only when told.

const hex = (text: string) => createHash("sha256").update(text).digest("hex");

async function migrationDomain() {
  const clock = new ManualClock();
  const stores = createMemoryStores({ clock });
  const changed: string[] = [];
  const invalidator: CacheInvalidator = {
    keyChanged: async (_workspaceId, hash) => void changed.push(hash),
    keysChanged: async (_workspaceId, hashes) => void changed.push(...hashes),
    workspaceChanged: async () => {},
    rootKeyChanged: async () => {},
  };
  const apis = new ApiService(stores.apis, invalidator, clock);
  const migrations = new KeyMigrationService({
    keys: stores.keys,
    apis,
    rbac: new RbacService(stores.permissions, stores.roles, invalidator, clock),
    identities: new IdentityService(stores.identities, invalidator, clock),
    invalidator,
    clock,
    migrations: [
      { id: "hexes", workspaceId: "ws_unit", scheme: "sha256-hex" },
      { id: "seam", workspaceId: "ws_unit", scheme: "prefixed-api-key" },
    ],
  });
  const caller = new RootKeyService(stores.rootKeys, invalidator, clock, []).operator("ws_unit");
  const { apiId } = await apis.createApi(caller, { name: "unit-api" });
  return { clock, stores, migrations, caller, apiId, changed };
}

t.test("an import stores records as createKey would, at the clock's time, and announces native hashes", async (t) => {
  const { clock, stores, migrations, caller, apiId, changed } = await migrationDomain();
  clock.advance(5_000);
  const result = await migrations.migrateKeys(caller, {
    migrationId: "hexes",
    apiId,
    keys: [{ hash: hex("a"), enabled: true, name: "a", ratelimits: [{ name: "requests", limit: 5, duration: 60_000 }] }],
  });
  const keyId = result.migrated[0]?.keyId as string;
  const stored = await stores.keys.get("ws_unit", keyId);
  t.match(stored, { hash: hashKey("a"), start: "", name: "a", createdAt: clock.now(), byteLength: 16, enabled: true });
  t.notOk(stored && "pendingMigrationId" in stored, "a native hash is not pending");
  t.same(
    stored?.ratelimits.map((limit) => [limit.name, limit.limit, limit.durationMs, limit.autoApply]),
    [["requests", 5, 60_000, false]],
  );
  t.same(changed, [hashKey("a")], "an instance may remember the hash as unknown: it is told");
});

t.test("settle: once per pending key, for the right migration and API only", async (t) => {
  const { stores, migrations, caller, apiId, changed } = await migrationDomain();
  const token = "co_short_longtokenpart";
  const { migrated } = await migrations.migrateKeys(caller, {
    migrationId: "seam",
    apiId,
    keys: [{ hash: hex("longtokenpart"), enabled: true }],
  });
  const keyId = migrated[0]?.keyId as string;
  t.match(await stores.keys.get("ws_unit", keyId), { hash: hex("longtokenpart"), pendingMigrationId: "seam" });
  t.same(changed, [], "a pending key cannot be cached under a hash anyone verifies by");

  t.equal(await migrations.settle("ws_unit", "hexes", token), false, "another migration's scheme");
  t.equal(await migrations.settle("ws_other", "seam", token), false, "another workspace");
  t.equal(await migrations.settle("ws_unit", "seam", token, () => false), false, "a caller that may not verify the API");
  t.equal(await migrations.settle("ws_unit", "seam", "co_short_othertoken"), false, "another token");
  t.equal(await migrations.settle("ws_unit", "seam", "nounderscores"), false, "another shape");

  const settled = await Promise.all([migrations.settle("ws_unit", "seam", token), migrations.settle("ws_unit", "seam", token)]);
  t.same(settled, [true, true], "both concurrent first verifications find the key under its new hash");
  t.match(await stores.keys.get("ws_unit", keyId), { hash: hashKey(token), start: "co_shor" });
  t.same(changed, [hashKey(token)], "rewritten once, announced once");
  t.equal(await migrations.settle("ws_unit", "seam", token), false, "nothing left pending under the old hash");
});
