// Copies the files the compiled code reads at run time (the Redis scripts, src/**/*.lua) next to it, since tsc
// copies only what it compiles. Usage: node scripts/copy-assets.mjs <outDir>   (dist, or build/src for tests)
import { cpSync } from "node:fs";

const outDir = process.argv[2];
if (!outDir) {
  console.error("usage: node scripts/copy-assets.mjs <outDir>");
  process.exit(2);
}
cpSync("src", outDir, { recursive: true, filter: (source) => !/\.[cm]?ts$/.test(source) });
