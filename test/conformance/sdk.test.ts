import { createHash, randomBytes } from "node:crypto";
import type { V2KeysCreateKeyRequestBody } from "@unkey/api/models/components";
import {
  APIError,
  BadRequestErrorResponse,
  ConflictErrorResponse,
  ForbiddenErrorResponse,
  NotFoundErrorResponse,
  PreconditionFailedErrorResponse,
  UnauthorizedErrorResponse,
  UnkeyError,
} from "@unkey/api/models/errors";
import t from "tap";
import { hashKey } from "../../src/lib/hash.js";
import { OTHER_ROOT_KEY, STORAGE_KINDS, type StorageKind, WORKSPACE } from "../helpers/harness.js";
import { asRecord, Coverage, KEY_RESPONSE_FIELDS, postRaw, rejectsWith, SDK_METHODS, type SdkApp, sdkApp, vaultKey } from "./helpers.js";

/**
 * Conformance through the official SDK: every management procedure is called with `@unkey/api` over real HTTP,
 * so each success is parsed by the SDK's own zod schemas and each failure must come back as the SDK's typed
 * error. A ResponseValidationError anywhere is a wire incompatibility and fails the test.
 */

/** 2099-01-01, inside the accepted range; a fixed instant keeps the assertions free of the clock. */
const FAR_FUTURE = Date.UTC(2099, 0, 1);
const HOUR = 3_600_000;
const MINUTE = 60_000;

const coverage = new Map<StorageKind, Coverage>();

/** A random part of a token, without underscores (prefixed tokens split on them). */
const randomTokenPart = () => randomBytes(12).toString("hex");

const sorted = (values: readonly string[] | undefined): string[] => [...(values ?? [])].sort();

/** Keys of a raw JSON object that the SDK's KeyResponseData does not know (it would silently drop them). */
function unknownKeyFields(value: unknown): string[] {
  return Object.keys(asRecord(value)).filter((field) => !KEY_RESPONSE_FIELDS.includes(field));
}

