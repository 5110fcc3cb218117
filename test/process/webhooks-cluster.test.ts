import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import t from "tap";
import { CLUSTER_ROOT_KEY, post, startPair, startServer } from "../helpers/process.js";
import { REDIS_URL, uniquePrefix } from "../helpers/redis.js";
import { waitFor } from "../helpers/wait.js";
import { Receiver, verifySignature } from "../helpers/webhook-receiver.js";

const WEBHOOKS =
  'analytics: { engine: "off" }\nwebhooks: { allowPrivateAddresses: true, pollIntervalMs: 50, leaseMs: 6000, timeoutMs: 5000 }\n';

t.test("two keygates on one Redis deliver each event once, each key's events in order", async (t) => {
  const receiver = new Receiver();
  await receiver.start();
  t.teardown(() => receiver.stop());
  const [a, b] = await startPair(t, WEBHOOKS);
  const events = ["key.created", "key.updated", "key.deleted"];
  const { secret } = (await post(a.baseUrl, "keygate.createWebhook", CLUSTER_ROOT_KEY, { url: receiver.url, events })).body.data;
  const apiId = (await post(a.baseUrl, "apis.createApi", CLUSTER_ROOT_KEY, { name: "hooked" })).body.data.apiId;
  const keys = 20;
  await Promise.all(
    Array.from({ length: keys }, async (_, i) => {
      const instance = i % 2 === 0 ? a : b;
      const { keyId } = (await post(instance.baseUrl, "keys.createKey", CLUSTER_ROOT_KEY, { apiId })).body.data;
      await post(instance.baseUrl, "keys.updateKey", CLUSTER_ROOT_KEY, { keyId, name: "n" });
      await post(instance.baseUrl, "keys.deleteKey", CLUSTER_ROOT_KEY, { keyId });
    }),
  );
  await waitFor(`${keys * 3} events`, 30_000, () => (receiver.received.length >= keys * 3 ? true : undefined));
  // Anything sent twice would arrive by now: one more event after all of them, and it must be the last.
  await post(b.baseUrl, "keys.createKey", CLUSTER_ROOT_KEY, { apiId });
  await waitFor("the last event", 30_000, () => (receiver.received.length > keys * 3 ? true : undefined));
  t.equal(receiver.received.length, keys * 3 + 1, "no event twice");
  const ids = receiver.received.map((r) => r.headers["webhook-id"]);
  t.equal(new Set(ids).size, ids.length, "one id per event");
  t.ok(
    receiver.received.every((r) => verifySignature(secret, r.headers, r.body)),
    "all signed",
  );
  const byKey = new Map<string, string[]>();
  for (const r of receiver.received) byKey.set(r.event.data.keyId, [...(byKey.get(r.event.data.keyId) ?? []), r.event.type]);
  t.equal(byKey.size, keys + 1);
  t.ok(
    [...byKey.values()].filter((types) => types.length === 3).every((types) => types.join() === events.join()),
    "created, updated, deleted: in order for every key",
  );
});

t.test("a keygate killed mid-delivery: the delivery is made again, with the same id, after a restart", async (t) => {
  const receiver = new Receiver();
  await receiver.start();
  t.teardown(() => receiver.stop());
  const path = join(mkdtempSync(join(tmpdir(), "keygate-webhooks-")), "keygate.yaml");
  writeFileSync(
    path,
    `storage:\n  redis: { url: "${REDIS_URL}", prefix: "${uniquePrefix(t, "hooks")}" }\nrootKeys:\n  - { key: "${CLUSTER_ROOT_KEY}", workspaceId: ws_cluster, permissions: ["*"] }\nlogging:\n  level: warn\n${WEBHOOKS}`,
  );
  const a = await startServer(t, { KEYGATE_CONFIG: path });
  await post(a.baseUrl, "keygate.createWebhook", CLUSTER_ROOT_KEY, { url: receiver.url, events: ["key.created"] });
  const apiId = (await post(a.baseUrl, "apis.createApi", CLUSTER_ROOT_KEY, { name: "killed" })).body.data.apiId;
  receiver.hold = true;
  const { keyId } = (await post(a.baseUrl, "keys.createKey", CLUSTER_ROOT_KEY, { apiId })).body.data;
  const [first] = await waitFor("the delivery under way", 10_000, () => (receiver.held.length > 0 ? receiver.held : undefined));
  a.child.kill("SIGKILL");
  await new Promise((resolve) => a.child.once("exit", resolve));
  receiver.hold = false;
  // The same configuration: the instance restarted (under a new consumer name; the dead one's lease must expire).
  await startServer(t, { KEYGATE_CONFIG: path });
  const [again] = await waitFor("the delivery again", 30_000, () => (receiver.received.length > 0 ? receiver.received : undefined));
  t.equal(again?.event.data.keyId, keyId);
  t.equal(again?.headers["webhook-id"], first?.headers["webhook-id"], "the same webhook-id: the receiver can tell it is the same");
  t.equal(receiver.received.length, 1);
});
