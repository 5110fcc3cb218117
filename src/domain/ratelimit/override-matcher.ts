import type { RatelimitOverrideRecord } from "../../storage/records.js";

interface Wildcard {
  override: RatelimitOverrideRecord;
  /** Characters of the pattern that are not `*`: the more, the more specific. */
  literalLength: number;
}

/**
 * Picks the override that applies to an identifier: the override stored under exactly that identifier, else the
 * matching wildcard pattern with the most literal characters (`*` matches any run of characters, anything else
 * only itself), ties going to the pattern that sorts first. Built once per namespace revision.
 */
export class OverrideMatcher {
  private readonly exact = new Map<string, RatelimitOverrideRecord>();
  private readonly wildcards: Wildcard[] = [];

  constructor(overrides: Iterable<RatelimitOverrideRecord>) {
    for (const override of overrides) {
      if (override.identifier.includes("*")) {
        this.wildcards.push({ override, literalLength: override.identifier.replaceAll("*", "").length });
      } else {
        this.exact.set(override.identifier, override);
      }
    }
    this.wildcards.sort(
      (a, b) =>
        b.literalLength - a.literalLength ||
        (a.override.identifier < b.override.identifier ? -1 : a.override.identifier > b.override.identifier ? 1 : 0),
    );
  }

  /** How many overrides it holds. */
  get size(): number {
    return this.exact.size + this.wildcards.length;
  }

  match(identifier: string): RatelimitOverrideRecord | undefined {
    const exact = this.exact.get(identifier);
    if (exact) return exact;
    return this.wildcards.find((wildcard) => matchesWildcard(wildcard.override.identifier, identifier))?.override;
  }
}

/**
 * Whether `text` matches `pattern`, where `*` matches any run of characters (line breaks included) and every
 * other character only itself. Greedy with backtracking to the last `*`: O(pattern × text) at worst, so a
 * pattern with many stars cannot make matching blow up the way a backtracking regular expression can.
 */
export function matchesWildcard(pattern: string, text: string): boolean {
  let p = 0;
  let t = 0;
  let lastStar = -1;
  let resumeAt = 0;
  while (t < text.length) {
    if (p < pattern.length && pattern[p] === "*") {
      lastStar = p++;
      resumeAt = t;
    } else if (p < pattern.length && pattern[p] === text[t]) {
      p++;
      t++;
    } else if (lastStar !== -1) {
      // Let the last star swallow one more character and try again from there.
      p = lastStar + 1;
      t = ++resumeAt;
    } else {
      return false;
    }
  }
  while (pattern[p] === "*") p++;
  return p === pattern.length;
}
