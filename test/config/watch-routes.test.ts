import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import t from "tap";
import { watchRoutes } from "../../src/config/reload.js";

/** Lays out `directory` as a Kubernetes ConfigMap volume does: the file a link into `..data`, itself a link. */
function configMapVolume(directory: string, version: string, content: string): void {
  mkdirSync(join(directory, version));
  writeFileSync(join(directory, version, "keygate.yaml"), content);
  symlinkSync(version, join(directory, "..data_tmp"));
  renameSync(join(directory, "..data_tmp"), join(directory, "..data"));
}

t.test("a ConfigMap update, which swaps the ..data link and leaves the file's own name alone, reloads the routes", async (t) => {
  const directory = mkdtempSync(join(tmpdir(), "keygate-configmap-"));
  t.teardown(() => rmSync(directory, { recursive: true, force: true }));
  configMapVolume(directory, "..2026_12_07_01", "routes: []\n");
  symlinkSync("..data/keygate.yaml", join(directory, "keygate.yaml"));

  let reloaded!: () => void;
  const reload = new Promise<void>((resolve) => {
    reloaded = resolve;
  });
  const stop = watchRoutes({ path: join(directory, "keygate.yaml"), watchFile: true, reload: () => reloaded(), debounceMs: 10 });
  t.teardown(stop);

  configMapVolume(directory, "..2026_12_07_02", "routes: []\n# changed\n");
  await reload;
  t.pass("the swap of ..data reloaded");
});

t.test("a file replaced under its own name reloads the routes", async (t) => {
  const directory = mkdtempSync(join(tmpdir(), "keygate-config-"));
  t.teardown(() => rmSync(directory, { recursive: true, force: true }));
  writeFileSync(join(directory, "keygate.yaml"), "routes: []\n");
  let reloaded!: () => void;
  const reload = new Promise<void>((resolve) => {
    reloaded = resolve;
  });
  const stop = watchRoutes({ path: join(directory, "keygate.yaml"), watchFile: true, reload: () => reloaded(), debounceMs: 10 });
  t.teardown(stop);
  writeFileSync(join(directory, "keygate.yaml.tmp"), "routes: []\n# changed\n");
  renameSync(join(directory, "keygate.yaml.tmp"), join(directory, "keygate.yaml"));
  await reload;
  t.pass("the replaced file reloaded");
});
