import t, { type Test } from "tap";
import type { CreditsNotice, Notice } from "../../../src/domain/notices.js";
import { retryDelay } from "../../../src/domain/webhooks/deliverer.js";
import { HttpWebhookSender } from "../../../src/http/webhook-sender.js";
import { verifySignature } from "../../helpers/webhook-receiver.js";
import { webhookServices } from "../../helpers/webhook-services.js";

const HOUR = 3_600_000;

/** The services with these webhooks settings, delivering to a receiver on loopback. */
const setup = (t: Test, webhooks: Record<string, unknown> = {}) => webhookServices(t, { webhooks });

function credits(type: CreditsNotice["type"], keyId: string, remaining: number): Notice {
  return {
    type,
    subject: { workspaceId: "ws_unit", apiId: "api_1", keyId, identityId: "id_1", externalId: "user_1" },
    remaining,
    threshold: 10,
  };
}

t.test("each notice reaches each subscribed endpoint once, signed as Standard Webhooks says", async (t) => {
  const { services, caller, receiver, deliver } = await setup(t);
  const { webhookId, secret } = await services.webhooks.service.create(caller, {
    url: receiver.url,
    events: ["key.credits.low", "identity.credits.exhausted", "key.credits.low"],
  });
  t.match(secret, /^whsec_[A-Za-z0-9+/]{43}=$/, "whsec_ and 32 bytes of base64");
  const other = await services.webhooks.service.create(caller, { url: `${receiver.url}?other`, events: ["ratelimit.exceeded"] });
  services.webhooks.dispatcher.post(credits("key.credits.low", "key_1", 9));
  services.webhooks.dispatcher.post(credits("identity.credits.exhausted", "key_1", 0));
  services.webhooks.dispatcher.post(credits("key.credits.exhausted", "key_1", 0));
  t.equal(await deliver(), 2, "two attempts: the third type has no subscriber");
  t.equal(await deliver(), 0, "nothing more");
  t.same(
    receiver.received.map((r) => r.event.type),
    ["key.credits.low", "identity.credits.exhausted"],
  );
  for (const r of receiver.received) {
    t.ok(verifySignature(secret, r.headers, r.body), "verified by an independent implementation");
    t.notOk(verifySignature(other.secret, r.headers, r.body), "not under another endpoint's secret");
    t.match(r.headers["webhook-id"], /^msg_/);
    t.match(r.headers["webhook-timestamp"], /^\d+$/);
  }
  t.same(receiver.received[0]?.event.data, {
    workspaceId: "ws_unit",
    apiId: "api_1",
    keyId: "key_1",
    identityId: "id_1",
    externalId: "user_1",
    remaining: 9,
    threshold: 10,
  });
  const log = await services.webhooks.service.deliveries(caller, { webhookId, limit: 10 });
  t.same(
    log.map((d) => [d.type, d.status, d.attempts, d.responseCode]),
    [
      ["identity.credits.exhausted", "delivered", 1, 204],
      ["key.credits.low", "delivered", 1, 204],
    ],
  );
  t.notOk(
    receiver.received.some((r) => r.body.includes("whsec_")),
    "no secret in a payload",
  );
});

