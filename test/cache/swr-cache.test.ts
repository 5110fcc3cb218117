import t from "tap";
import { SwrCache } from "../../src/cache/swr-cache.js";
import { ManualClock } from "../helpers/clock.js";

function setup(options: Partial<{ max: number }> = {}) {
  const clock = new ManualClock();
  const errors: unknown[] = [];
  const cache = new SwrCache<string>({
    max: options.max ?? 100,
    freshMs: 1_000,
    staleMs: 10_000,
    negativeMs: 500,
    clock,
    onRefreshError: (error) => errors.push(error),
  });
  return { clock, cache, errors };
}

t.test("a fresh entry is served without loading", async (t) => {
  const { cache } = setup();
  let loads = 0;
  const load = async () => `v${++loads}`;
  t.equal(await cache.get("k", load), "v1");
  t.equal(await cache.get("k", load), "v1");
  t.equal(loads, 1);
});

t.test("a cached answer comes at once, not as a promise; a load is a promise", async (t) => {
  const { cache, clock } = setup();
  const first = cache.get("k", async () => "v1");
  t.ok(first instanceof Promise, "a miss loads");
  await first;
  t.equal(
    cache.get("k", async () => "unused"),
    "v1",
    "fresh: the value itself",
  );
  clock.advance(1_000);
  t.equal(
    cache.get("k", async () => "v2"),
    "v1",
    "stale: the value itself, while it refreshes",
  );
  await Promise.resolve();
  t.equal(cache.get("absent", async () => null) instanceof Promise, true);
  await cache.get("absent", async () => null);
  t.equal(
    cache.get("absent", async () => "unused"),
    null,
    "known absent: null at once",
  );
});

t.test("peek answers only what is fresh, and never loads", async (t) => {
  const { cache, clock } = setup();
  t.equal(cache.peek("k"), undefined, "nothing cached");
  await cache.get("k", async () => "v1");
  t.equal(cache.peek("k"), "v1", "fresh");
  clock.advance(1_000);
  t.equal(cache.peek("k"), undefined, "stale: get() must revalidate");
  await cache.get("absent", async () => null);
  t.equal(cache.peek("absent"), null, "known absent while fresh");
  clock.advance(500);
  t.equal(cache.peek("absent"), undefined, "absence is not trusted past negativeMs");
  cache.delete("k");
  t.equal(cache.peek("k"), undefined, "deleted");
});

t.test("a stale entry is served at once and refreshed in the background once", async (t) => {
  const { cache, clock } = setup();
  let loads = 0;
  const load = async () => `v${++loads}`;
  await cache.get("k", load);
  clock.advance(2_000);
  t.equal(await cache.get("k", load), "v1", "stale value served");
  t.equal(await cache.get("k", load), "v1", "still served while the refresh runs");
  await new Promise((resolve) => setImmediate(resolve));
  t.equal(loads, 2, "one background refresh");
  t.equal(await cache.get("k", load), "v2", "refreshed value now fresh");
});

t.test("an entry past its stale window is loaded before answering", async (t) => {
  const { cache, clock } = setup();
  let loads = 0;
  const load = async () => `v${++loads}`;
  await cache.get("k", load);
  clock.advance(10_001);
  t.equal(await cache.get("k", load), "v2");
});

t.test("absence is cached briefly and never served stale", async (t) => {
  const { cache, clock } = setup();
  let value: string | null = null;
  let loads = 0;
  const load = async () => {
    loads++;
    return value;
  };
  t.equal(await cache.get("k", load), null);
  value = "now exists";
  t.equal(await cache.get("k", load), null, "negative entry trusted for negativeMs");
  clock.advance(501);
  t.equal(await cache.get("k", load), "now exists", "then loaded again synchronously");
  t.equal(loads, 2);
});

t.test("concurrent misses share one load", async (t) => {
  const { cache } = setup();
  let loads = 0;
  let release!: (value: string) => void;
  const load = () => {
    loads++;
    return new Promise<string>((resolve) => (release = resolve));
  };
  const waiting = Promise.all(Array.from({ length: 50 }, () => cache.get("k", load)));
  await new Promise((resolve) => setImmediate(resolve));
  release("shared");
  t.same(new Set(await waiting), new Set(["shared"]));
  t.equal(loads, 1);
});

t.test("delete during a load keeps the old value out", async (t) => {
  const { cache } = setup();
  let release!: (value: string) => void;
  const slow = cache.get("k", () => new Promise<string>((resolve) => (release = resolve)));
  await new Promise((resolve) => setImmediate(resolve));
  cache.delete("k");
  release("old");
  t.equal(await slow, "old", "the waiting caller still gets its answer");
  t.equal(await cache.get("k", async () => "new"), "new", "but it was not cached");
});

t.test("a failed load is not cached and a failed refresh keeps the stale value", async (t) => {
  const { cache, clock, errors } = setup();
  await t.rejects(async () => cache.get("k", async () => Promise.reject(new Error("down"))), /down/);
  t.equal(await cache.get("k", async () => "up"), "up");
  clock.advance(2_000);
  t.equal(await cache.get("k", async () => Promise.reject(new Error("refresh failed"))), "up");
  await new Promise((resolve) => setImmediate(resolve));
  t.equal(errors.length, 1);
  t.equal(await cache.get("k", async () => "later"), "up", "stale value still served after the failed refresh");
});

