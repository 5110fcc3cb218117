import t, { type Test } from "tap";
import type { Notice } from "../../../src/domain/notices.js";
import { WebhookDispatcher } from "../../../src/domain/webhooks/dispatcher.js";
import { WebhookRunner } from "../../../src/domain/webhooks/webhook-runner.js";
import { WebhookSecrets } from "../../../src/domain/webhooks/webhook-secrets.js";
import { Vault } from "../../../src/lib/vault.js";
import { createMemoryStores } from "../../../src/storage/index.js";
import type { WebhookOutbox, WebhookStore } from "../../../src/storage/webhook-interfaces.js";
import type { WebhookEndpointRecord } from "../../../src/storage/webhook-records.js";
import { ManualClock, ManualScheduler } from "../../helpers/clock.js";
import { TEST_VAULT_KEY } from "../../helpers/fixtures.js";
import { webhookServices } from "../../helpers/webhook-services.js";

const HOUR = 3_600_000;

/** Endpoint wh_1 of workspace ws_a, subscribed to one event type. */
function endpointOf(event: WebhookEndpointRecord["events"][number]): WebhookEndpointRecord {
  return {
    id: "wh_1",
    workspaceId: "ws_a",
    url: "http://x/",
    events: [event],
    enabled: true,
    secret: { plain: "whsec_AA==" },
    createdAt: 0,
  };
}

/** The services with the test vault and these webhooks settings, delivering to a receiver on loopback. */
const setup = (t: Test, webhooks: Record<string, unknown> = {}) => webhookServices(t, { webhooks, vault: true });

t.test("key.expiring: once per key and expiry, within the lead time, in subscribed workspaces only", async (t) => {
  const { clock, stores, services, caller, receiver, deliver } = await setup(t, { expiringLeadMs: 24 * HOUR });
  const scan = () => services.webhooks.runner["deps"].scan() as Promise<number>;
  t.equal(await scan(), 0, "no endpoints, nothing scanned");
  await services.webhooks.service.create(caller, { url: receiver.url, events: ["key.created"] });
  const { apiId } = await services.apis.createApi(caller, { name: "expiring" });
  const soon = await services.keys.createKey(caller, {
    apiId,
    byteLength: 16,
    enabled: true,
    recoverable: false,
    expires: clock.now() + 2 * HOUR,
    externalId: "user_1",
  });
  await services.keys.createKey(caller, { apiId, byteLength: 16, enabled: true, recoverable: false, expires: clock.now() + 48 * HOUR });
  await services.keys.createKey(caller, { apiId, byteLength: 16, enabled: true, recoverable: false });
  t.equal(await scan(), 0, "no endpoint subscribed to key.expiring");
  const { webhookId } = await services.webhooks.service.create(caller, { url: receiver.url, events: ["key.expiring"] });
  t.equal(await scan(), 1, "the key expiring within a day");
  t.equal(await scan(), 0, "told once");
  await deliver();
  const [told] = receiver.of("key.expiring");
  t.match(told?.event.data, { keyId: soon.keyId, apiId, externalId: "user_1", identityId: /^id_/, expires: clock.now() + 2 * HOUR });
  await services.keys.updateKey(caller, { keyId: soon.keyId, expires: clock.now() + 3 * HOUR });
  t.equal(await scan(), 1, "a new expiry is told again");
  clock.advance(25 * HOUR);
  t.equal(await scan(), 1, "the second key comes within the lead time; the first has expired");
  await stores.apis.markDeleted("ws_unit", apiId, clock.now());
  clock.advance(20 * HOUR);
  t.equal(await scan(), 0, "keys of a deleted API are not told");
  await services.webhooks.service.update(caller, { webhookId, enabled: false });
});

