import { readdirSync } from "node:fs";
import t from "tap";
import { loadConfig } from "../../src/config/load.js";

const configDir = new URL("../../../config/", import.meta.url);

t.test("every YAML file shipped in config/ validates", async (t) => {
  const files = readdirSync(configDir).filter((name) => name.endsWith(".yaml"));
  t.ok(files.includes("keygate.example.yaml"));
  for (const name of files) {
    t.doesNotThrow(() => loadConfig({ env: { KEYGATE_CONFIG: new URL(name, configDir).pathname }, cwd: "/" }), name);
  }
});
