import t from "tap";
import { SwrCache } from "../../src/cache/swr-cache.js";
import { ManualClock } from "../helpers/clock.js";

/** A string's estimated size: its length, so the tests can count bytes. */
const sizeOf = (value: string) => value.length;

function setup(options: Partial<{ maxBytes: number; absentMaxBytes: number }> = {}) {
  const clock = new ManualClock();
  const errors: unknown[] = [];
  const cache = new SwrCache<string>({
    maxBytes: options.maxBytes ?? 1_000_000,
    absentMaxBytes: options.absentMaxBytes ?? 100_000,
    sizeOf,
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

t.test("the least recently used entries are evicted to stay within maxBytes, and the evictions are counted", async (t) => {
  // Each entry: its estimated overhead, its one-character key and its value of 100 characters.
  const value = (name: string) => name.repeat(100);
  const entryBytes = await chargedFor(value("a"));
  const { cache } = setup({ maxBytes: entryBytes * 2 });
  await cache.get("a", async () => value("a"));
  await cache.get("b", async () => value("b"));
  await cache.get("a", async () => value("a"));
  await cache.get("c", async () => value("c"));
  t.equal(cache.size, 2);
  t.same(cache.stats(), { entries: 2, bytes: entryBytes * 2, maxBytes: entryBytes * 2, evictions: 1 });
  t.equal(await cache.get("b", async () => "b reloaded"), "b reloaded", "b was the least recently used");
  t.equal(await cache.get("c", async () => "c reloaded"), value("c"));
});

t.test("a stream of distinct keys never takes the cache over its byte budget", async (t) => {
  const maxBytes = 50_000;
  const { cache } = setup({ maxBytes, absentMaxBytes: 5_000 });
  for (let i = 0; i < 5_000; i++) {
    await cache.get(`key-${i}`, async () => (i % 3 === 0 ? null : "v".repeat(i % 200)));
    if (cache.stats().bytes > maxBytes || cache.absentStats().bytes > 5_000) t.fail(`over budget after ${i} keys`);
  }
  t.ok(cache.stats().bytes <= maxBytes);
  const { entries, bytes, evictions } = cache.stats();
  t.ok(entries > 100, `still holds many entries (${entries}, ${bytes} bytes)`);
  t.ok(evictions > 1_000, "made room by evicting the least recently used");
  t.ok(cache.absentStats().entries > 10 && cache.absentStats().evictions > 0, "absences have a budget of their own");
});

t.test("a flood of unknown keys does not push known ones out: absences are an LRU of their own", async (t) => {
  const { cache } = setup({ absentMaxBytes: 2_000 });
  await cache.get("known", async () => "value");
  for (let i = 0; i < 1_000; i++) await cache.get(`unknown-${i}`, async () => null);
  let reloaded = false;
  t.equal(
    await cache.get("known", async () => {
      reloaded = true;
      return "reloaded";
    }),
    "value",
  );
  t.notOk(reloaded, "the known key is still cached");
  t.ok(cache.absentStats().bytes <= 2_000);
  t.equal(cache.absentStats().maxBytes, 2_000);
});

t.test("without a budget for absences none are kept: an unknown key is asked again", async (t) => {
  const { cache } = setup({ absentMaxBytes: 0 });
  let loads = 0;
  const absent = async () => {
    loads++;
    return null;
  };
  await cache.get("absent", absent);
  await cache.get("absent", absent);
  t.equal(loads, 2);
  t.same(cache.absentStats(), { entries: 0, bytes: 0, maxBytes: 0, evictions: 0 });
});

t.test("a key that becomes absent leaves the values' budget, and one that appears leaves the absences'", async (t) => {
  const { cache, clock } = setup();
  await cache.get("k", async () => "value");
  clock.advance(20_000);
  t.equal(await cache.get("k", async () => null), null);
  t.equal(cache.stats().entries, 0);
  t.equal(cache.absentStats().entries, 1);
  cache.delete("k");
  t.equal(await cache.get("k", async () => "back"), "back");
  t.same([cache.stats().entries, cache.absentStats().entries], [1, 0]);
});

/** What the cache charges for an entry of a one-character key holding `value`. */
async function chargedFor(value: string): Promise<number> {
  const { cache } = setup();
  await cache.get("x", async () => value);
  return cache.stats().bytes;
}

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
    maxBytes: 10_000,
    absentMaxBytes: 1_000,
    sizeOf,
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
    maxBytes: 10_000,
    absentMaxBytes: 1_000,
    sizeOf,
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
