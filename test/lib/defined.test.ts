import t from "tap";
import { defined } from "../../src/lib/defined.js";

t.test("defined() leaves out exactly the fields whose value is undefined", async (t) => {
  const input = { name: "a", meta: undefined, count: 0, flag: false, note: null, list: [] as number[] };
  const result = defined(input);
  t.same(result, { name: "a", count: 0, flag: false, note: null, list: [] });
  t.notOk("meta" in result, "an undefined field is absent, not present with undefined");
  t.equal(input.meta, undefined, "the argument is not changed");
  t.ok("meta" in input);
});
