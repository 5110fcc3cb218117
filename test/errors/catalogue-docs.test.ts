import { readFileSync } from "node:fs";
import t from "tap";
import { ERROR_CATALOGUE } from "../../src/errors/catalogue.js";

/** Rows of the catalogue table in docs/errors.md: | `code` | status | title | meaning | */
function documentedRows(): Map<string, { status: number; title: string; meaning: string }> {
  const text = readFileSync(new URL("../../../docs/errors.md", import.meta.url), "utf8");
  const catalogue = text.slice(text.indexOf("## Catalogue"));
  const rows = new Map<string, { status: number; title: string; meaning: string }>();
  for (const line of catalogue.split("\n")) {
    const match = /^\| `([^`]+)` \| (\d{3}) \| ([^|]+) \| ([^|]+) \|$/.exec(line.trim());
    if (match)
      rows.set(match[1] as string, { status: Number(match[2]), title: (match[3] as string).trim(), meaning: (match[4] as string).trim() });
  }
  return rows;
}

t.test("docs/errors.md lists exactly the codes of the catalogue, with the same status, title and meaning", async (t) => {
  const documented = documentedRows();
  const catalogued = new Map(Object.entries(ERROR_CATALOGUE));
  t.same(
    [...documented.keys()].filter((code) => !catalogued.has(code)),
    [],
    "no documented code is missing from the catalogue",
  );
  t.same(
    [...catalogued.keys()].filter((code) => !documented.has(code)),
    [],
    "no catalogued code is missing from the docs",
  );
  for (const [code, entry] of catalogued) {
    const row = documented.get(code);
    if (!row) continue;
    t.same(row, { status: entry.status, title: entry.title, meaning: entry.meaning }, code);
  }
});

t.test("codes follow err:{system}:{category}:{specific}", async (t) => {
  for (const code of Object.keys(ERROR_CATALOGUE)) t.match(code, /^err:[a-z_]+:[a-z_]+:[a-z_]+$/, code);
});