t.test("the runner: at once when woken, every poll interval when idle, the scan on its own interval, stopped cleanly", async (t) => {
  const clock = new ManualClock();
  const scheduler = new ManualScheduler(clock);
  const passes: number[] = [];
  let work = 0;
  let scans = 0;
  const errors: unknown[] = [];
  const runner = new WebhookRunner({
    deliver: async () => {
      passes.push(clock.now());
      if (work === -1) {
        work = 0;
        throw new Error("store down");
      }
      const done = work;
      work = 0;
      return done;
    },
    scan: async () => {
      scans += 1;
      if (scans === 2) throw new Error("scan failed");
    },
    scheduler,
    pollMs: 100,
    scanIntervalMs: 1_000,
    onError: (error) => errors.push(error),
  });
  const settle = () => new Promise((resolve) => setImmediate(resolve));
  runner.wake();
  t.equal(scheduler.pending, 0, "nothing before start");
  runner.start();
  runner.start();
  scheduler.advance(0);
  await settle();
  t.equal(passes.length, 1, "a pass at start");
  work = 3;
  runner.wake();
  scheduler.advance(0);
  await settle();
  scheduler.advance(0);
  await settle();
  t.equal(passes.length, 3, "woken, then again at once after a pass that did work");
  scheduler.advance(99);
  await settle();
  t.equal(passes.length, 3);
  scheduler.advance(1);
  await settle();
  t.equal(passes.length, 4, "idle: every poll interval");
  work = -1;
  scheduler.advance(100);
  await settle();
  t.match(errors, [{ message: "store down" }], "a failed pass is reported and the runner goes on");
  scheduler.advance(1_000);
  await settle();
  scheduler.advance(1_000);
  await settle();
  t.equal(scans, 2, "the scan every interval, after the one before ended");
  t.match(errors[1], { message: "scan failed" });
  await runner.stop();
  t.equal(scheduler.pending, 0, "nothing left scheduled");
  runner.wake();
  t.equal(scheduler.pending, 0, "a stopped runner is not woken");
});

t.test("the dispatcher: a failed outbox write or too many waiting notices are reported, not thrown", async (t) => {
  const clock = new ManualClock();
  const stores = createMemoryStores({ clock });
  await stores.webhooks.create(endpointOf("key.created"));
  const failing: WebhookOutbox = { ...stores.webhookOutbox, enqueue: async () => Promise.reject(new Error("outbox down")) };
  const lost: string[] = [];
  const dispatcher = new WebhookDispatcher({
    store: stores.webhooks,
    outbox: failing,
    clock,
    keepDeliveries: 10,
    maxWaiting: 1,
    onError: (error, notice) => lost.push(`${notice.type}: ${(error as Error).message}`),
  });
  const notice: Notice = { type: "key.created", subject: { workspaceId: "ws_a", apiId: "api_1", keyId: "key_1" } };
  dispatcher.post(notice);
  dispatcher.post(notice);
  dispatcher.post(notice);
  await dispatcher.flush();
  t.same(lost, ["key.created: too many notices waiting for the webhook outbox", "key.created: outbox down", "key.created: outbox down"]);
});

t.test("ratelimit.exceeded: once per window across dispatchers sharing a store", async (t) => {
  const clock = new ManualClock();
  const stores = createMemoryStores({ clock });
  await stores.webhooks.create(endpointOf("ratelimit.exceeded"));
  const make = () =>
    new WebhookDispatcher({
      store: stores.webhooks,
      outbox: stores.webhookOutbox,
      clock,
      keepDeliveries: 10,
      maxWaiting: 10,
      onError: () => {},
    });
  const notice = (reset: number): Notice => ({
    type: "ratelimit.exceeded",
    workspaceId: "ws_a",
    namespaceId: "rlns_1",
    namespaceName: "api",
    identifier: "alice",
    limit: 1,
    duration: 1_000,
    reset,
  });
  const [one, two] = [make(), make()];
  one.post(notice(clock.now() + 1_000));
  two.post(notice(clock.now() + 1_000));
  await one.flush();
  await two.flush();
  clock.advance(1_000);
  two.post(notice(clock.now() + 1_000));
  await two.flush();
  t.equal((await stores.webhooks.listDeliveries("ws_a", "wh_1", 10)).length, 2, "one per window");
});

t.test("secrets: sealed under the vault key, bound to the endpoint; without the key they cannot be opened", async (t) => {
  const sealedBy = new WebhookSecrets(new Vault(TEST_VAULT_KEY));
  const secret = sealedBy.generate();
  const stored = sealedBy.seal(secret, "ws_a", "wh_1");
  t.notOk(JSON.stringify(stored).includes(secret.slice(6)), "not in clear");
  t.equal(sealedBy.open(stored, "ws_a", "wh_1"), secret);
  t.throws(() => sealedBy.open(stored, "ws_a", "wh_2"), "not on another endpoint");
  t.throws(() => new WebhookSecrets(undefined).open(stored, "ws_a", "wh_1"), /none is configured/);
  t.same(new WebhookSecrets(undefined).seal("whsec_x", "ws_a", "wh_1"), { plain: "whsec_x" });
});

