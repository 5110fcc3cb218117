import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import t from "tap";
import { parse } from "yaml";
import { createApi, createKey } from "../helpers/fixtures.js";
import { harness } from "../helpers/harness.js";

// The Grafana dashboard and the Prometheus alerts in deploy/ query only series keygate exports.

const DEPLOY = join(dirname(fileURLToPath(import.meta.url)), "../../../deploy");

function seriesNamed(text: string): Set<string> {
  return new Set([...text.matchAll(/\b(keygate_[a-z_]+|process_[a-z_]+|nodejs_[a-z0-9_]+)/g)].map((match) => match[1] as string));
}

t.test("every series the dashboard and the alerts use is in a scrape", async (t) => {
  const dashboard = JSON.parse(readFileSync(join(DEPLOY, "grafana/dashboards/keygate.json"), "utf8"));
  const alerts = parse(readFileSync(join(DEPLOY, "prometheus/alerts.yml"), "utf8"));
  const expressions = [
    ...dashboard.panels.flatMap((panel: { targets: { expr: string }[] }) => panel.targets.map((target) => target.expr)),
    ...alerts.groups.flatMap((group: { rules: { expr: string }[] }) => group.rules.map((rule) => rule.expr)),
  ];
  t.ok(dashboard.panels.length >= 10, "the dashboard has its panels");
  const h = await harness(t);
  // Some traffic, so that labelled series have samples.
  const { key } = await createKey(h, await createApi(h));
  await h.call("keys.verifyKey", { key });
  const scrape = (await h.app.inject({ method: "GET", url: "/metrics" })).body;
  const exported = new Set(
    [...scrape.matchAll(/^# TYPE (\S+) (\S+)$/gm)].flatMap((match) => {
      const name = match[1] as string;
      return match[2] === "histogram" ? [`${name}_bucket`, `${name}_count`, `${name}_sum`] : [name];
    }),
  );
  const used = seriesNamed(expressions.join("\n"));
  t.ok(used.size >= 10, `${used.size} series used`);
  for (const name of used) t.ok(exported.has(name), `${name} is exported`);
});
