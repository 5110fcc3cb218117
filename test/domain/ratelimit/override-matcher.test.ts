import t from "tap";
import { matchesWildcard, OverrideMatcher } from "../../../src/domain/ratelimit/override-matcher.js";
import type { RatelimitOverrideRecord } from "../../../src/storage/records.js";

const override = (identifier: string, limit = 1): RatelimitOverrideRecord => ({
  id: `rlor_${identifier}`,
  workspaceId: "ws_a",
  namespaceId: "rlns_1",
  identifier,
  limit,
  durationMs: 1_000,
  createdAt: 0,
});

t.test("* matches any run of characters, everything else only itself", async (t) => {
  const cases: [string, string, boolean][] = [
    ["*@example.com", "bob@example.com", true],
    ["*@example.com", "@example.com", true],
    ["*@example.com", "bob@example.org", false],
    ["*@example.com", "bob@exampleXcom", false],
    ["invite:*", "invite:42", true],
    ["invite:*", "invit:42", false],
    ["prefix*suffix", "prefix-middle-suffix", true],
    ["prefix*suffix", "prefixsuffix", true],
    ["prefix*suffix", "prefix-suffix-more", false],
    ["a*b*c", "aXbYbZc", true],
    ["*", "anything\nat all", true],
    ["(a+)+$[x]", "(a+)+$[x]", true],
    ["(a+)+$[x]", "aaaa", false],
    ["**", "", true],
  ];
  for (const [pattern, text, expected] of cases) t.equal(matchesWildcard(pattern, text), expected, `${pattern} vs ${JSON.stringify(text)}`);
});

t.test("a pattern full of stars cannot make matching slow", async (t) => {
  const pattern = `${"*a".repeat(120)}*b`;
  const text = "a".repeat(255);
  t.equal(matchesWildcard(pattern, text), false);
});

t.test("an exact identifier wins over every pattern; among patterns the longest literal text wins", async (t) => {
  const matcher = new OverrideMatcher([override("*"), override("user:*"), override("user:42"), override("user:4*"), override("*:42")]);
  t.equal(matcher.match("user:42")?.identifier, "user:42", "exact first");
  t.equal(matcher.match("user:43")?.identifier, "user:4*", "6 literal characters beat 5");
  t.equal(matcher.match("user:51")?.identifier, "user:*");
  t.equal(matcher.match("team:42")?.identifier, "*:42");
  t.equal(matcher.match("other")?.identifier, "*", "a lone * matches everything that nothing else does");
  t.equal(new OverrideMatcher([override("user:*")]).match("team:1"), undefined);
});

t.test("ties between equally long patterns go to the pattern that sorts first, whatever the order given", async (t) => {
  const patterns = ["a*c", "*bc", "ab*"];
  for (const order of [patterns, [...patterns].reverse(), [patterns[1], patterns[2], patterns[0]]]) {
    const matcher = new OverrideMatcher((order as string[]).map((identifier) => override(identifier)));
    t.equal(matcher.match("abc")?.identifier, "*bc");
  }
});