t.test("a test event to a disabled endpoint fails; messages of a deleted endpoint are dropped", async (t) => {
  const { services, caller, receiver, deliver, stores, clock } = await setup(t);
  const { webhookId } = await services.webhooks.service.create(caller, { url: receiver.url, events: ["key.created"] });
  await services.webhooks.service.update(caller, { webhookId, enabled: false, url: `${receiver.url}?v=2`, description: "d" });
  const { messageId } = await services.webhooks.service.test(caller, { webhookId });
  await deliver();
  const [delivery] = await services.webhooks.service.deliveries(caller, { webhookId, limit: 1 });
  t.match(delivery, { id: messageId, status: "failed", lastError: "the endpoint is disabled", attempts: 0 });
  await stores.webhookOutbox.enqueue(
    [{ id: "msg_x", workspaceId: "ws_unit", endpointId: "wh_gone", type: "key.created", payload: "{}", createdAt: clock.now() }],
    clock.now(),
  );
  await deliver();
  t.same(await stores.webhooks.getDelivery("ws_unit", "msg_x"), {
    id: "msg_x",
    workspaceId: "ws_unit",
    endpointId: "wh_gone",
    type: "key.created",
    status: "failed",
    attempts: 0,
    createdAt: clock.now(),
    lastError: "the endpoint was deleted",
  });
  t.same(receiver.received, []);
  const codes = async (work: Promise<unknown>) =>
    work.then(
      () => "ok",
      (e) => e.code,
    );
  t.equal(
    await codes(services.webhooks.service.update(caller, { webhookId: "wh_none", enabled: true })),
    "err:keygate:data:webhook_not_found",
  );
  t.equal(await codes(services.webhooks.service.rotateSecret(caller, { webhookId: "wh_none" })), "err:keygate:data:webhook_not_found");
  t.equal(await codes(services.webhooks.service.test(caller, { webhookId: "wh_none" })), "err:keygate:data:webhook_not_found");
  t.equal(await codes(services.webhooks.service.delete(caller, { webhookId: "wh_none" })), "err:keygate:data:webhook_not_found");
});

t.test("at most maxEndpoints per workspace", async (t) => {
  const { services, caller, receiver } = await setup(t, { maxEndpoints: 1 });
  await services.webhooks.service.create(caller, { url: receiver.url, events: ["key.created"] });
  await t.rejects(services.webhooks.service.create(caller, { url: receiver.url, events: ["key.created"] }), {
    code: "err:unkey:application:invalid_input",
  });
});

t.test("the dispatcher: a notice whose endpoints cannot be read is reported, and the others of its batch still go", async (t) => {
  const clock = new ManualClock();
  const stores = createMemoryStores({ clock });
  await stores.webhooks.create(endpointOf("key.created"));
  const lost: string[] = [];
  const store: WebhookStore = Object.create(stores.webhooks);
  store.list = (ws: string) => (ws === "ws_down" ? Promise.reject(new Error("store down")) : stores.webhooks.list(ws));
  const dispatcher = new WebhookDispatcher({
    store,
    outbox: stores.webhookOutbox,
    clock,
    keepDeliveries: 10,
    maxWaiting: 10,
    onError: (error, notice) => lost.push(`${notice.type}: ${(error as Error).message}`),
  });
  dispatcher.post({ type: "key.created", subject: { workspaceId: "ws_a", apiId: "api_1", keyId: "key_0" } });
  dispatcher.post({ type: "key.created", subject: { workspaceId: "ws_down", apiId: "api_1", keyId: "key_1" } });
  dispatcher.post({ type: "key.created", subject: { workspaceId: "ws_a", apiId: "api_1", keyId: "key_2" } });
  await dispatcher.flush();
  t.same(lost, ["key.created: store down"]);
  t.equal((await stores.webhooks.listDeliveries("ws_a", "wh_1", 10)).length, 2);
});
