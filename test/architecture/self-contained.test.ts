import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import t from "tap";

// The repository explains itself: no source file, test or doc names a document that a clone does not have. The API
// rules such documents held are in docs/decisions.md; a comment points there (`docs/decisions.md#credits`) or states
// the rule itself.

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "../../..");

/** What is checked, relative to the repository's root. */
const SCOPE = ["src", "test", "bench", "docs", "dashboard/src", "examples", "README.md"];

/**
 * Citations of documents outside the repository. Each pattern is written so that its own source text does not
 * match it (a character class or an escape breaks the word), so this file passes its own check.
 */
const OUTSIDE: readonly RegExp[] = [
  /api[-]decisions/i,
  /unkey[-]v2[-]facts/i,
  /gateway[-]anchors/i,
  /style[-]models/i,
  /\.\.\/shared\b/,
  /\/work\/shared\b/,
  /\bspec\s*§/i,
  /\breference\s*§/i,
  /\bUnkey S\d+\b/,
];

function citesOutside(text: string): boolean {
  return OUTSIDE.some((pattern) => pattern.test(text));
}

/** The files under SCOPE that git tracks; every file there when this is not a git checkout (an unpacked archive). */
function filesInScope(): string[] {
  try {
    const listed = execFileSync("git", ["ls-files", "-z", "--", ...SCOPE], { cwd: ROOT, encoding: "utf8" });
    return listed.split("\0").filter((path) => path !== "" && existsSync(join(ROOT, path)));
  } catch {
    return SCOPE.filter((path) => existsSync(join(ROOT, path))).flatMap((path) => walk(join(ROOT, path)));
  }
}

function walk(path: string): string[] {
  if (!statSync(path).isDirectory()) return [relative(ROOT, path)];
  return readdirSync(path).flatMap((name) => walk(join(path, name)));
}

/** The file's text, or undefined for a binary file (an image). */
function textOf(path: string): string | undefined {
  const bytes = readFileSync(join(ROOT, path));
  return bytes.includes(0) ? undefined : bytes.toString("utf8");
}

const files = filesInScope();

t.test("the patterns catch the citations they are for", async (t) => {
  // Built from parts, so that this file does not cite anything itself.
  const examples = [
    ["api", "decisions.md"].join("-"),
    ["..", "shared", "docs"].join("/"),
    ["spec", "§4.2"].join(" "),
    ["reference", "§8"].join(" "),
    ["Unkey", "S25"].join(" "),
    ["unkey", "v2", "facts.md"].join("-"),
  ];
  for (const example of examples) t.ok(citesOutside(example), example);
  t.notOk(citesOutside("RFC 9110 §7.6.1"), "a public standard's section is not an outside document");
});

t.test("no tracked source, test or doc cites a document outside the repository", async (t) => {
  t.ok(files.length > 300, `${files.length} files read`);
  const hits: string[] = [];
  for (const path of files) {
    const text = textOf(path);
    if (text === undefined) continue;
    for (const [index, line] of text.split("\n").entries()) {
      if (citesOutside(line)) hits.push(`${path}:${index + 1}: ${line.trim()}`);
    }
  }
  t.same(hits, [], "point at docs/decisions.md#<heading> or state the rule instead");
});

t.test("every anchor of docs/decisions.md that a file cites is one of its headings", async (t) => {
  const decisions = readFileSync(join(ROOT, "docs/decisions.md"), "utf8");
  // The anchors a Markdown renderer makes of the headings: lower case, punctuation dropped, spaces as hyphens.
  const anchors = new Set(
    [...decisions.matchAll(/^#{2,6} (.+)$/gm)].map((match) =>
      (match[1] as string)
        .toLowerCase()
        .replace(/[^\w\- ]/g, "")
        .replaceAll(" ", "-"),
    ),
  );
  const unknown: string[] = [];
  for (const path of files) {
    const text = textOf(path);
    if (text === undefined) continue;
    for (const match of text.matchAll(/decisions\.md#([\w-]+)/g)) {
      if (!anchors.has(match[1] as string)) unknown.push(`${path}: #${match[1]}`);
    }
  }
  t.same(unknown, [], `anchors: ${[...anchors].join(", ")}`);
});