t.test("a receiver down for a while: retries back off, order is kept, each event arrives once with its id", async (t) => {
  const { clock, services, caller, receiver, deliver } = await setup(t, { retryDelayMs: 1_000, maxRetryDelayMs: 8_000 });
  const { webhookId } = await services.webhooks.service.create(caller, { url: receiver.url, events: ["key.credits.low"] });
  receiver.status = 503;
  receiver.answerBody = "x".repeat(10_000);
  for (let i = 0; i < 5; i++) services.webhooks.dispatcher.post(credits("key.credits.low", `key_${i}`, i));
  t.equal(await deliver(), 1, "the first fails and holds the queue");
  t.equal(await deliver(), 0, "not before its retry");
  const [first] = await services.webhooks.service.deliveries(caller, { webhookId, limit: 10 }).then((l) => l.slice(-1));
  t.equal(first?.status, "pending");
  t.equal(first?.responseCode, 503);
  t.ok((first?.lastError?.length ?? 0) < 4_200, "the answer's body is capped");
  t.equal(first?.nextAttemptAt, clock.now() + 1_000);
  const delays: number[] = [];
  for (let attempt = 2; attempt <= 6; attempt++) {
    const delay = retryDelay(attempt - 1, { retryDelayMs: 1_000, maxRetryDelayMs: 8_000 });
    delays.push(delay);
    clock.advance(delay);
    t.equal(await deliver(), 1, `attempt ${attempt}`);
  }
  t.same(delays, [1_000, 2_000, 4_000, 8_000, 8_000], "doubling, capped");
  t.same(receiver.received, [], "nothing accepted while down");
  receiver.status = 200;
  clock.advance(8_000);
  t.equal(await deliver(), 5, "all five once it is up");
  t.same(
    receiver.received.map((r) => r.event.data.keyId),
    ["key_0", "key_1", "key_2", "key_3", "key_4"],
    "in order",
  );
  t.equal(new Set(receiver.received.map((r) => r.headers["webhook-id"])).size, 5, "one id each");
  const [head] = (await services.webhooks.service.deliveries(caller, { webhookId, limit: 10 })).slice(-1);
  t.equal(head?.attempts, 7);
  t.equal(head?.status, "delivered");
  t.same((await services.webhooks.service.list(caller))[0]?.failingSince, undefined, "a success clears the failure");
});

t.test("a delivery failing for longer than giveUpAfterMs is failed; an endpoint failing for days is disabled", async (t) => {
  const { clock, services, caller, receiver, deliver } = await setup(t, {
    retryDelayMs: HOUR,
    maxRetryDelayMs: HOUR,
    giveUpAfterMs: 24 * HOUR,
    disableAfterMs: 48 * HOUR,
  });
  const { webhookId } = await services.webhooks.service.create(caller, { url: receiver.url, events: ["key.credits.low"] });
  receiver.status = 302;
  services.webhooks.dispatcher.post(credits("key.credits.low", "key_a", 1));
  await deliver();
  for (let hour = 1; hour < 24; hour++) {
    clock.advance(HOUR);
    await deliver();
  }
  clock.advance(HOUR);
  services.webhooks.dispatcher.post(credits("key.credits.low", "key_b", 1));
  await deliver();
  const log = await services.webhooks.service.deliveries(caller, { webhookId, limit: 10 });
  t.same(
    log.map((d) => [d.status, d.attempts]),
    [
      ["pending", 1],
      ["failed", 25],
    ],
    "the first failed after a day of attempts, the next one tried (a redirect is a failure, not followed)",
  );
  t.equal(log[1]?.responseCode, 302);
  for (let hour = 0; hour < 24; hour++) {
    clock.advance(HOUR);
    await deliver();
  }
  const [endpoint] = await services.webhooks.service.list(caller);
  t.equal(endpoint?.enabled, false, "disabled after two days of failures");
  t.match(endpoint?.disabledReason, /deliveries failed for 48 hours/);
  t.equal((await services.webhooks.service.deliveries(caller, { webhookId, limit: 10 }))[0]?.status, "failed", "what it held is failed");
  services.webhooks.dispatcher.post(credits("key.credits.low", "key_c", 1));
  t.equal(await deliver(), 0, "a disabled endpoint gets nothing");
  const enabled = await services.webhooks.service.update(caller, { webhookId, enabled: true });
  t.equal(enabled.disabledReason, undefined, "enabled again by hand: the reason goes");
  t.equal(enabled.failingSince, undefined);
});

