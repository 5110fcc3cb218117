import { type ChildProcess, fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import { Redis } from "ioredis";
import t, { type Test } from "tap";
import type { VerificationEvent } from "../../src/domain/analytics/events.js";
import { reportId } from "../../src/domain/usage/usage-events.js";
import type { UsageSubjectRef } from "../../src/domain/usage/usage-queries.js";
import { analyticsDir, event } from "../helpers/analytics.js";
import { ManualClock } from "../helpers/clock.js";
import { harness } from "../helpers/harness.js";
import { REDIS_URL } from "../helpers/redis.js";
import { Receiver } from "../helpers/webhook-receiver.js";

/**
 * Two keygate processes on one Redis make the usage reports of one endpoint, each from its own analytics engine
 * holding the same verifications (as two instances on one ClickHouse server would read them), driven on an
 * injected clock; the one holding the producer's lease is killed (SIGKILL) in the middle of a period. Every
 * subject's every closed period is reported exactly once, by one or the other, under the id derived from endpoint,
 * subject and period.
 */

const HOUR = 3_600_000;
const MINUTE = 60_000;
/** analytics.buffer.flushIntervalMs (5 s) plus the margin of a minute. */
const DELAY = 65_000;
const CHILD = fileURLToPath(new URL("../helpers/usage-report-child.js", import.meta.url));

interface Instance {
  child: ChildProcess;
  owner: string;
  /** Sends a message and waits for the answer of `answer` type. */
  ask(message: unknown, answer: string): Promise<Record<string, any>>;
}

async function startInstance(t: Test, prefix: string, start: number): Promise<Instance> {
  const child = fork(CHILD, [REDIS_URL, prefix, analyticsDir(t), String(start)], { stdio: ["ignore", "inherit", "inherit", "ipc"] });
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  });
  const waiting = new Map<string, (message: Record<string, any>) => void>();
  child.on("message", (message: Record<string, any>) => {
    waiting.get(message.type)?.(message);
    waiting.delete(message.type);
  });
  const answer = (type: string) =>
    new Promise<Record<string, any>>((resolve, reject) => {
      waiting.set(type, resolve);
      child.once("exit", (code, signal) => reject(new Error(`instance exited (${code ?? signal}) before answering ${type}`)));
    });
  const ready = await answer("ready");
  return {
    child,
    owner: ready.owner,
    ask: (message, type) => {
      const answered = answer(type);
      child.send(message as object);
      return answered;
    },
  };
}

