import type { Test } from "tap";
import type { Stores } from "../../src/storage/interfaces.js";
import type { OutboxMessage, WebhookDeliveryRecord, WebhookEndpointRecord } from "../../src/storage/webhook-records.js";

function endpoint(id: string, workspaceId = "ws_a"): WebhookEndpointRecord {
  return {
    id,
    workspaceId,
    url: `https://example.com/${id}`,
    events: ["key.created"],
    enabled: true,
    secret: { plain: "whsec_x" },
    createdAt: 1_000,
  };
}

function delivery(id: string, endpointId: string, createdAt: number): WebhookDeliveryRecord {
  return { id, workspaceId: "ws_a", endpointId, type: "key.created", status: "pending", attempts: 0, createdAt };
}

function message(id: string, endpointId: string): OutboxMessage {
  return { id, workspaceId: "ws_a", endpointId, type: "key.created", payload: `{"id":"${id}"}`, createdAt: 1 };
}

/** The webhook store and the outbox, as every Stores implementation must keep them (run from contract.ts). */
export async function webhookStoreContract(t: Test, open: (t: Test) => Promise<Stores>): Promise<void> {
  await t.test("webhook endpoints: create, get, list, update, delete", async (t) => {
    const { webhooks } = await open(t);
    const record = { ...endpoint("wh_2"), description: "ops", previousSecret: { secret: { plain: "whsec_old" }, until: 5 } };
    t.equal(await webhooks.create(record), true);
    t.equal(await webhooks.create(endpoint("wh_2")), false, "same id refused");
    await webhooks.create(endpoint("wh_1"));
    await webhooks.create(endpoint("wh_9", "ws_b"));
    t.same(await webhooks.get("ws_a", "wh_2"), record, "reads back what was written");
    t.equal(await webhooks.get("ws_b", "wh_2"), null, "not in another workspace");
    t.same(
      (await webhooks.list("ws_a")).map((r) => r.id),
      ["wh_1", "wh_2"],
    );
    t.same(await webhooks.workspaces(), ["ws_a", "ws_b"]);
    const updated = await webhooks.update("ws_a", "wh_1", (current) => ({ ...current, enabled: false, updatedAt: 7 }));
    t.same(updated, { ...endpoint("wh_1"), enabled: false, updatedAt: 7 });
    t.same(await webhooks.get("ws_a", "wh_1"), updated);
    t.equal(await webhooks.update("ws_a", "wh_1", () => null), null, "a change that declines writes nothing");
    t.equal(await webhooks.update("ws_a", "wh_nope", (c) => c), null, "absent");
    t.equal(await webhooks.delete("ws_a", "wh_1"), true);
    t.equal(await webhooks.delete("ws_a", "wh_1"), false);
    t.equal(await webhooks.get("ws_a", "wh_1"), null);
    t.equal(await webhooks.delete("ws_b", "wh_9"), true);
    t.same(await webhooks.workspaces(), ["ws_a"], "a workspace without endpoints is no longer listed");
  });

  await t.test("webhook deliveries: logged per endpoint, newest first, trimmed, gone with the endpoint", async (t) => {
    const { webhooks } = await open(t);
    await webhooks.create(endpoint("wh_1"));
    for (let i = 1; i <= 4; i++) await webhooks.saveDelivery(delivery(`msg_${i}`, "wh_1", i), 3);
    t.same(
      (await webhooks.listDeliveries("ws_a", "wh_1", 10)).map((d) => d.id),
      ["msg_4", "msg_3", "msg_2"],
      "the oldest beyond `keep` dropped",
    );
    t.equal(await webhooks.getDelivery("ws_a", "msg_1"), null);
    const done = { ...delivery("msg_3", "wh_1", 3), status: "delivered" as const, attempts: 1, responseCode: 204, lastAttemptAt: 9 };
    await webhooks.saveDelivery(done, 3);
    t.same(await webhooks.getDelivery("ws_a", "msg_3"), done, "a save replaces the record");
    t.same(
      (await webhooks.listDeliveries("ws_a", "wh_1", 2)).map((d) => d.id),
      ["msg_4", "msg_3"],
      "limited, and a save of a known delivery does not log it twice",
    );
    t.same(await webhooks.listDeliveries("ws_a", "wh_other", 2), []);
    await webhooks.delete("ws_a", "wh_1");
    t.equal(await webhooks.getDelivery("ws_a", "msg_4"), null);
  });

  await t.test("webhook claims: once until they expire, per workspace and name", async (t) => {
    const { webhooks } = await open(t);
    t.equal(await webhooks.claim("ws_a", "rl:ns:a:1", 60_000), true);
    t.equal(await webhooks.claim("ws_a", "rl:ns:a:1", 60_000), false);
    t.equal(await webhooks.claim("ws_b", "rl:ns:a:1", 60_000), true);
    t.equal(await webhooks.claim("ws_a", "rl:ns:a:2", 60_000), true);
  });

  await t.test("webhook outbox: per endpoint order, leases, pending taken over, release and drop", async (t) => {
    const { webhookOutbox: outbox } = await open(t);
    t.same(await outbox.lease("a", 100, 1_000, 10), [], "nothing due");
    await outbox.enqueue([message("m1", "wh_1"), message("m2", "wh_2"), message("m3", "wh_1")], 100);
    await outbox.enqueue([], 100);
    const leases = await outbox.lease("a", 100, 1_000, 10);
    t.same(leases.map((l) => l.endpointId).sort(), ["wh_1", "wh_2"]);
    t.same(await outbox.lease("b", 100, 1_000, 10), [], "leased queues are not leased again");
    const one = leases.find((l) => l.endpointId === "wh_1") as (typeof leases)[number];
    const head = await outbox.head(one, 10);
    t.same(
      head.map((e) => e.message.id),
      ["m1", "m3"],
      "in order",
    );
    t.same(head[0]?.message, message("m1", "wh_1"));
    await outbox.ack(one, [head[0]?.entryId as string]);
    await outbox.ack(one, []);
    await outbox.release(one, 500);
    t.same(await outbox.lease("b", 499, 1_000, 10), [], "not due before the time it was released to");
    const [again] = await outbox.lease("b", 500, 1_000, 10);
    t.same(
      (await outbox.head(again as (typeof leases)[number], 10)).map((e) => e.message.id),
      ["m3"],
      "another owner gets what the first read and did not acknowledge",
    );
    await outbox.enqueue([message("m4", "wh_1")], 600);
    const rest = await outbox.head(again as (typeof leases)[number], 10);
    t.same(
      rest.map((e) => e.message.id),
      ["m3", "m4"],
    );
    await outbox.ack(
      again as (typeof leases)[number],
      rest.map((e) => e.entryId),
    );
    await outbox.release(again as (typeof leases)[number], 9_999);
    const two = leases.find((l) => l.endpointId === "wh_2") as (typeof leases)[number];
    await outbox.drop("wh_2");
    t.same(await outbox.head(two, 10), [], "a dropped queue has nothing");
    await outbox.release(two, 0);
    t.same(await outbox.lease("c", 99_999, 1_000, 10), [], "an empty queue is no longer due");
  });
}
