/**
 * A separate keygate process for the persistence test: `write <dir> <count>` records events through the
 * embedded engine's pipeline and exits after a graceful close; `query <dir> <sql>` starts the app on the same
 * directory and prints the answer of analytics.getVerifications as JSON.
 */
import { openAnalytics } from "../../src/analytics/index.js";
import { buildApp } from "../../src/app.js";
import { validateConfig } from "../../src/config/load.js";
import { systemClock } from "../../src/lib/clock.js";

const [mode, path, argument] = process.argv.slice(2);
const config = validateConfig({
  rootKeys: [{ key: "root_child_process", workspaceId: "ws_child", permissions: ["*"] }],
  // A flush interval far away: only the close at exit can write the events.
  analytics: { engine: "embedded", path, buffer: { flushIntervalMs: 600_000 } },
});

if (mode === "write") {
  const analytics = await openAnalytics(config.analytics, { clock: systemClock });
  for (let n = 0; n < Number(argument); n++) {
    analytics.sinks.verifications.record({
      requestId: `req_child${n}`,
      time: Date.now(),
      workspaceId: "ws_child",
      keySpaceId: "",
      keyId: "",
      identityId: "",
      externalId: "child",
      outcome: "VALID",
      tags: [],
      spentCredits: 0,
      creditsSource: "",
      latencyMs: 1,
    });
  }
  await analytics.close();
  console.log(JSON.stringify(analytics.stats()));
} else if (mode === "query") {
  const app = await buildApp(config, { logger: false });
  const response = await app.inject({
    method: "POST",
    url: "/v2/analytics.getVerifications",
    headers: { authorization: "Bearer root_child_process", "content-type": "application/json" },
    payload: { query: argument },
  });
  await app.close();
  console.log(response.body);
} else {
  console.error("usage: analytics-child.js write <dir> <count> | query <dir> <sql>");
  process.exit(2);
}