t.test("secret rotation: both secrets sign during the grace period, then only the new one", async (t) => {
  const { clock, services, caller, receiver, deliver } = await setup(t);
  const { webhookId, secret: old } = await services.webhooks.service.create(caller, { url: receiver.url, events: ["key.credits.low"] });
  const { secret, previousValidUntil } = await services.webhooks.service.rotateSecret(caller, { webhookId, graceMs: HOUR });
  t.not(secret, old);
  t.equal(previousValidUntil, clock.now() + HOUR);
  services.webhooks.dispatcher.post(credits("key.credits.low", "key_1", 1));
  await deliver();
  clock.advance(HOUR);
  services.webhooks.dispatcher.post(credits("key.credits.low", "key_2", 1));
  await deliver();
  const [during, after] = receiver.received;
  t.ok(during && verifySignature(old, during.headers, during.body), "old secret during the grace period");
  t.ok(during && verifySignature(secret, during.headers, during.body), "new secret too");
  t.equal(String(during?.headers["webhook-signature"]).split(" ").length, 2);
  t.ok(after && verifySignature(secret, after.headers, after.body));
  t.notOk(after && verifySignature(old, after.headers, after.body), "the old one no longer");
});

t.test("refused: private addresses unless allowed, and URLs that are not http", async (t) => {
  const { services, caller, receiver } = await setup(t, { allowPrivateAddresses: false });
  const codes = async (url: string) =>
    services.webhooks.service.create(caller, { url, events: ["key.created"] }).then(
      () => "ok",
      (e) => e.code,
    );
  t.equal(await codes(receiver.url), "err:unkey:application:invalid_input", "a loopback literal at creation");
  t.equal(await codes("http://[::ffff:10.0.0.1]/"), "err:unkey:application:invalid_input");
  t.equal(await codes("http://localhost/"), "err:unkey:application:invalid_input");
  t.equal(await codes("ftp://example.com/"), "err:unkey:application:invalid_input");
  t.equal(await codes("not a url"), "err:unkey:application:invalid_input");
  t.equal(await codes("https://user:pw@example.com/"), "err:unkey:application:invalid_input");
  // A name that resolves to loopback is refused when it is sent to, before connecting; so is a literal.
  const sender = new HttpWebhookSender({ timeoutMs: 5_000, maxResponseBytes: 100, allowPrivateAddresses: false });
  const attempt = { id: "msg_1", timestamp: 1, payload: "{}", secrets: [secretOf()] };
  const byName = await sender.send({ ...attempt, url: `http://localhost:${receiver.port}/hook` });
  t.match(byName, { ok: false, error: /^refused: localhost resolves to .*a private address/ });
  t.match(await sender.send({ ...attempt, url: receiver.url }), { ok: false, error: "refused: 127.0.0.1 is a private address" });
  t.match(await sender.send({ ...attempt, url: `http://[::ffff:127.0.0.1]:${receiver.port}/` }), { ok: false, error: /^refused/ });
  t.match(await sender.send({ ...attempt, url: "::nonsense" }), { ok: false, error: /does not parse/ });
  t.same(receiver.received, [], "never connected");
  const allowed = new HttpWebhookSender({ timeoutMs: 5_000, maxResponseBytes: 100, allowPrivateAddresses: true });
  t.match(await allowed.send({ ...attempt, url: `http://localhost:${receiver.port}/hook` }), { ok: true, status: 204 }, "allowed by name");
  t.match(await allowed.send({ ...attempt, url: "http://127.0.0.1:1/" }), { ok: false, error: /ECONNREFUSED/ });
});

function secretOf(): string {
  return `whsec_${Buffer.alloc(32, 7).toString("base64")}`;
}

t.test("an attempt that takes too long times out", async (t) => {
  const { createServer } = await import("node:http");
  const server = createServer(() => {});
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.teardown(() => {
    server.closeAllConnections();
    server.close();
  });
  const port = (server.address() as { port: number }).port;
  const sender = new HttpWebhookSender({ timeoutMs: 100, maxResponseBytes: 100, allowPrivateAddresses: true });
  t.same(await sender.send({ url: `http://127.0.0.1:${port}/`, id: "msg_1", timestamp: 1, payload: "{}", secrets: [secretOf()] }), {
    ok: false,
    error: "timed out after 100 ms",
  });
});
