import t from "tap";
import { andThen } from "../../src/lib/awaitable.js";

t.test("andThen applies the next step at once to a value, and returns its result as is", async (t) => {
  const result = andThen(2, (value) => value * 10);
  t.equal(result, 20, "not a promise");
});

t.test("andThen waits for a promise, and passes its rejection through without calling the next step", async (t) => {
  const later = andThen(Promise.resolve(2), (value) => value * 10);
  t.ok(later instanceof Promise);
  t.equal(await later, 20);
  let called = false;
  await t.rejects(
    async () =>
      andThen(Promise.reject(new Error("down")), () => {
        called = true;
      }),
    /down/,
  );
  t.notOk(called);
});

t.test("a next step that returns a promise makes the result one", async (t) => {
  const result = andThen(2, async (value) => value * 10);
  t.ok(result instanceof Promise);
  t.equal(await result, 20);
});