t.test("the least recently used entries are evicted past max", async (t) => {
  const { cache } = setup({ max: 2 });
  await cache.get("a", async () => "a");
  await cache.get("b", async () => "b");
  await cache.get("a", async () => "a");
  await cache.get("c", async () => "c");
  t.equal(cache.size, 2);
  t.equal(await cache.get("b", async () => "b reloaded"), "b reloaded");
  t.equal(await cache.get("c", async () => "c reloaded"), "c");
});

t.test("each load is given the value cached before, so it can revalidate cheaply", async (t) => {
  const { cache, clock } = setup();
  const seen: unknown[] = [];
  const load = async (previous: string | null | undefined) => {
    seen.push(previous);
    return `v${seen.length}`;
  };
  await cache.get("k", load);
  clock.advance(2_000);
  await cache.get("k", load);
  await new Promise((resolve) => setImmediate(resolve));
  t.same(seen, [undefined, "v1"]);
});

t.test("stale-if-error: past freshMs the value is reloaded before answering, and a stale one is served only if that fails", async (t) => {
  const clock = new ManualClock();
  const errors: unknown[] = [];
  const cache = new SwrCache<string>({
    max: 10,
    freshMs: 1_000,
    staleMs: 10_000,
    negativeMs: 0,
    mode: "stale-if-error",
    clock,
    onRefreshError: (error) => errors.push(error),
  });
  t.equal(await cache.get("k", async () => "v1"), "v1");
  clock.advance(1_000);
  t.equal(await cache.get("k", async () => "v2"), "v2", "no stale answer while the source answers");
  clock.advance(1_000);
  t.equal(await cache.get("k", async () => Promise.reject(new Error("down"))), "v2", "the source failed: the last value");
  t.equal(errors.length, 1, "the failure is reported");
  clock.advance(9_000);
  await t.rejects(async () => cache.get("k", async () => Promise.reject(new Error("down"))), /down/, "not beyond staleMs");
  t.equal(await cache.get("absent", async () => null), null);
  await t.rejects(
    async () => cache.get("absent", async () => Promise.reject(new Error("down"))),
    /down/,
    "absence is never served stale, and negativeMs 0 keeps it uncached",
  );
});

t.test("after revalidateAll every value is reloaded before it is trusted, and what the source says then wins", async (t) => {
  const { cache } = setup();
  await cache.get("changed", async () => "before");
  await cache.get("deleted", async () => "before");
  await cache.get("absent", async () => null);
  cache.revalidateAll();
  t.equal(cache.peek("changed"), undefined, "peek no longer vouches for it");
  const reload = cache.get("changed", async () => "after");
  t.ok(reload instanceof Promise, "a reload, though the value was fresh");
  t.equal(await reload, "after");
  t.equal(
    cache.get("changed", async () => "unused"),
    "after",
    "confirmed: served from memory again",
  );
  t.equal(await cache.get("deleted", async () => null), null, "gone at the source: gone here");
  t.equal(await cache.get("absent", async () => "created"), "created", "a known absence is asked again too");
});

t.test("after revalidateAll the last known value is served while the reload fails as keepServingOn allows, up to staleMs", async (t) => {
  const clock = new ManualClock();
  const errors: unknown[] = [];
  class Unavailable extends Error {}
  const cache = new SwrCache<string>({
    max: 10,
    freshMs: 1_000,
    staleMs: 10_000,
    negativeMs: 500,
    clock,
    keepServingOn: (error) => error instanceof Unavailable,
    onRefreshError: (error) => errors.push(error),
  });
  await cache.get("k", async () => "v1");
  await cache.get("absent", async () => null);
  cache.revalidateAll();
  const down = async () => Promise.reject(new Unavailable("down"));
  t.equal(await cache.get("k", down), "v1", "the source is unavailable: the last known value");
  t.equal(await cache.get("k", down), "v1", "and again: each call tries the source first");
  t.equal(errors.length, 2, "each failure is reported");
  await t.rejects(
    async () => cache.get("k", async () => Promise.reject(new Error("a bug"))),
    /a bug/,
    "a failure that is not unavailability reaches the caller",
  );
  await t.rejects(async () => cache.get("absent", down), /down/, "a known absence is never served on failure");
  clock.advance(10_000);
  await t.rejects(async () => cache.get("k", down), /down/, "not beyond staleMs");
  t.equal(await cache.get("k", async () => "v2"), "v2");
});

t.test("a load in flight when revalidateAll is called is not cached", async (t) => {
  const { cache } = setup();
  let release!: (value: string) => void;
  const slow = cache.get("k", () => new Promise<string>((resolve) => (release = resolve)));
  await new Promise((resolve) => setImmediate(resolve));
  cache.revalidateAll();
  release("read before");
  t.equal(await slow, "read before", "the waiting caller still gets its answer");
  t.equal(await cache.get("k", async () => "read after"), "read after", "but it was not trusted as confirmed");
});
