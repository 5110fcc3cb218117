/**
 * One keygate instance that makes usage reports, for the test of several instances on one Redis
 * (test/usage/usage-reports-instances.test.ts). It builds the application on the Redis prefix and the embedded
 * analytics directory it is given, with an injected clock, and answers its parent over IPC:
 *   { type: "record", events }  records verification events and writes them to its engine → { type: "recorded" }
 *   { type: "tick", now }        sets its clock and runs one reporter pass                → { type: "produced", reports, corrections }
 * It says { type: "ready", owner } once built. Nothing runs in the background: the parent drives every pass.
 */
import { buildApp } from "../../src/app.js";
import { validateConfig } from "../../src/config/load.js";
import type { VerificationEvent } from "../../src/domain/analytics/events.js";
import { ManualClock } from "./clock.js";

const [redisUrl, prefix, analyticsPath, start] = process.argv.slice(2);
const clock = new ManualClock(Number(start));
const config = validateConfig({
  storage: { redis: { url: redisUrl, prefix } },
  analytics: { engine: "embedded", path: analyticsPath },
  webhooks: { deliver: false, allowPrivateAddresses: true },
});
const app = await buildApp(config, { clock, logger: false });
const reporter = app.services.webhooks.usageReporter;

type Message = { type: "record"; events: VerificationEvent[] } | { type: "tick"; now: number };

process.on("message", (message: Message) => {
  void (async () => {
    if (message.type === "record") {
      for (const event of message.events) app.analytics.sinks.verifications.record(event);
      await app.analytics.flush();
      process.send?.({ type: "recorded" });
    } else {
      clock.set(message.now);
      const produced = await reporter.produce();
      process.send?.({ type: "produced", ...produced });
    }
  })();
});
process.send?.({ type: "ready", owner: reporter.owner });