t.test("two instances on one Redis, the lease's holder killed mid-period: each period reported exactly once", async (t) => {
  const workspace = "ws_usage_instances";
  const start = Math.floor(Date.now() / HOUR) * HOUR - 10 * HOUR;
  const clock = new ManualClock(start);
  const receiver = new Receiver();
  await receiver.start();
  t.teardown(() => receiver.stop());
  // This process: the management API (endpoint, identities, keys) and the deliverer, on the instances' Redis.
  const h = await harness(t, {
    storage: "redis",
    clock,
    config: {
      apis: [{ id: "api_instances", name: "instances", workspaceId: workspace }],
      analytics: { engine: "embedded", path: analyticsDir(t) },
      webhooks: { deliver: false, allowPrivateAddresses: true },
    },
  });
  const root = await h.rootKey(["*"], workspace);
  const call = async (procedure: string, body: unknown) => {
    const response = await h.call(procedure, body, { rootKey: root });
    t.equal(response.status, 200, procedure);
    return response.body.data;
  };
  const hook = await call("keygate.createWebhook", { url: receiver.url, events: ["usage.reported"] });
  const acme = (await call("identities.createIdentity", { externalId: "acme" })).identityId as string;
  const globex = (await call("identities.createIdentity", { externalId: "globex" })).identityId as string;
  const acmeKey = (await call("keys.createKey", { apiId: "api_instances", externalId: "acme" })).keyId as string;
  const globexKey = (await call("keys.createKey", { apiId: "api_instances", externalId: "globex" })).keyId as string;
  const loneKey = (await call("keys.createKey", { apiId: "api_instances" })).keyId as string;
  const subjects: Record<string, { ref: UsageSubjectRef; event: Partial<VerificationEvent> }> = {
    acme: {
      ref: { kind: "identity", identityId: acme, externalId: "acme" },
      event: { keyId: acmeKey, identityId: acme, externalId: "acme" },
    },
    globex: {
      ref: { kind: "identity", identityId: globex, externalId: "globex" },
      event: { keyId: globexKey, identityId: globex, externalId: "globex" },
    },
    lone: { ref: { kind: "key", keyId: loneKey, keySpaceId: "" }, event: { keyId: loneKey } },
  };

  // Eight hours of verifications: acme every hour, globex every other hour, the lone key in hour 3 only.
  const HOURS = 8;
  const events: VerificationEvent[] = [];
  const expected = new Map<string, number>();
  for (let hour = 0; hour < HOURS; hour++) {
    const users = ["acme", ...(hour % 2 === 0 ? ["globex"] : []), ...(hour === 3 ? ["lone"] : [])];
    for (const [index, name] of users.entries()) {
      const subject = subjects[name] as (typeof subjects)[string];
      const count = 1 + ((hour + index) % 3);
      for (let n = 0; n < count; n++) {
        events.push(event({ workspaceId: workspace, time: start + hour * HOUR + (n + 1) * MINUTE, ...subject.event }));
      }
      const period = { granularity: "hourly" as const, start: start + hour * HOUR, end: start + (hour + 1) * HOUR };
      expected.set(reportId(hook.webhookId, subject.ref, period), count);
    }
  }

  const prefix = h.config.storage.redis?.prefix as string;
  const instances = [await startInstance(t, prefix, start), await startInstance(t, prefix, start)];
  await Promise.all(instances.map((instance) => instance.ask({ type: "record", events }, "recorded")));
  const produced = new Map<string, number>(instances.map((instance) => [instance.owner, 0]));
  const tick = async (alive: Instance[], now: number) => {
    const answers = await Promise.all(alive.map((instance) => instance.ask({ type: "tick", now }, "produced")));
    for (const [index, answer] of answers.entries()) {
      const owner = (alive[index] as Instance).owner;
      produced.set(owner, (produced.get(owner) ?? 0) + answer.reports);
    }
  };

  // Both run every pass, at the same moments: hours 0 to 2 close and are reported, by whichever takes the lease.
  for (let hour = 1; hour <= 3; hour++) await tick(instances, start + hour * HOUR + DELAY);
  const redis = new Redis(REDIS_URL);
  t.teardown(() => redis.quit());
  const holder = await redis.hget(`${prefix}:{usage-reports}:lease`, "owner");
  const victim = instances.find((instance) => instance.owner === holder);
  if (!victim) throw new Error(`the lease is held by ${holder}, which is neither instance`);
  // The middle of hour 3: the holder (which has just reported hour 2) passes again, renewing its lease, and dies.
  await tick([victim], start + 3 * HOUR + 30 * MINUTE);
  t.equal(await redis.hget(`${prefix}:{usage-reports}:lease`, "owner"), victim.owner, "it holds the lease as it dies");
  const survivor = instances.find((instance) => instance !== victim) as Instance;
  const killed = new Promise((resolve) => victim.child.once("exit", resolve));
  victim.child.kill("SIGKILL");
  await killed;
  t.equal(victim.child.signalCode, "SIGKILL", "the holder was killed");
  const beforeKill = produced.get(victim.owner) ?? 0;

  // The survivor carries on once the dead holder's lease has run out (within the period's delay).
  for (let hour = 4; hour <= HOURS; hour++) await tick([survivor], start + hour * HOUR + DELAY);

  // The outbox's queue is due from the time the survivor enqueued at.
  clock.set(start + HOURS * HOUR + DELAY);
  while ((await h.app.services.webhooks.deliverer.deliverDue()) > 0);
  const received = receiver.received.map((each) => JSON.parse(each.body) as { id: string; type: string; data: Record<string, any> });
  const ids = received.map((each) => each.id);
  t.equal(received.length, expected.size, `${expected.size} reports received`);
  t.same(new Set(ids).size, ids.length, "none twice");
  t.same([...ids].sort(), [...expected.keys()].sort(), "one for every subject's every period, under its derived id");
  t.ok(
    received.every((each) => each.data.requests === expected.get(each.id)),
    "each with the verifications its subject made in its period",
  );
  t.same(receiver.received.map((each) => each.headers["webhook-id"]).sort(), [...expected.keys()].sort(), "webhook-id is the report's id");
  t.ok(beforeKill > 0, "the killed holder reported periods before it died");
  t.ok((produced.get(survivor.owner) ?? 0) > 0, "the survivor reported the periods after");
  t.equal(beforeKill + (produced.get(survivor.owner) ?? 0), expected.size, "between them, each report made once");
});
