import t from "tap";
import { validateConfig } from "../../src/config/load.js";
import { CurrentGatewaySnapshot, compileGatewaySnapshot } from "../../src/gateway/gateway-snapshot.js";
import { RouteSync } from "../../src/gateway/route-sync.js";
import { MemoryRouteStore } from "../../src/storage/memory/route-store.js";
import type { RouteStore, StoredRouteTable } from "../../src/storage/route-interfaces.js";
import type { RouteRecord } from "../../src/storage/route-records.js";

const stored = (name: string, prefix: string): RouteRecord => ({
  id: `rt_${name}`,
  workspaceId: "ws_test",
  name,
  match: { prefix },
  upstream: "http://127.0.0.1:9",
  policies: [],
  createdAt: 0,
  updatedAt: 0,
});

function quietLog() {
  const lines: { level: string; details: object; message: string }[] = [];
  const at = (level: string) => (details: object, message: string) => void lines.push({ level, details, message });
  return { lines, log: { info: at("info"), warn: at("warn"), error: at("error") } as never };
}

const config = validateConfig({
  apis: [{ id: "api_file", name: "file", workspaceId: "ws_test" }],
  routes: [{ name: "file", match: { prefix: "/file" }, upstream: "http://127.0.0.1:9", apiId: "api_file" }],
});

t.test("a newer stored table is taken up whole; the file's routes stay; a clashing stored route is left out and logged", async (t) => {
  const store = new MemoryRouteStore();
  const snapshot = new CurrentGatewaySnapshot(compileGatewaySnapshot(config));
  const { lines, log } = quietLog();
  const sync = new RouteSync({ snapshot, store, log, checkMs: 60_000 });
  await sync.start();
  t.teardown(() => sync.stop());
  await store.update(() => ({ result: 0, routes: [stored("a", "/a"), stored("clash", "/file")] }));
  await sync.refresh();
  t.same(snapshot.current.table.routes.map((route) => route.name).sort(), ["a", "file"]);
  t.equal(snapshot.current.stored.version, 1);
  t.match(lines, [{ level: "error", details: { route: "clash" }, message: /clashes/ }]);
  t.match(snapshot.current.table.match("GET", "/file/x"), { name: "file" }, "the file's route keeps its prefix");
});

t.test("an older or equal table changes nothing; a store that fails leaves the routes in force", async (t) => {
  const snapshot = new CurrentGatewaySnapshot(compileGatewaySnapshot(config, { version: 5, routes: [stored("a", "/a")] }));
  const before = snapshot.current;
  t.equal(snapshot.applyStored({ version: 4, routes: [] }), false);
  t.equal(snapshot.applyStored({ version: 5, routes: [] }), false);
  t.equal(snapshot.current, before, "the same snapshot");

  const failing: RouteStore = {
    table: async (): Promise<StoredRouteTable> => {
      throw new Error("the store does not answer");
    },
    version: async () => 9,
    update: async () => {
      throw new Error("read-only");
    },
    openApi: async () => null,
  };
  const { lines, log } = quietLog();
  const sync = new RouteSync({ snapshot, store: failing, log });
  await sync.refresh();
  t.equal(snapshot.current, before, "the routes in force stay");
  t.match(lines, [{ level: "error", message: /cannot read or compile the stored routes/ }]);
});

t.test("announcements older than the table in force are ignored; reads run one at a time and share what is queued", async (t) => {
  const store = new MemoryRouteStore();
  let reads = 0;
  const counting: RouteStore = {
    table: () => {
      reads++;
      return store.table();
    },
    version: () => store.version(),
    update: (change) => store.update(change),
    openApi: (id) => store.openApi(id),
  };
  const snapshot = new CurrentGatewaySnapshot(compileGatewaySnapshot(config));
  const sync = new RouteSync({ snapshot, store: counting, log: quietLog().log });
  sync.announced(0);
  t.equal(reads, 0, "version 0 is in force already");
  await store.update(() => ({ result: 0, routes: [stored("a", "/a")] }));
  const first = sync.refresh();
  const second = sync.refresh();
  t.equal(first, second, "asks made before the queued read starts share it");
  await second;
  t.equal(reads, 1, "one read for both");
  const third = sync.refresh();
  t.not(third, first, "an ask made after a read started gets a read of its own");
  await third;
  t.equal(reads, 2);
  t.equal(snapshot.current.stored.version, 1);
});