for (const storage of STORAGE_KINDS) {
  await t.test(`the @unkey/api SDK against keygate on ${storage} stores`, async (t) => {
    const sdk = new Coverage();
    coverage.set(storage, sdk);
    const app: SdkApp = await sdkApp(t, {
      storage,
      config: {
        vault: { key: vaultKey() },
        apis: [{ id: "api_protected", name: "protected", workspaceId: WORKSPACE, deleteProtection: true }],
        migrations: [
          { id: "sdk_hex", workspaceId: WORKSPACE, scheme: "sha256-hex" },
          { id: "sdk_prefixed", workspaceId: WORKSPACE, scheme: "prefixed-api-key" },
        ],
      },
    });
    const { unkey } = app;

    const newApi = async (name: string): Promise<string> =>
      (await sdk.call("apis.createApi", () => unkey.apis.createApi({ name }))).data.apiId;
    const createKey = async (request: V2KeysCreateKeyRequestBody) =>
      (await sdk.call("keys.createKey", () => unkey.keys.createKey(request))).data;
    const getKey = async (keyId: string, decrypt?: boolean) =>
      (await sdk.call("keys.getKey", () => unkey.keys.getKey({ keyId, ...(decrypt === undefined ? {} : { decrypt }) }))).data;

    await t.test("createApi, getApi and deleteApi answer bodies the SDK parses", async (t) => {
      const created = await sdk.call("apis.createApi", () => unkey.apis.createApi({ name: "conformance" }));
      t.match(created.data.apiId, /^api_/);
      t.match(created.meta.requestId, /^req_/);
      const read = await sdk.call("apis.getApi", () => unkey.apis.getApi({ apiId: created.data.apiId }));
      t.same(read.data, { id: created.data.apiId, name: "conformance" });
      t.match(read.meta.requestId, /^req_/);
      const deleted = await sdk.call("apis.deleteApi", () => unkey.apis.deleteApi({ apiId: created.data.apiId }));
      t.same(deleted.data, {});
      await rejectsWith(t, unkey.apis.getApi({ apiId: created.data.apiId }), NotFoundErrorResponse, 404, "getApi after deleteApi");
      await rejectsWith(t, unkey.apis.deleteApi({ apiId: created.data.apiId }), NotFoundErrorResponse, 404, "a second deleteApi");
    });

    await t.test("createKey accepts every field and getKey, whoami and listKeys show each one back", async (t) => {
      const apiId = await newApi("every-field");
      const role = await sdk.call("permissions.createRole", () => unkey.permissions.createRole({ name: "conf.reader" }));
      const created = await createKey({
        apiId,
        prefix: "conf",
        name: "every field",
        byteLength: 24,
        externalId: "user_every_field",
        meta: { plan: "pro", seats: 3, nested: { ok: true } },
        roles: ["conf.reader"],
        permissions: ["docs.read", "docs.write"],
        expires: FAR_FUTURE,
        credits: { remaining: 100, refill: { interval: "monthly", amount: 100, refillDay: 15 } },
        ratelimits: [{ name: "requests", limit: 10, duration: 60_000, autoApply: true }],
        enabled: true,
        recoverable: true,
      });
      t.match(created.keyId, /^key_/);
      t.match(created.key, /^conf_[1-9A-HJ-NP-Za-km-z]+$/, "the key carries the prefix");
      t.ok(created.key.length - "conf_".length >= 30, "24 random bytes make a longer secret than the default 16");

      const key = await getKey(created.keyId, true);
      t.equal(key.keyId, created.keyId);
      t.ok(created.key.startsWith(key.start), "start is the beginning of the key");
      t.match(key.start, /^conf_/);
      t.equal(key.enabled, true);
      t.equal(key.name, "every field");
      t.same(key.meta, { plan: "pro", seats: 3, nested: { ok: true } });
      t.type(key.createdAt, "number");
      t.equal(key.expires, FAR_FUTURE);
      t.same(sorted(key.permissions), ["docs.read", "docs.write"]);
      t.same(key.roles, ["conf.reader"]);
      t.same(key.credits, { remaining: 100, refill: { interval: "monthly", amount: 100, refillDay: 15 } });
      t.equal(key.identity?.externalId, "user_every_field");
      t.match(key.identity?.id, /^id_/);
      t.equal(key.plaintext, created.key, "decrypt answers the plaintext of a recoverable key");
      t.equal(key.ratelimits?.length, 1);
      t.match(key.ratelimits?.[0], { name: "requests", limit: 10, duration: 60_000, autoApply: true });
      t.match(key.ratelimits?.[0]?.id, /^rl_/);
      t.match(role.data.roleId, /^role_/);

      const plain = await getKey(created.keyId);
      t.equal(plain.plaintext, undefined, "no plaintext without decrypt");

      const whoami = await sdk.call("keys.whoami", () => unkey.keys.whoami({ key: created.key }));
      t.equal(whoami.data.keyId, created.keyId);
      t.equal(whoami.data.name, "every field");
      t.equal(whoami.data.identity?.externalId, "user_every_field");
      t.equal(whoami.data.plaintext, undefined, "whoami never answers the plaintext");

      const disabled = await createKey({ apiId, enabled: false });
      t.equal((await getKey(disabled.keyId)).enabled, false, "enabled: false is kept");
      t.equal(disabled.key.length <= 22, true, "the default byteLength of 16 makes at most 22 Base58 characters");
    });

    await t.test("key responses never carry the hash, and the plaintext only on decrypt (raw JSON)", async (t) => {
      const apiId = await newApi("raw-json");
      const created = await createKey({ apiId, name: "raw", recoverable: true, meta: { a: 1 }, credits: { remaining: 5 } });
      const hash = hashKey(created.key);
      const checks: { procedure: string; body: unknown; decrypt: boolean }[] = [
        { procedure: "keys.getKey", body: { keyId: created.keyId }, decrypt: false },
        { procedure: "keys.getKey", body: { keyId: created.keyId, decrypt: true }, decrypt: true },
        { procedure: "keys.whoami", body: { key: created.key }, decrypt: false },
        { procedure: "apis.listKeys", body: { apiId }, decrypt: false },
        { procedure: "apis.listKeys", body: { apiId, decrypt: true }, decrypt: true },
      ];
      for (const check of checks) {
        const raw = await postRaw(app, check.procedure, check.body);
        const label = `${check.procedure} ${JSON.stringify(check.body)}`;
        t.equal(raw.status, 200, label);
        const text = JSON.stringify(raw.body);
        t.notMatch(text, /"hash"/, `${label}: no hash field`);
        t.notOk(text.includes(hash), `${label}: the hash appears nowhere`);
        const data = asRecord(raw.body).data;
        const key = Array.isArray(data) ? data[0] : data;
        t.same(unknownKeyFields(key), [], `${label}: only fields the SDK knows`);
        if (check.decrypt) t.equal(asRecord(key).plaintext, created.key, `${label}: plaintext with decrypt`);
        else t.notOk("plaintext" in asRecord(key), `${label}: no plaintext without decrypt`);
      }
    });

    await t.test("listKeys follows pagination.cursor through every page, and filters by externalId and decrypts", async (t) => {
      const apiId = await newApi("paged");
      const created: { keyId: string; key: string }[] = [];
      for (let i = 0; i < 10; i++) {
        created.push(
          await createKey({ apiId, name: `paged-${i}`, recoverable: i % 2 === 0, ...(i < 2 ? { externalId: "filter_user" } : {}) }),
        );
      }

      const pages = await sdk.pages("apis.listKeys", () => unkey.apis.listKeys({ apiId, limit: 3 }));
      t.equal(pages.length, 4, "10 keys at 3 per page make 4 pages");
      t.same(
        pages.map((page) => page.result.data.length),
        [3, 3, 3, 1],
      );
      t.same(
        pages.map((page) => page.result.pagination.hasMore),
        [true, true, true, false],
      );
      t.equal(pages.at(-1)?.result.pagination.cursor, undefined, "the last page has no cursor");
      const seen = pages.flatMap((page) => page.result.data.map((key) => key.keyId));
      t.equal(new Set(seen).size, seen.length, "no key is listed twice");
      t.same(sorted(seen), sorted(created.map((key) => key.keyId)), "every key is listed");
      t.ok(
        pages.every((page) => page.result.data.every((key) => key.plaintext === undefined)),
        "no plaintext without decrypt",
      );

      const filtered = await sdk.pages("apis.listKeys", () => unkey.apis.listKeys({ apiId, externalId: "filter_user" }));
      const filteredIds = filtered.flatMap((page) => page.result.data.map((key) => key.keyId));
      t.same(sorted(filteredIds), sorted(created.slice(0, 2).map((key) => key.keyId)), "externalId keeps the identity's keys");
      t.ok(filtered.flatMap((page) => page.result.data).every((key) => key.identity?.externalId === "filter_user"));

      const nobody = await sdk.pages("apis.listKeys", () => unkey.apis.listKeys({ apiId, externalId: "nobody_here" }));
      t.same(
        nobody.flatMap((page) => page.result.data),
        [],
        "an unknown externalId lists nothing",
      );

      const decrypted = await sdk.pages("apis.listKeys", () => unkey.apis.listKeys({ apiId, decrypt: true, limit: 4 }));
      const byId = new Map(decrypted.flatMap((page) => page.result.data).map((key) => [key.keyId, key]));
      t.equal(byId.size, 10);
      created.forEach((key, i) => {
        t.equal(byId.get(key.keyId)?.plaintext, i % 2 === 0 ? key.key : undefined, `key ${i}: plaintext only for recoverable keys`);
      });

      await rejectsWith(t, unkey.apis.listKeys({ apiId: "api_doesnotexist" }), NotFoundErrorResponse, 404, "listKeys of an unknown API");
    });

    await t.test("updateKey leaves omitted fields, clears null ones and sets given ones", async (t) => {
      const apiId = await newApi("updates");
      await sdk.call("permissions.createRole", () => unkey.permissions.createRole({ name: "conf.updater" }));
      const { keyId } = await createKey({
        apiId,
        name: "before",
        meta: { version: 1 },
        expires: FAR_FUTURE,
        externalId: "user_before",
        credits: { remaining: 10 },
        ratelimits: [{ name: "calls", limit: 5, duration: 1_000 }],
      });
      const before = await getKey(keyId);

      const renamed = await sdk.call("keys.updateKey", () => unkey.keys.updateKey({ keyId, name: "after" }));
      t.same(renamed.data, {});
      const afterRename = await getKey(keyId);
      t.equal(afterRename.name, "after", "a value sets");
      t.same(afterRename.meta, { version: 1 }, "omitted meta stays");
      t.equal(afterRename.expires, FAR_FUTURE, "omitted expires stays");
      t.equal(afterRename.identity?.externalId, "user_before", "omitted externalId stays");
      t.same(afterRename.credits, { remaining: 10 }, "omitted credits stay");
      t.same(afterRename.ratelimits, before.ratelimits, "omitted ratelimits stay");
      t.equal(afterRename.enabled, true);
      t.type(afterRename.updatedAt, "number", "updatedAt is set by an update");

      await sdk.call("keys.updateKey", () =>
        unkey.keys.updateKey({ keyId, name: null, meta: null, expires: null, externalId: null, credits: null }),
      );
      const cleared = await getKey(keyId);
      t.equal(cleared.name, undefined, "null clears name");
      t.equal(cleared.meta, undefined, "null clears meta");
      t.equal(cleared.expires, undefined, "null clears expires");
      t.equal(cleared.identity, undefined, "null clears the identity");
      t.equal(cleared.credits?.remaining ?? null, null, "null credits make the key unlimited");
      t.same(cleared.ratelimits, before.ratelimits, "ratelimits were omitted, so they stay");

      await sdk.call("keys.updateKey", () =>
        unkey.keys.updateKey({
          keyId,
          name: "set again",
          meta: { version: 2 },
          expires: FAR_FUTURE - HOUR,
          externalId: "user_after",
          credits: { remaining: 7, refill: { interval: "daily", amount: 7 } },
          ratelimits: [
            { name: "calls", limit: 50, duration: 2_000, autoApply: true },
            { name: "bursts", limit: 3, duration: 1_000 },
          ],
          enabled: false,
          roles: ["conf.updater"],
          permissions: ["updates.write"],
        }),
      );
      const set = await getKey(keyId);
      t.equal(set.name, "set again");
      t.same(set.meta, { version: 2 });
      t.equal(set.expires, FAR_FUTURE - HOUR);
      t.equal(set.identity?.externalId, "user_after");
      t.same(set.credits, { remaining: 7, refill: { interval: "daily", amount: 7 } });
      t.equal(set.enabled, false);
      t.same(set.roles, ["conf.updater"]);
      t.same(set.permissions, ["updates.write"]);
      const calls = set.ratelimits?.find((limit) => limit.name === "calls");
      t.match(calls, { limit: 50, duration: 2_000, autoApply: true });
      t.equal(calls?.id, before.ratelimits?.[0]?.id, "a limit replaced by name keeps its id");
      t.match(
        set.ratelimits?.find((limit) => limit.name === "bursts"),
        { limit: 3, duration: 1_000, autoApply: false },
      );

      await rejectsWith(
        t,
        unkey.keys.updateKey({ keyId: "key_doesnotexist", name: "x" }),
        NotFoundErrorResponse,
        404,
        "updateKey of an unknown key",
      );
    });

    await t.test("updateCredits sets, increments, decrements and clears the remaining credits", async (t) => {
      const apiId = await newApi("credits");
      const { keyId } = await createKey({ apiId, credits: { remaining: 10 } });
      const update = async (operation: "set" | "increment" | "decrement", value: number | null) =>
        (await sdk.call("keys.updateCredits", () => unkey.keys.updateCredits({ keyId, operation, value }))).data;

      t.same(await update("set", 20), { remaining: 20 });
      t.same(await update("increment", 5), { remaining: 25 });
      t.same(await update("decrement", 30), { remaining: 0 }, "decrement stops at 0");
      t.equal((await getKey(keyId)).credits?.remaining, 0);
      t.same(await update("set", null), { remaining: null }, "set null makes the key unlimited");
      t.equal((await getKey(keyId)).credits?.remaining ?? null, null);

      const invalid = await rejectsWith(
        t,
        unkey.keys.updateCredits({ keyId, operation: "increment", value: 1 }),
        BadRequestErrorResponse,
        400,
        "increment of an unlimited key",
      );
      t.ok(
        invalid?.error.errors.some((entry) => entry.location === "body.operation"),
        "the error is located at body.operation",
      );
    });

    await t.test("deleteKey soft-deletes, then deletes permanently", async (t) => {
      const apiId = await newApi("deletions");
      const soft = await createKey({ apiId });
      const hard = await createKey({ apiId });

      const softly = await sdk.call("keys.deleteKey", () => unkey.keys.deleteKey({ keyId: soft.keyId }));
      t.same(softly.data, {});
      await rejectsWith(t, unkey.keys.getKey({ keyId: soft.keyId }), NotFoundErrorResponse, 404, "getKey of a soft-deleted key");
      await rejectsWith(t, unkey.keys.deleteKey({ keyId: soft.keyId }), NotFoundErrorResponse, 404, "deleting a deleted key again");

      const permanently = await sdk.call("keys.deleteKey", () => unkey.keys.deleteKey({ keyId: hard.keyId, permanent: true }));
      t.same(permanently.data, {});
      await rejectsWith(t, unkey.keys.getKey({ keyId: hard.keyId }), NotFoundErrorResponse, 404, "getKey of a permanently deleted key");
      await rejectsWith(t, unkey.keys.whoami({ key: hard.key }), NotFoundErrorResponse, 404, "whoami of a permanently deleted key");
      const remaining = await sdk.pages("apis.listKeys", () => unkey.apis.listKeys({ apiId }));
      t.same(
        remaining.flatMap((page) => page.result.data),
        [],
        "listKeys shows neither",
      );
    });

    await t.test("migrateKeys: migrated and failed parse; imported keys verify, a pending one once with its migrationId", async (t) => {
      const apiId = await newApi("migrated");
      const plain = `legacy_${randomTokenPart()}`;
      const longToken = randomTokenPart();
      const token = `sdk_short1_${longToken}`;
      const hexOf = (text: string) => createHash("sha256").update(text).digest("hex");
      const migrated = await sdk.call("keys.migrateKeys", () =>
        unkey.keys.migrateKeys({
          migrationId: "sdk_hex",
          apiId,
          keys: [{ hash: hexOf(plain), name: "imported", credits: { remaining: 5 }, enabled: true }],
        }),
      );
      t.same(migrated.data.failed, []);
      t.equal(migrated.data.migrated[0]?.hash, hexOf(plain));
      t.match(migrated.data.migrated[0]?.keyId, /^key_/);
      t.equal((await unkey.keys.verifyKey({ key: plain })).data.credits, 4, "verifies at once");

      const pending = await sdk.call("keys.migrateKeys", () =>
        unkey.keys.migrateKeys({ migrationId: "sdk_prefixed", apiId, keys: [{ hash: hexOf(longToken) }, { hash: hexOf(plain) }] }),
      );
      t.equal(pending.data.migrated.length, 2, "a hex hash of the prefixed scheme is another hash than the stored base64 one");
      const again = await sdk.call("keys.migrateKeys", () =>
        unkey.keys.migrateKeys({ migrationId: "sdk_prefixed", apiId, keys: [{ hash: hexOf(longToken) }] }),
      );
      t.same(again.data, { migrated: [], failed: [hexOf(longToken)] }, "an existing hash fails");
      t.equal((await unkey.keys.verifyKey({ key: token })).data.code, "NOT_FOUND");
      t.equal((await unkey.keys.verifyKey({ key: token, migrationId: "sdk_prefixed" })).data.code, "VALID");
      t.equal((await unkey.keys.verifyKey({ key: token })).data.code, "VALID", "then without the migration id");
      await rejectsWith(
        t,
        unkey.keys.migrateKeys({ migrationId: "not_configured", apiId, keys: [{ hash: hexOf(plain) }] }),
        NotFoundErrorResponse,
        404,
        "an unknown migration",
      );
      await rejectsWith(
        t,
        unkey.keys.migrateKeys({ migrationId: "sdk_hex", apiId, keys: [{ hash: "not-hex" }] }),
        BadRequestErrorResponse,
        400,
        "a hash of another scheme",
      );
    });

    await t.test("rerollKey issues a working key with the old settings and sets the old key's expiry", async (t) => {
      const apiId = await newApi("rerolls");
      const old = await createKey({
        apiId,
        prefix: "rr",
        name: "rolled",
        meta: { n: 1 },
        permissions: ["rr.use"],
        credits: { remaining: 3 },
        externalId: "user_reroll",
        recoverable: true,
      });
      const rerolled = await sdk.call("keys.rerollKey", () => unkey.keys.rerollKey({ keyId: old.keyId, expiration: HOUR }));
      t.match(rerolled.data.keyId, /^key_/);
      t.not(rerolled.data.keyId, old.keyId, "a new key id");
      t.not(rerolled.data.key, old.key, "a new secret");
      t.match(rerolled.data.key, /^rr_/, "the prefix is kept");

      const fresh = await getKey(rerolled.data.keyId, true);
      t.equal(fresh.name, "rolled");
      t.same(fresh.meta, { n: 1 });
      t.same(fresh.permissions, ["rr.use"]);
      t.same(fresh.credits, { remaining: 3 });
      t.equal(fresh.identity?.externalId, "user_reroll");
      t.equal(fresh.plaintext, rerolled.data.key, "a recoverable key's replacement is recoverable");
      t.equal(fresh.expires, undefined);
      const whoami = await sdk.call("keys.whoami", () => unkey.keys.whoami({ key: rerolled.data.key }));
      t.equal(whoami.data.keyId, rerolled.data.keyId, "whoami knows the new key");

      const previous = await getKey(old.keyId);
      t.type(previous.expires, "number", "the old key now expires");
      const expires = previous.expires ?? 0;
      t.ok(
        expires >= fresh.createdAt + HOUR && expires < fresh.createdAt + HOUR + MINUTE,
        "an hour after the reroll, rounded up to a minute",
      );
      t.equal(expires % MINUTE, 0, "on a whole minute");

      await rejectsWith(
        t,
        unkey.keys.rerollKey({ keyId: "key_doesnotexist", expiration: 0 }),
        NotFoundErrorResponse,
        404,
        "rerollKey of an unknown key",
      );
    });

    await t.test("addPermissions, removePermissions and setPermissions answer the key's direct permissions", async (t) => {
      const apiId = await newApi("key-permissions");
      const { keyId } = await createKey({ apiId });
      const slugs = (permissions: readonly { slug: string; id: string; name: string }[]) =>
        sorted(permissions.map((permission) => permission.slug));

      const added = await sdk.call("keys.addPermissions", () => unkey.keys.addPermissions({ keyId, permissions: ["kp.one", "kp.two"] }));
      t.same(slugs(added.data), ["kp.one", "kp.two"]);
      t.ok(
        added.data.every((permission) => permission.id.startsWith("perm_")),
        "unknown slugs were created as permissions",
      );
      const removed = await sdk.call("keys.removePermissions", () => unkey.keys.removePermissions({ keyId, permissions: ["kp.one"] }));
      t.same(slugs(removed.data), ["kp.two"]);
      const replaced = await sdk.call("keys.setPermissions", () => unkey.keys.setPermissions({ keyId, permissions: ["kp.three"] }));
      t.same(slugs(replaced.data), ["kp.three"]);
      t.same((await getKey(keyId)).permissions, ["kp.three"]);
      const emptied = await sdk.call("keys.setPermissions", () => unkey.keys.setPermissions({ keyId, permissions: [] }));
      t.same(emptied.data, []);
      t.equal((await getKey(keyId)).permissions, undefined);

      await rejectsWith(
        t,
        unkey.keys.removePermissions({ keyId, permissions: ["kp.never.created"] }),
        NotFoundErrorResponse,
        404,
        "removing an unknown permission",
      );
      await rejectsWith(
        t,
        unkey.keys.addPermissions({ keyId: "key_doesnotexist", permissions: ["kp.one"] }),
        NotFoundErrorResponse,
        404,
        "addPermissions of an unknown key",
      );
    });

    await t.test("addRoles, removeRoles and setRoles answer the key's roles with their permissions", async (t) => {
      const apiId = await newApi("key-roles");
      const { keyId } = await createKey({ apiId });
      await sdk.call("permissions.createRole", () =>
        unkey.permissions.createRole({ name: "conf.admin", description: "all of it", permissions: ["admin.all"] }),
      );
      await sdk.call("permissions.createRole", () => unkey.permissions.createRole({ name: "conf.viewer" }));
      const names = (roles: readonly { name: string }[]) => sorted(roles.map((role) => role.name));

      const first = await sdk.call("keys.addRoles", () => unkey.keys.addRoles({ keyId, roles: ["conf.admin"] }));
      t.same(names(first.data), ["conf.admin"]);
      t.equal(first.data[0]?.description, "all of it");
      t.same(
        first.data[0]?.permissions?.map((permission) => permission.slug),
        ["admin.all"],
        "roles carry their permissions",
      );
      const both = await sdk.call("keys.addRoles", () => unkey.keys.addRoles({ keyId, roles: ["conf.viewer"] }));
      t.same(names(both.data), ["conf.admin", "conf.viewer"]);
      const removed = await sdk.call("keys.removeRoles", () => unkey.keys.removeRoles({ keyId, roles: ["conf.admin"] }));
      t.same(names(removed.data), ["conf.viewer"]);
      const replaced = await sdk.call("keys.setRoles", () => unkey.keys.setRoles({ keyId, roles: ["conf.admin"] }));
      t.same(names(replaced.data), ["conf.admin"]);
      t.same((await getKey(keyId)).roles, ["conf.admin"]);
      const emptied = await sdk.call("keys.setRoles", () => unkey.keys.setRoles({ keyId, roles: [] }));
      t.same(emptied.data, []);

      await rejectsWith(
        t,
        unkey.keys.addRoles({ keyId, roles: ["conf.no_such_role"] }),
        NotFoundErrorResponse,
        404,
        "adding an unknown role",
      );
    });

    await t.test("permissions and roles: create, read by id and by name, list every page, change and delete", async (t) => {
      const createdPermission = await sdk.call("permissions.createPermission", () =>
        unkey.permissions.createPermission({ name: "Read documents", slug: "documents.read", description: "may read documents" }),
      );
      const permissionId = createdPermission.data.permissionId;
      t.match(permissionId, /^perm_/);
      const expected = { id: permissionId, name: "Read documents", slug: "documents.read", description: "may read documents" };
      t.same(
        (await sdk.call("permissions.getPermission", () => unkey.permissions.getPermission({ permission: permissionId }))).data,
        expected,
        "by id",
      );
      t.same(
        (await sdk.call("permissions.getPermission", () => unkey.permissions.getPermission({ permission: "documents.read" }))).data,
        expected,
        "by slug",
      );
      const duplicate = await rejectsWith(
        t,
        unkey.permissions.createPermission({ name: "Again", slug: "documents.read" }),
        ConflictErrorResponse,
        409,
        "a second permission with the slug",
      );
      t.match(duplicate?.error.detail, "documents.read");

      const permissionPages = await sdk.pages("permissions.listPermissions", () => unkey.permissions.listPermissions({ limit: 2 }));
      t.ok(permissionPages.length >= 2, "several pages of 2");
      t.ok(
        permissionPages.slice(0, -1).every((page) => page.result.pagination.hasMore && page.result.data.length === 2),
        "full pages say hasMore",
      );
      const permissionIds = permissionPages.flatMap((page) => page.result.data.map((permission) => permission.id));
      t.equal(new Set(permissionIds).size, permissionIds.length, "no permission is listed twice");
      t.ok(permissionIds.includes(permissionId), "the new permission is listed");

      const createdRole = await sdk.call("permissions.createRole", () =>
        unkey.permissions.createRole({
          name: "editor",
          description: "edits documents",
          permissions: ["documents.read", "documents.write"],
        }),
      );
      const roleId = createdRole.data.roleId;
      t.match(roleId, /^role_/);
      const byId = (await sdk.call("permissions.getRole", () => unkey.permissions.getRole({ role: roleId }))).data;
      t.equal(byId.name, "editor");
      t.equal(byId.description, "edits documents");
      t.same(sorted(byId.permissions?.map((permission) => permission.slug)), ["documents.read", "documents.write"]);
      t.equal(
        byId.permissions?.find((permission) => permission.slug === "documents.read")?.id,
        permissionId,
        "the existing permission is reused",
      );
      const byName = (await sdk.call("permissions.getRole", () => unkey.permissions.getRole({ role: "editor" }))).data;
      t.same(byName, byId, "by name");
      await rejectsWith(t, unkey.permissions.createRole({ name: "editor" }), ConflictErrorResponse, 409, "a second role with the name");

      const rolePages = await sdk.pages("permissions.listRoles", () => unkey.permissions.listRoles({ limit: 1 }));
      const roleIds = rolePages.flatMap((page) => page.result.data.map((role) => role.id));
      t.equal(rolePages.length, roleIds.length, "one role per page");
      t.equal(new Set(roleIds).size, roleIds.length, "no role is listed twice");
      t.ok(roleIds.includes(roleId), "the new role is listed");

      const narrowed = await sdk.call("permissions.setRolePermissions", () =>
        unkey.permissions.setRolePermissions({ roleId, permissions: ["documents.read"] }),
      );
      t.same(
        narrowed.data.map((permission) => permission.slug),
        ["documents.read"],
      );
      t.same(
        (await sdk.call("permissions.getRole", () => unkey.permissions.getRole({ role: roleId }))).data.permissions?.map(
          (permission) => permission.slug,
        ),
        ["documents.read"],
      );
      await rejectsWith(
        t,
        unkey.permissions.setRolePermissions({ roleId: "role_doesnotexist", permissions: [] }),
        NotFoundErrorResponse,
        404,
        "setRolePermissions of an unknown role",
      );

      const deletedRole = await sdk.call("permissions.deleteRole", () => unkey.permissions.deleteRole({ role: "editor" }));
      t.same(deletedRole.data, {});
      await rejectsWith(t, unkey.permissions.getRole({ role: roleId }), NotFoundErrorResponse, 404, "getRole after deleteRole");

      const deletedPermission = await sdk.call("permissions.deletePermission", () =>
        unkey.permissions.deletePermission({ permission: "documents.read" }),
      );
      t.same(deletedPermission.data, {});
      await rejectsWith(
        t,
        unkey.permissions.getPermission({ permission: permissionId }),
        NotFoundErrorResponse,
        404,
        "getPermission after deletePermission",
      );
      await rejectsWith(
        t,
        unkey.permissions.deletePermission({ permission: "documents.read" }),
        NotFoundErrorResponse,
        404,
        "a second deletePermission",
      );
    });

    await t.test("identities: create with meta and ratelimits, read by id and externalId, list, update and delete", async (t) => {
      const created = await sdk.call("identities.createIdentity", () =>
        unkey.identities.createIdentity({
          externalId: "acme",
          meta: { tier: "gold" },
          ratelimits: [{ name: "tokens", limit: 100, duration: 60_000 }],
        }),
      );
      const identityId = created.data.identityId;
      t.match(identityId, /^id_/);

      const byId = (await sdk.call("identities.getIdentity", () => unkey.identities.getIdentity({ identity: identityId }))).data;
      t.equal(byId.id, identityId);
      t.equal(byId.externalId, "acme");
      t.same(byId.meta, { tier: "gold" });
      t.equal(byId.ratelimits?.length, 1);
      t.match(byId.ratelimits?.[0], { name: "tokens", limit: 100, duration: 60_000, autoApply: false });
      t.match(byId.ratelimits?.[0]?.id, /^rl_/);
      const byExternalId = (await sdk.call("identities.getIdentity", () => unkey.identities.getIdentity({ identity: "acme" }))).data;
      t.same(byExternalId, byId, "by externalId");

      const duplicate = await rejectsWith(
        t,
        unkey.identities.createIdentity({ externalId: "acme" }),
        ConflictErrorResponse,
        409,
        "a second identity with the externalId",
      );
      t.match(duplicate?.error.detail, "acme");

      await sdk.call("identities.createIdentity", () => unkey.identities.createIdentity({ externalId: "globex" }));
      const pages = await sdk.pages("identities.listIdentities", () => unkey.identities.listIdentities({ limit: 1 }));
      const listed = pages.flatMap((page) => page.result.data);
      t.equal(pages.length, listed.length, "one identity per page");
      t.equal(new Set(listed.map((identity) => identity.id)).size, listed.length, "no identity is listed twice");
      t.same(
        listed.find((identity) => identity.id === identityId),
        byId,
        "listed as getIdentity shows it",
      );
      t.ok(listed.some((identity) => identity.externalId === "globex"));

      const updatedMeta = await sdk.call("identities.updateIdentity", () =>
        unkey.identities.updateIdentity({ identity: "acme", meta: { tier: "platinum" } }),
      );
      t.same(updatedMeta.data.meta, { tier: "platinum" });
      t.same(updatedMeta.data.ratelimits, byId.ratelimits, "omitted ratelimits stay");
      const updatedLimits = await sdk.call("identities.updateIdentity", () =>
        unkey.identities.updateIdentity({
          identity: identityId,
          ratelimits: [{ name: "tokens", limit: 200, duration: 60_000, autoApply: true }],
        }),
      );
      t.same(updatedLimits.data.meta, { tier: "platinum" }, "omitted meta stays");
      t.match(updatedLimits.data.ratelimits?.[0], { id: byId.ratelimits?.[0]?.id, name: "tokens", limit: 200, autoApply: true });
      const noLimits = await sdk.call("identities.updateIdentity", () =>
        unkey.identities.updateIdentity({ identity: identityId, ratelimits: [] }),
      );
      t.same(noLimits.data.ratelimits ?? [], [], "an empty list removes every limit");

      const deleted = await sdk.call("identities.deleteIdentity", () => unkey.identities.deleteIdentity({ identity: identityId }));
      t.match(deleted.meta.requestId, /^req_/);
      await rejectsWith(
        t,
        unkey.identities.getIdentity({ identity: identityId }),
        NotFoundErrorResponse,
        404,
        "getIdentity after deleteIdentity",
      );
      const again = await sdk.call("identities.createIdentity", () => unkey.identities.createIdentity({ externalId: "acme" }));
      t.not(again.data.identityId, identityId, "the externalId is free again after deleteIdentity");
      await rejectsWith(
        t,
        unkey.identities.updateIdentity({ identity: "nobody_here", meta: {} }),
        NotFoundErrorResponse,
        404,
        "updateIdentity of an unknown identity",
      );
      await rejectsWith(
        t,
        unkey.identities.deleteIdentity({ identity: "nobody_here" }),
        NotFoundErrorResponse,
        404,
        "deleteIdentity of an unknown identity",
      );
    });

    await t.test("errors come back as the SDK's typed errors", async (t) => {
      await t.test("400: BadRequestErrorResponse locates each problem", async (t) => {
        const error = await rejectsWith(
          t,
          unkey.apis.createApi({ name: "ab" }),
          BadRequestErrorResponse,
          400,
          "createApi with a 2-character name",
        );
        t.equal(error?.error.status, 400);
        t.match(error?.error.type, /invalid_input/);
        t.match(error?.meta.requestId, /^req_/);
        const entry = error?.error.errors.find((candidate) => candidate.location === "body.name");
        t.ok(entry, "an errors[] entry at body.name");
        t.match(entry?.message, "at least 3 characters");
      });

      await t.test("401: UnauthorizedErrorResponse for an unknown root key", async (t) => {
        const stranger = app.client("root_this_key_does_not_exist");
        const error = await rejectsWith(
          t,
          stranger.apis.getApi({ apiId: "api_protected" }),
          UnauthorizedErrorResponse,
          401,
          "getApi with an unknown root key",
        );
        t.equal(error?.error.status, 401);
        await rejectsWith(
          t,
          stranger.keys.createKey({ apiId: "api_protected" }),
          UnauthorizedErrorResponse,
          401,
          "createKey with an unknown root key",
        );
      });

      await t.test("403: ForbiddenErrorResponse names the missing permission", async (t) => {
        const weak = app.client(await app.h.rootKey(["identity.*.read_identity"]));
        const createApi = await rejectsWith(
          t,
          weak.apis.createApi({ name: "forbidden" }),
          ForbiddenErrorResponse,
          403,
          "createApi without api.*.create_api",
        );
        t.match(createApi?.error.detail, "api.*.create_api");
        const createPermission = await rejectsWith(
          t,
          weak.permissions.createPermission({ name: "x", slug: "x" }),
          ForbiddenErrorResponse,
          403,
          "createPermission without rbac.*.create_permission",
        );
        t.match(createPermission?.error.detail, "rbac.*.create_permission");
        const listKeys = await rejectsWith(
          t,
          weak.apis.listKeys({ apiId: "api_protected" }),
          ForbiddenErrorResponse,
          403,
          "listKeys without api.*.read_key",
        );
        t.match(listKeys?.error.detail, "read_key");
        const deleteIdentity = await rejectsWith(
          t,
          weak.identities.deleteIdentity({ identity: "globex" }),
          ForbiddenErrorResponse,
          403,
          "deleteIdentity without identity.*.delete_identity",
        );
        if (deleteIdentity) t.match(deleteIdentity.error.detail, "delete_identity");
      });

      await t.test("404: NotFoundErrorResponse for an unknown key and an unknown API", async (t) => {
        const key = await rejectsWith(
          t,
          unkey.keys.getKey({ keyId: "key_doesnotexist" }),
          NotFoundErrorResponse,
          404,
          "getKey of an unknown key",
        );
        t.match(key?.error.detail, "key_doesnotexist");
        const api = await rejectsWith(
          t,
          unkey.apis.getApi({ apiId: "api_doesnotexist" }),
          NotFoundErrorResponse,
          404,
          "getApi of an unknown API",
        );
        t.match(api?.error.detail, "api_doesnotexist");
        await rejectsWith(
          t,
          unkey.keys.createKey({ apiId: "api_doesnotexist" }),
          NotFoundErrorResponse,
          404,
          "createKey in an unknown API",
        );
        const theirs = await app.client(OTHER_ROOT_KEY).apis.createApi({ name: "theirs" });
        await rejectsWith(
          t,
          unkey.apis.getApi({ apiId: theirs.data.apiId }),
          NotFoundErrorResponse,
          404,
          "getApi of another workspace's API",
        );
      });

      await t.test("409: ConflictErrorResponse for a duplicate slug, role name and externalId", async (t) => {
        await sdk.call("permissions.createPermission", () => unkey.permissions.createPermission({ name: "dup", slug: "dup.slug" }));
        await rejectsWith(
          t,
          unkey.permissions.createPermission({ name: "dup", slug: "dup.slug" }),
          ConflictErrorResponse,
          409,
          "duplicate permission slug",
        );
        await sdk.call("permissions.createRole", () => unkey.permissions.createRole({ name: "dup.role" }));
        await rejectsWith(t, unkey.permissions.createRole({ name: "dup.role" }), ConflictErrorResponse, 409, "duplicate role name");
        await sdk.call("identities.createIdentity", () => unkey.identities.createIdentity({ externalId: "dup_identity" }));
        await rejectsWith(
          t,
          unkey.identities.createIdentity({ externalId: "dup_identity" }),
          ConflictErrorResponse,
          409,
          "duplicate externalId",
        );
      });

      await t.test("412: deleteApi of a delete-protected API is a PreconditionFailedErrorResponse", async (t) => {
        const error = await rejectsWith(
          t,
          unkey.apis.deleteApi({ apiId: "api_protected" }),
          PreconditionFailedErrorResponse,
          412,
          "deleteApi of a protected API",
        );
        t.equal(error?.error.status, 412);
        await sdk.call("apis.getApi", () => unkey.apis.getApi({ apiId: "api_protected" }));
      });

      await t.test("412: a recoverable key without a vault key is refused", async (t) => {
        const noVault = await sdkApp(t, { storage });
        const apiId = (await noVault.unkey.apis.createApi({ name: "no-vault" })).data.apiId;
        // The SDK declares no 412 for keys.createKey, so it surfaces as its generic APIError with the status and body.
        const error = await rejectsWith(
          t,
          noVault.unkey.keys.createKey({ apiId, recoverable: true }),
          APIError,
          412,
          "createKey recoverable without a vault",
        );
        t.ok(error instanceof UnkeyError);
        const body = asRecord(error === undefined ? undefined : JSON.parse(error.body));
        t.equal(asRecord(body.error).status, 412);
        t.match(asRecord(body.error).type, /precondition_failed/);
        t.match(asRecord(body.error).detail, /vault/);
        t.match(asRecord(body.meta).requestId, /^req_/);
      });
    });

    await t.test(`every SDK management method parsed a success on ${storage} stores`, async (t) => {
      t.same(sdk.missing(), [], "methods without a parsed success");
      t.comment(`SDK methods passing on ${storage}: ${sdk.passed.size} of ${SDK_METHODS.length}`);
    });
  });
}

await t.test("every SDK management method parsed a success on every store", async (t) => {
  t.equal(SDK_METHODS.length, 32, "4 apis + 14 keys + 9 permissions + 5 identities methods");
  t.equal(new Set(SDK_METHODS).size, SDK_METHODS.length, "no method listed twice");
  const passingEverywhere = SDK_METHODS.filter((method) => STORAGE_KINDS.every((storage) => coverage.get(storage)?.passed.has(method)));
  for (const storage of STORAGE_KINDS) {
    const passed = coverage.get(storage)?.passed.size ?? 0;
    t.equal(passed, SDK_METHODS.length, `${storage}: ${passed} of ${SDK_METHODS.length}`);
  }
  t.same(
    SDK_METHODS.filter((method) => !passingEverywhere.includes(method)),
    [],
    "methods failing on some store",
  );
  t.comment(`SDK methods passing: ${passingEverywhere.length} of ${SDK_METHODS.length}`);
});
