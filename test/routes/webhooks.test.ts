import t from "tap";
import { assertError, assertInvalidAt } from "../helpers/assertions.js";
import { harness, OTHER_ROOT_KEY, STORAGE_KINDS } from "../helpers/harness.js";
import { waitFor } from "../helpers/wait.js";
import { Receiver, verifySignature } from "../helpers/webhook-receiver.js";

for (const storage of STORAGE_KINDS) {
  t.test(`keygate.*Webhook on ${storage} stores, delivering to a receiver on loopback`, async (t) => {
    const h = await harness(t, { storage, config: { webhooks: { allowPrivateAddresses: true, pollIntervalMs: 20 } } });
    const receiver = new Receiver();
    await receiver.start();
    t.teardown(() => receiver.stop());
    const events = ["key.created", "key.updated", "key.deleted", "ratelimit.exceeded"];
    const created = await h.call("keygate.createWebhook", { url: receiver.url, events, description: "all of them" });
    t.equal(created.status, 200);
    const { webhookId, secret } = created.body.data;
    t.match(webhookId, /^wh_/);

    await t.test("listWebhooks shows the endpoint without its secret", async (t) => {
      const listed = await h.call("keygate.listWebhooks", {});
      t.same(listed.body.data, [
        { webhookId, url: receiver.url, events, description: "all of them", enabled: true, createdAt: listed.body.data[0].createdAt },
      ]);
      t.notOk(JSON.stringify(listed.body).includes("whsec_"));
      t.same((await h.call("keygate.listWebhooks", {}, { rootKey: OTHER_ROOT_KEY })).body.data, [], "not another workspace's");
    });

    await t.test("key.created, key.updated and key.deleted arrive once each, signed, never with the key", async (t) => {
      const apiId = (await h.call("apis.createApi", { name: `hooks-${storage}` })).body.data.apiId;
      const key = (await h.call("keys.createKey", { apiId, externalId: "user_7" })).body.data;
      await h.call("keys.updateKey", { keyId: key.keyId, name: "renamed" });
      await h.call("keys.deleteKey", { keyId: key.keyId });
      const got = await waitFor("three key events", 10_000, () =>
        receiver.received.length >= 3 ? receiver.received.slice(0, 3) : undefined,
      );
      t.same(
        got.map((r) => r.event.type),
        ["key.created", "key.updated", "key.deleted"],
        "in order",
      );
      for (const r of got) {
        t.ok(verifySignature(secret, r.headers, r.body));
        t.match(r.event.data, { workspaceId: "ws_test", apiId, keyId: key.keyId, identityId: /^id_/, externalId: "user_7" });
        t.notOk(r.body.includes(key.key), "the key's secret is not in the event");
      }
    });

    await t.test("a key's permissions or roles changed: key.updated, once per change", async (t) => {
      receiver.received.length = 0;
      const apiId = (await h.call("apis.createApi", { name: `access-${storage}` })).body.data.apiId;
      const { keyId } = (await h.call("keys.createKey", { apiId, externalId: "user_8" })).body.data;
      await h.call("permissions.createPermission", { name: `orders.read.${storage}`, slug: `orders.read.${storage}` });
      await h.call("permissions.createRole", { name: `reader-${storage}` });
      const changes: [string, Record<string, unknown>][] = [
        ["keys.addPermissions", { keyId, permissions: [`orders.read.${storage}`] }],
        ["keys.removePermissions", { keyId, permissions: [`orders.read.${storage}`] }],
        ["keys.setPermissions", { keyId, permissions: [] }],
        ["keys.addRoles", { keyId, roles: [`reader-${storage}`] }],
        ["keys.removeRoles", { keyId, roles: [`reader-${storage}`] }],
        ["keys.setRoles", { keyId, roles: [] }],
      ];
      for (const [procedure, body] of changes) t.equal((await h.call(procedure, body)).status, 200, procedure);
      const got = await waitFor("six key.updated", 10_000, () =>
        receiver.of("key.updated").length >= 6 ? receiver.of("key.updated") : undefined,
      );
      t.equal(got.length, 6);
      for (const r of got) t.match(r.event.data, { workspaceId: "ws_test", apiId, keyId, externalId: "user_8" });
      t.equal(receiver.of("key.created").length, 1, "and nothing else about the key");
    });

    await t.test("ratelimit.exceeded once per namespace, identifier and window", async (t) => {
      receiver.received.length = 0;
      const limit = (identifier: string) =>
        h.call("ratelimit.limit", { namespace: `ns-${storage}`, identifier, limit: 1, duration: 600_000 });
      for (let i = 0; i < 4; i++) await limit("alice");
      await limit("bob");
      await limit("bob");
      const got = await waitFor("two exceeded", 10_000, () => (receiver.of("ratelimit.exceeded").length >= 2 ? true : undefined));
      t.ok(got);
      // Another key event after them shows nothing more was queued before it.
      await h.call("apis.createApi", { name: `after-${storage}` }).then((r) => h.call("keys.createKey", { apiId: r.body.data.apiId }));
      await waitFor("the marker", 10_000, () => (receiver.of("key.created").length >= 1 ? true : undefined));
      t.same(
        receiver.of("ratelimit.exceeded").map((r) => r.event.data.identifier),
        ["alice", "bob"],
      );
      t.match(receiver.of("ratelimit.exceeded")[0]?.event.data, {
        namespaceName: `ns-${storage}`,
        limit: 1,
        duration: 600_000,
        reset: Number,
      });
    });

    await t.test("testWebhook, listWebhookDeliveries, updateWebhook, rotateWebhookSecret, deleteWebhook", async (t) => {
      const { deliveryId } = (await h.call("keygate.testWebhook", { webhookId })).body.data;
      await waitFor("the test event", 10_000, () => (receiver.of("webhook.test").length >= 1 ? true : undefined));
      const deliveries = await waitFor("delivered", 10_000, async () => {
        const list = (await h.call("keygate.listWebhookDeliveries", { webhookId, limit: 5 })).body.data;
        return list[0]?.status === "delivered" ? list : undefined;
      });
      t.match(deliveries[0], { deliveryId, type: "webhook.test", status: "delivered", attempts: 1, responseCode: 204 });
      const updated = await h.call("keygate.updateWebhook", { webhookId, events: ["key.expiring"], enabled: false, description: null });
      t.match(updated.body.data, { webhookId, events: ["key.expiring"], enabled: false });
      t.notOk("description" in updated.body.data);
      const rotated = await h.call("keygate.rotateWebhookSecret", { webhookId, gracePeriodMs: 1_000 });
      t.match(rotated.body.data, { secret: /^whsec_/, previousSecretExpires: Number });
      t.not(rotated.body.data.secret, secret);
      t.equal((await h.call("keygate.deleteWebhook", { webhookId })).status, 200);
      assertError(t, await h.call("keygate.deleteWebhook", { webhookId }), "err:keygate:data:webhook_not_found");
    });

    await t.test("400s, 403s and another workspace's endpoint", async (t) => {
      assertInvalidAt(t, await h.call("keygate.createWebhook", { url: receiver.url, events: ["key.nope"] }), "body.events[0]");
      assertInvalidAt(t, await h.call("keygate.createWebhook", { url: receiver.url, events: [] }), "body.events");
      assertInvalidAt(t, await h.call("keygate.createWebhook", { url: "gopher://x", events: ["key.created"] }), "body.url");
      const mine = (await h.call("keygate.createWebhook", { url: receiver.url, events: ["key.created"] })).body.data.webhookId;
      for (const [procedure, body] of [
        ["keygate.updateWebhook", { webhookId: mine, enabled: false }],
        ["keygate.deleteWebhook", { webhookId: mine }],
        ["keygate.rotateWebhookSecret", { webhookId: mine }],
        ["keygate.testWebhook", { webhookId: mine }],
        ["keygate.listWebhookDeliveries", { webhookId: mine }],
      ] as const) {
        assertError(t, await h.call(procedure, body, { rootKey: OTHER_ROOT_KEY }), "err:keygate:data:webhook_not_found", undefined);
      }
      const reader = await h.rootKey(["webhook.*.read_webhook"]);
      t.equal((await h.call("keygate.listWebhooks", {}, { rootKey: reader })).status, 200);
      assertError(
        t,
        await h.call("keygate.createWebhook", { url: receiver.url, events: ["key.created"] }, { rootKey: reader }),
        "err:unkey:authorization:insufficient_permissions",
      );
      assertError(
        t,
        await h.call("keygate.deleteWebhook", { webhookId: mine }, { rootKey: reader }),
        "err:unkey:authorization:insufficient_permissions",
      );
      const one = await h.rootKey([`webhook.${mine}.update_webhook`]);
      t.equal(
        (await h.call("keygate.updateWebhook", { webhookId: mine, enabled: true }, { rootKey: one })).status,
        200,
        "a permission naming the endpoint",
      );
      assertError(t, await h.call("keygate.listWebhooks", {}, { rootKey: one }), "err:unkey:authorization:insufficient_permissions");
    });
  });
}
